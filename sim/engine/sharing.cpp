#include "sim/engine/sharing.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <thread>

#include "sim/graph/edit.hpp"

namespace bneck {

namespace {
void solve_shares(const std::vector<ShareDemand>& ops, std::uint32_t sm_count, std::vector<double>& rates,
                  std::vector<std::uint8_t>* binding);
}  // namespace

void solve_rates(const std::vector<ShareDemand>& given, std::uint32_t sm_count, std::vector<double>& rates,
                 std::vector<std::uint8_t>* binding, double drain_weight) {
  // Drains (rare): a draining op's SMs are free; a compute-bound kernel after it waits.
  thread_local std::vector<ShareDemand> adjusted;
  thread_local std::vector<std::uint8_t> held;
  const std::vector<ShareDemand>* in = &given;
  held.clear();
  if (std::any_of(given.begin(), given.end(), [](const ShareDemand& d) { return d.draining; })) {
    adjusted = given;
    held.assign(given.size(), 0);
    bool drain_seen = false;
    for (std::size_t i = 0; i < adjusted.size(); ++i) {
      ShareDemand& d = adjusted[i];
      if (d.draining) {
        d.sms = 0;
        if (d.bandwidth_bound()) d.weight = static_cast<float>(drain_weight);  // a streaming kernel's retiring blocks
        drain_seen = true;
      } else if (drain_seen && d.sms > 0 && !d.bandwidth_bound() && !d.fixed_rate) {
        d = ShareDemand{};
        held[i] = 1;
      }
    }
    in = &adjusted;
  }
  const std::vector<ShareDemand>& ops = *in;
  solve_shares(ops, sm_count, rates, binding);
  for (std::size_t i = 0; i < held.size(); ++i)
    if (held[i]) {
      rates[i] = 0;
      if (binding) (*binding)[i] = 1;
    }
}

namespace {
// SMs in start order: each op takes the SMs with room for its footprint; one short of the SMs it
// asked for runs at the share it got. (Only when the footprints do not all fit on one SM.)
void share_sms(const std::vector<ShareDemand>& ops, std::uint32_t sms_total, std::vector<double>& rates,
               std::vector<std::uint8_t>* binding) {
  const std::size_t n = ops.size();
  constexpr double kEps = 1e-9;
  // Groups of SMs with the same room left, roomiest first; a group list never grows past n + 1
  // entries (each op splits at most one group), so small problems (the usual few ops on a GPU)
  // stay on the stack.
  struct Group {           // no initializers: the stack buffer is not cleared on every solve
    double first;          // room left on each SM of the group
    std::uint32_t second;  // SMs in the group
  };
  constexpr std::size_t kStack = 32;
  Group stack_buf[3 * (kStack + 2)];
  std::vector<Group> heap_buf;
  Group* buf = stack_buf;
  const std::size_t cap = n + 2;
  if (n > kStack) {
    heap_buf.resize(3 * cap);
    buf = heap_buf.data();
  }
  Group *groups = buf, *taken = buf + cap, *rest = buf + 2 * cap;
  std::size_t ng = 1;
  groups[0] = {1.0, sms_total};
  for (std::size_t i = 0; i < n; ++i) {
    const ShareDemand& d = ops[i];
    if (d.sms == 0 || d.sm_fraction <= 0) continue;
    std::uint32_t need = std::min(d.sms, sms_total), got = 0;
    const double f = std::min<double>(d.sm_fraction, 1.0);
    // The op takes SMs from the roomiest groups down: the groups it takes from, less f, stay in
    // order among themselves, as do the rest; merging the two keeps the list sorted.
    std::size_t nt = 0, nr = 0;
    for (std::size_t k = 0; k < ng; ++k) {
      auto [room, count] = groups[k];
      std::uint32_t take = room + kEps >= f ? std::min(count, need - got) : 0;
      got += take;
      if (take) taken[nt++] = {room - f, take};
      if (count > take) rest[nr++] = {room, count - take};
    }
    ng = 0;
    std::size_t x = 0, y = 0;
    while (x < nt || y < nr) {
      const Group& g = y == nr || (x < nt && taken[x].first > rest[y].first) ? taken[x++] : rest[y++];
      if (ng && std::fabs(groups[ng - 1].first - g.first) < kEps)
        groups[ng - 1].second += g.second;
      else
        groups[ng++] = g;
    }
    if (got < need && d.fixed_rate && d.needs_sms) {  // a collective's blocks not all resident: it waits
      rates[i] = 0;
      if (binding) (*binding)[i] = 1;
    }
    if (got < need && !d.fixed_rate) {
      rates[i] = static_cast<double>(got) / need;
      if (d.tiles > 0 && got > 0) {  // rounds of tiles on the SMs asked over those got
        const double asked = std::ceil(static_cast<double>(d.tiles) / need);
        rates[i] = asked / (std::ceil(static_cast<double>(d.tiles) / got) + (asked >= 2 ? kShortRoundsLate : 0.0));
      }
      if (binding) (*binding)[i] = 1;
    }
  }
}

// Bandwidth: HBM, each PCIe direction and the PCIe link as a whole, each of capacity 1.
// Fixed-rate ops take theirs; the others share the rest max-min fairly by weight (progressive
// filling: every unfrozen op's rate rises as level x its weight until a resource fills, freezing
// the ops that use it, or the op reaches its SM-bound rate).
void share_bandwidth(const std::vector<ShareDemand>& ops, std::vector<double>& rates, std::vector<std::uint8_t>* binding) {
  const std::size_t n = ops.size();
  constexpr double kEps = 1e-9;
  constexpr int kR = 4;
  // Each op's use of each resource, gathered once (on the stack for the usual few ops).
  constexpr std::size_t kStackOps = 32;
  double use_stack[kStackOps][kR];
  std::uint8_t frozen_stack[kStackOps];
  std::vector<double> use_heap;
  std::vector<std::uint8_t> frozen_heap;
  double* use = &use_stack[0][0];
  std::uint8_t* frozen = frozen_stack;
  if (n > kStackOps) {
    use_heap.resize(n * kR);
    frozen_heap.resize(n);
    use = use_heap.data();
    frozen = frozen_heap.data();
  }
  double left[kR] = {1, 1, 1, 1}, want[kR] = {0, 0, 0, 0};
  bool any = false;
  for (std::size_t i = 0; i < n; ++i) {
    const ShareDemand& d = ops[i];
    double* u = use + i * kR;
    u[0] = d.hbm;
    u[1] = d.pcie_h2d;
    u[2] = d.pcie_d2h;
    u[3] = d.pcie;
    for (int r = 0; r < kR; ++r) {
      if (u[r] <= 0) continue;
      if (d.fixed_rate)
        left[r] -= rates[i] * u[r];  // 1, or 0 waiting for its SMs
      else {
        want[r] += rates[i] * u[r];
        any = true;
      }
    }
  }
  if (!any) return;
  bool contended = false;
  for (int r = 0; r < kR; ++r) {
    left[r] = std::max(left[r], 0.0);
    contended = contended || want[r] > left[r] + kEps;
  }
  if (!contended) return;
  std::size_t open = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double* u = use + i * kR;
    frozen[i] = 1;
    const bool uses = u[0] > 0 || u[1] > 0 || u[2] > 0 || u[3] > 0;
    if (!ops[i].fixed_rate && uses && rates[i] > 0) {
      frozen[i] = 0;
      ++open;
    } else if (!ops[i].fixed_rate) {  // frozen at its SM-bound rate: takes its bandwidth first
      for (int r = 0; r < kR; ++r) left[r] -= rates[i] * u[r];
    }
  }
  while (open > 0) {
    double level = std::numeric_limits<double>::infinity();
    double weight_sum[kR] = {0, 0, 0, 0};
    for (std::size_t i = 0; i < n; ++i) {
      if (frozen[i]) continue;
      const double w = std::max(1e-6f, ops[i].weight);
      level = std::min(level, rates[i] / w);  // its SM-bound rate
      for (int r = 0; r < kR; ++r) weight_sum[r] += w * use[i * kR + r];
    }
    int bottleneck = -1;
    for (int r = 0; r < kR; ++r)
      if (weight_sum[r] > 0) {
        double l = std::max(left[r], 0.0) / weight_sum[r];
        if (l < level - kEps) {
          level = l;
          bottleneck = r;
        }
      }
    for (std::size_t i = 0; i < n; ++i) {
      if (frozen[i]) continue;
      const double* u = use + i * kR;
      const double w = std::max(1e-6f, ops[i].weight);
      bool at_cap = rates[i] / w <= level + kEps;
      bool on_bottleneck = bottleneck >= 0 && u[bottleneck] > 0;
      if (!at_cap && !on_bottleneck) continue;
      if (!at_cap) {
        rates[i] = level * w;
        if (binding) (*binding)[i] = bottleneck == 0 ? 2 : 3;
      }
      for (int r = 0; r < kR; ++r) left[r] -= rates[i] * u[r];
      frozen[i] = 1;
      --open;
    }
  }
}

void solve_shares(const std::vector<ShareDemand>& ops, std::uint32_t sm_count, std::vector<double>& rates,
                  std::vector<std::uint8_t>* binding) {
  const std::size_t n = ops.size();
  rates.assign(n, 1.0);
  if (binding) binding->assign(n, 0);
  if (n == 0) return;
  const std::uint32_t sms_total = std::max<std::uint32_t>(sm_count, 1);
  constexpr double kEps = 1e-9;
  // When the footprints of all the ops fit on one SM together, each gets every SM it asks for.
  double total_fraction = 0;
  for (const ShareDemand& d : ops)
    if (d.sms > 0 && d.sm_fraction > 0) total_fraction += std::min<double>(d.sm_fraction, 1.0);
  if (total_fraction > 1.0 + kEps) share_sms(ops, sms_total, rates, binding);
  share_bandwidth(ops, rates, binding);
}

}  // namespace

namespace {
constexpr std::size_t kDemandWords = 9;
void pack(const ShareDemand& d, std::uint32_t* w) {
  auto bits = [](float f) {
    std::uint32_t u = 0;
    std::memcpy(&u, &f, sizeof u);
    return u;
  };
  w[0] = d.sms;
  w[1] = bits(d.sm_fraction);
  w[2] = bits(d.hbm);
  w[3] = bits(d.pcie_h2d);
  w[4] = bits(d.pcie_d2h);
  w[5] = bits(d.pcie);
  w[6] = bits(d.weight);
  w[7] = (d.fixed_rate ? 1u : 0u) | (d.needs_sms ? 2u : 0u);
  w[8] = d.tiles;
}
std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h = (h ^ v) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}
}  // namespace

std::uint32_t RateSolver::intern(const ShareDemand& given) {
  std::uint32_t w[kDemandWords];
  pack(given, w);
  std::uint64_t h = 0x51ED270B2D3A4E15ull;
  for (std::size_t k = 0; k + 1 < kDemandWords; k += 2) h = mix(h, std::uint64_t{w[k]} << 32 | w[k + 1]);
  h = mix(h, w[kDemandWords - 1]);
  if (demand_slots_.empty()) demand_slots_.assign(64, kNone);
  const std::size_t mask = demand_slots_.size() - 1;
  for (std::size_t s = h & mask;; s = (s + 1) & mask) {
    const std::uint32_t id = demand_slots_[s];
    if (id == kNone) break;
    if (demand_hash_[id] == h && std::equal(w, w + kDemandWords, packed_.begin() + std::ptrdiff_t{id} * kDemandWords)) return id;
  }
  if (demands_.size() >= kMaxDemands) return kNone;
  const auto id = static_cast<std::uint32_t>(demands_.size());
  ShareDemand d = given;
  d.draining = false;
  demands_.push_back(d);
  demand_hash_.push_back(h);
  packed_.insert(packed_.end(), w, w + kDemandWords);
  if (2 * demands_.size() > demand_slots_.size()) {  // grow, keeping the load under a half
    demand_slots_.assign(demand_slots_.size() * 2, kNone);
    const std::size_t m = demand_slots_.size() - 1;
    for (std::uint32_t k = 0; k < demands_.size(); ++k) {
      std::size_t s = demand_hash_[k] & m;
      while (demand_slots_[s] != kNone) s = (s + 1) & m;
      demand_slots_[s] = k;
    }
  } else {
    std::size_t s = h & mask;
    while (demand_slots_[s] != kNone) s = (s + 1) & mask;
    demand_slots_[s] = id;
  }
  return id;
}

RateSolver::Rates RateSolver::solve(const std::uint32_t* keys, std::size_t n) {
  std::uint64_t h = mix(0x2545F4914F6CDD1Dull, n);
  for (std::size_t k = 0; k < n; ++k) h = mix(h, keys[k]);
  if (table_.empty()) table_.resize(1024);
  std::size_t mask = table_.size() - 1;
  std::size_t s = h & mask;
  for (;; s = (s + 1) & mask) {
    const Entry& e = table_[s];
    if (!e.used) break;
    if (e.hash == h && e.n == n) {
      const std::uint32_t* have = keys_.data() + e.at;
      std::size_t k = 0;
      while (k < n && have[k] == keys[k]) ++k;  // a few words: no call
      if (k == n) return {&rates_[e.at], &bindings_[e.at]};
    }
  }
  // A new problem: solved, then remembered.
  scratch_.clear();
  for (std::size_t k = 0; k < n; ++k) {
    scratch_.push_back(demands_[keys[k] >> 1]);
    scratch_.back().draining = (keys[k] & 1) != 0;
  }
  solve_rates(scratch_, sm_count_, scratch_rates_, &scratch_binding_, drain_weight_);
  if (entries_ >= kMaxEntries || keys_.size() + n > kMaxKeys) {  // start over (bounded memory)
    table_.assign(table_.size(), Entry{});
    keys_.clear();
    rates_.clear();
    bindings_.clear();
    entries_ = 0;
    s = h & mask;
  } else if (2 * (entries_ + 1) > table_.size()) {  // grow, keeping the load under a half
    std::vector<Entry> old(table_.size() * 2);
    old.swap(table_);
    mask = table_.size() - 1;
    for (const Entry& e : old)
      if (e.used) {
        std::size_t t = e.hash & mask;
        while (table_[t].used) t = (t + 1) & mask;
        table_[t] = e;
      }
    s = h & mask;
    while (table_[s].used) s = (s + 1) & mask;
  }
  Entry& e = table_[s];
  e.used = true;
  e.hash = h;
  e.n = static_cast<std::uint32_t>(n);
  e.at = static_cast<std::uint32_t>(keys_.size());
  keys_.insert(keys_.end(), keys, keys + n);
  rates_.insert(rates_.end(), scratch_rates_.begin(), scratch_rates_.end());
  bindings_.insert(bindings_.end(), scratch_binding_.begin(), scratch_binding_.end());
  ++entries_;
  return {&rates_[e.at], &bindings_[e.at]};
}

namespace {

// One GPU's device ops as the trace shows them, swept in start order.
struct DeviceSweep {
  struct Active {
    OpId op;
    TimeNs end;
    ShareDemand demand;
    bool has_demand;
    double lost;               // ns of alone-speed work not done while shared
    bool draining = false;     // a later kernel took SMs it had held: its blocks are retiring
    double drained = 0;        // ns of alone-speed work done while draining
    std::uint32_t id = kNone;  // its demand's in `solver` (kNone: not interned yet, or not internable)
    bool interned = false;
  };
  std::vector<Active> active;  // in start order
  TimeNs prev = 0;
  std::optional<RateSolver> solver;
};

struct In {
  EdgeProps* p;
  TimeNs src_time;
};

// Launch and stream-order in-edges of a kernel (from its launch call and its stream's previous op).
void in_edges(Graph& g, OpId u, OpId prev, std::vector<In>& out) {
  const Trace& t = *g.trace;
  out.clear();
  for (OpId src : {t.ops[u].link, prev}) {
    if (src == kNone) continue;
    for (auto e : boost::make_iterator_range(boost::out_edges(src, g.csr))) {
      EdgeProps& p = g.csr[e];
      if (boost::target(e, g.csr) != u) continue;
      if (p.type() != EdgeType::Launch && p.type() != EdgeType::GraphLaunch && p.type() != EdgeType::StreamOrder) continue;
      out.push_back({&p, p.attach() == DepType::StartToStart ? t.ops[src].start : t.ops[src].end()});
    }
  }
}

std::uint32_t device_of(const Graph& g, OpId i) {
  const Op& o = g.trace->ops[i];
  if (!is_device_op(o.kind) || o.duration() <= 0) return kNone;
  return g.device(i);
}

// The shortest delay of each edge type into a device's kernels (what a launch or a stream's next
// op needs when nothing holds it back), by device and in-edge type (launch, graph launch, stream).
// Devices by a dense slot, in order of appearance (a trace's device ids can be anything).
struct NominalDelays {
  static constexpr std::size_t kTypes = static_cast<std::size_t>(EdgeType::StreamOrder) + 1;
  std::vector<std::uint32_t> slot_dev;
  std::uint32_t last_dev = kNone, last_slot = 0;
  std::vector<TimeNs> delay;

  std::uint32_t slot_of(std::uint32_t dev) {
    if (dev == last_dev) return last_slot;
    auto it = std::find(slot_dev.begin(), slot_dev.end(), dev);
    last_slot = static_cast<std::uint32_t>(it - slot_dev.begin());
    if (it == slot_dev.end()) slot_dev.push_back(dev);
    last_dev = dev;
    return last_slot;
  }
  TimeNs& at(std::uint32_t dev, EdgeType type) {
    const std::size_t k = std::size_t{slot_of(dev)} * kTypes + static_cast<std::size_t>(type);
    if (k >= delay.size()) delay.resize(k + kTypes, std::numeric_limits<TimeNs>::max());
    return delay[k];
  }
  // Read-only (the sweep's parts share it).
  TimeNs of(std::uint32_t dev, EdgeType type) const {
    const auto slot = static_cast<std::size_t>(std::find(slot_dev.begin(), slot_dev.end(), dev) - slot_dev.begin());
    const std::size_t k = slot * kTypes + static_cast<std::size_t>(type);
    return k < delay.size() ? delay[k] : std::numeric_limits<TimeNs>::max();
  }
};

// The first pass over the ops: the nominal delays, and where the sweep splits in two, one part a
// thread: at an op before which no device op is still running on any GPU (nothing carries over),
// the first such op past the middle of the trace. The parts' results are merged in trace order:
// the same as one sweep.
struct FirstPass {
  NominalDelays nominal;
  OpId split = kNone;
  std::vector<OpId> prev_at_split;     // each lane's op before the split
  std::size_t device_ops[2] = {0, 0};  // timed device ops before the split and from it
};

FirstPass first_pass(Graph& g, std::size_t split_min_ops) {
  const Trace& t = *g.trace;
  FirstPass fp;
  std::vector<OpId> last_on_lane(t.lanes.size(), kNone);
  std::vector<In> first_ins;
  const bool split_wanted = t.ops.size() >= split_min_ops;
  TimeNs busy_until = std::numeric_limits<TimeNs>::min();
  for (OpId i = 0; i < t.ops.size(); ++i) {
    std::uint32_t dev = device_of(g, i);
    if (dev == kNone) continue;
    if (split_wanted && fp.split == kNone && i >= t.ops.size() / 2 && busy_until <= t.ops[i].start) {
      fp.split = i;
      fp.prev_at_split = last_on_lane;
    }
    busy_until = std::max(busy_until, t.ops[i].end());
    ++fp.device_ops[fp.split == kNone ? 0 : 1];
    OpId prev = last_on_lane[t.ops[i].lane];
    last_on_lane[t.ops[i].lane] = i;
    if (t.ops[i].kind != OpKind::Kernel) continue;
    in_edges(g, i, prev, first_ins);
    for (const In& in : first_ins) fp.nominal.at(dev, in.p->type()) = std::min(fp.nominal.at(dev, in.p->type()), in.p->delay());
  }
  return fp;
}

struct HeldCopy {
  OpId later, held;
  TimeNs delay;
};
struct Part {
  std::vector<std::pair<OpId, std::uint32_t>> lost;  // ns lost to sharing, by op
  std::vector<std::pair<NodeId, float>> drains;
  std::vector<HeldCopy> held_copies;
};

// Sweeps ops [begin, end) in start order, from no op running, given each lane's op before `begin`.
class Sweep {
 public:
  Sweep(Graph& g, const ShareModel& m, const NominalDelays& nominal, Part& out)
      : g_(g), t_(*g.trace), m_(m), nominal_(nominal), out_(out) {}

  void run(OpId begin, OpId end, std::vector<OpId> prev_on_lane, std::size_t device_ops) {
    out_.lost.reserve(device_ops);  // at most one an op: no reallocation copies
    std::uint32_t last_dev = kNone;
    DeviceSweep* last = nullptr;
    for (OpId i = begin; i < end; ++i) {
      std::uint32_t dev = device_of(g_, i);
      if (dev == kNone) continue;
      const Op& o = t_.ops[i];
      OpId prev = prev_on_lane[o.lane];
      prev_on_lane[o.lane] = i;
      if (dev != last_dev) {  // (std::map: the sweeps stay where they are)
        last = &sweeps_[dev];
        last_dev = dev;
      }
      DeviceSweep& d = *last;
      advance(dev, d, o.start);
      if (o.kind == OpKind::Kernel && !d.active.empty()) release_late_kernel(i, prev, dev, d);
      const bool have_mine = !d.active.empty();
      ShareDemand mine = have_mine ? m_.demand(i, g_) : ShareDemand{};
      if (mine.bandwidth_bound() && mine.sms > 0) drain_for(mine, dev, d);
      if (o.kind == OpKind::Memcpy && t_.copy(o)) hold_copies(i, dev, d);
      d.active.push_back({i, o.end(), mine, have_mine, 0.0});
    }
    for (auto& [dev, d] : sweeps_) advance(dev, d, std::numeric_limits<TimeNs>::max());
    // Sorted here, on the part's own thread: the parts hold disjoint runs of ops, so the parts'
    // drains one after the other are in order.
    if (!std::is_sorted(out_.drains.begin(), out_.drains.end())) std::sort(out_.drains.begin(), out_.drains.end());
  }

 private:
  ShareDemand demand_of(DeviceSweep::Active& a) {
    if (!a.has_demand) {
      a.demand = m_.demand(a.op, g_);
      a.has_demand = true;
    }
    ShareDemand dm = a.demand;
    dm.draining = a.draining;  // its SMs are free for later kernels
    return dm;
  }

  // The rate of `extra` started after the GPU's active ops for which `with(a)` holds (their
  // draining flags as they are): remembered by the GPU's RateSolver where every demand is interned.
  // `extra_id`: its id in that solver, interned here when kUnset.
  static constexpr std::uint32_t kUnset = kNone - 1;
  template <class With>
  double rate_after(std::uint32_t dev, DeviceSweep& d, With&& with, const ShareDemand& extra, std::uint32_t& extra_id) {
    if (!d.solver) d.solver.emplace(m_.sm_count(dev), m_.drain_weight(dev));
    if (extra_id == kUnset) extra_id = d.solver->intern(extra);
    keys_.clear();
    bool interned = true;
    for (auto& a : d.active) {
      if (!with(a)) continue;
      intern(d, a);
      interned = interned && a.id != kNone;
      keys_.push_back(RateSolver::key(a.id, a.draining));
    }
    if (interned && extra_id != kNone) {
      keys_.push_back(RateSolver::key(extra_id, extra.draining));
      return d.solver->solve(keys_.data(), keys_.size()).rate[keys_.size() - 1];
    }
    demands_.clear();
    for (auto& a : d.active)
      if (with(a)) demands_.push_back(demand_of(a));
    demands_.push_back(extra);
    solve_rates(demands_, m_.sm_count(dev), rates_, nullptr, m_.drain_weight(dev));
    return rates_.back();
  }
  void intern(DeviceSweep& d, DeviceSweep::Active& a) {
    if (!a.interned) {
      demand_of(a);
      a.id = d.solver->intern(a.demand);
      a.interned = true;
    }
  }

  // Integrates the rates of a GPU's active ops up to `until`, retiring those that end by then.
  void advance(std::uint32_t dev, DeviceSweep& d, TimeNs until) {
    while (true) {
      TimeNs next = until;
      for (const auto& a : d.active) next = std::min(next, a.end);
      if (!d.active.empty() && next > d.prev) {
        const auto dt = static_cast<double>(next - d.prev);
        static constexpr double kAlone = 1.0;
        const double* rates = &kAlone;
        if (d.active.size() >= 2) {
          if (!d.solver) d.solver.emplace(m_.sm_count(dev), m_.drain_weight(dev));
          auto& act = d.active;
          auto id = [&](std::size_t k) {
            intern(d, act[k]);
            return act[k].id;
          };
          auto draining = [&](std::size_t k) { return act[k].draining; };
          auto demand = [&](std::size_t k) { return demand_of(act[k]); };
          rates = d.solver->solve_ops(act.size(), id, draining, demand).rate;
          for (std::size_t k = 0; k < d.active.size(); ++k)
            if (rates[k] < 1.0 && !d.active[k].demand.fixed_rate) d.active[k].lost += (1.0 - rates[k]) * dt;
        }
        for (std::size_t k = 0; k < d.active.size(); ++k)
          if (d.active[k].draining) d.active[k].drained += rates[k] * dt;
      }
      d.prev = std::max(d.prev, next);
      bool retired = false;
      for (std::size_t k = 0; k < d.active.size();) {
        if (d.active[k].end > next) {
          ++k;
          continue;
        }
        auto cut = std::llround(d.active[k].lost);
        if (cut > 0) out_.lost.emplace_back(d.active[k].op, static_cast<std::uint32_t>(std::min<long long>(cut, 0xFFFFFFFFll)));
        if (d.active[k].draining) {
          double alone = static_cast<double>(t_.ops[d.active[k].op].duration()) - d.active[k].lost;
          if (alone > 0 && d.active[k].drained > 0)
            out_.drains.emplace_back(d.active[k].op, static_cast<float>(std::min(1.0, d.active[k].drained / alone)));
        }
        d.active.erase(d.active.begin() + static_cast<std::ptrdiff_t>(k));
        retired = true;
      }
      if (!retired || next >= until) break;
    }
  }

  // A kernel that started late because the GPU was full: a delay learned from the trace would
  // hold it back even when what filled the GPU is gone. Its launch and stream-order edges keep
  // the device's shortest delays; the engine holds it at rate 0 until SMs free up.
  void release_late_kernel(OpId i, OpId prev, std::uint32_t dev, DeviceSweep& d) {
    const Op& o = t_.ops[i];
    in_edges(g_, i, prev, ins_);
    TimeNs earliest = std::numeric_limits<TimeNs>::min();
    bool late = false;
    for (const In& in : ins_) {
      TimeNs nom = nominal_.of(dev, in.p->type());
      earliest = std::max(earliest, in.src_time + std::min(in.p->delay(), nom));
      late = late || in.p->delay() > nom;
    }
    if (late && earliest < o.start) {
      auto before = [&](const DeviceSweep::Active& a) { return t_.ops[a.op].start <= earliest; };
      std::uint32_t id = kUnset;
      if (std::any_of(d.active.begin(), d.active.end(), before) && rate_after(dev, d, before, m_.demand(i, g_), id) == 0)
        for (const In& in : ins_) in.p->set_delay(std::min(in.p->delay(), nominal_.of(dev, in.p->type())));
    }
  }

  // A bandwidth-bound kernel that started while the GPU's SMs were full of earlier kernels got
  // SMs that one of them released: that one was draining (its last blocks retiring). The
  // earliest-ending holders drain from here until the newcomer has room; a draining kernel keeps
  // its bandwidth demand. (A compute-bound newcomer gains nothing from a drain: it waits.)
  void drain_for(const ShareDemand& mine, std::uint32_t dev, DeviceSweep& d) {
    // It can only be shut out if no SM has room for its footprint: the others claim more than
    // SMs x (1 - its fraction).
    double claims = 0;
    for (auto& a : d.active) {
      ShareDemand ad = demand_of(a);
      if (!ad.draining) claims += static_cast<double>(ad.sms) * std::min(1.0f, ad.sm_fraction);
    }
    const double room = static_cast<double>(m_.sm_count(dev)) * (1.0 - std::min(1.0f, mine.sm_fraction));
    std::uint32_t mine_id = kUnset;
    for (std::size_t guard = 0; claims > room - 1e-6 && guard < d.active.size(); ++guard) {
      if (rate_after(
              dev, d, [](const DeviceSweep::Active&) { return true; }, mine, mine_id) > 0)
        break;
      DeviceSweep::Active* first = nullptr;
      for (auto& a : d.active)
        if (!a.draining && a.demand.sms > 0 && (!first || a.end < first->end)) first = &a;
      if (!first) break;
      first->draining = true;
      claims -= static_cast<double>(first->demand.sms) * std::min(1.0f, first->demand.sm_fraction);
    }
  }

  // Copy engines: a copy that the trace shows ending with a later copy of the same kind, which
  // started while it ran (within 1 % or 5 us), finished its own work when the later one began:
  // the engines serialize same-kind copies and CUPTI reports the earlier one's end late (seen on
  // H200: two 1 GiB D2D copies on two streams, 507 us each alone, the first "ending" 3 us before
  // the second, 1006 us after it began). Its time past the later copy's start is held, not
  // shared, and an end -> end edge keeps its measured end in replay.
  void hold_copies(OpId i, std::uint32_t dev, DeviceSweep& d) {
    const Op& o = t_.ops[i];
    const TimeNs tol = std::max<TimeNs>(5 * kNsPerUs, o.duration() / 100);
    for (auto& a : d.active) {
      const Op& ao = t_.ops[a.op];
      if (ao.kind != OpKind::Memcpy || !t_.copy(ao) || t_.copy(ao)->copy_kind != t_.copy(o)->copy_kind) continue;
      if (ao.start >= o.start || a.end <= o.start || std::llabs(ao.end() - o.end()) > tol) continue;
      a.lost += static_cast<double>(ao.end() - o.start);
      a.end = o.start;
      out_.held_copies.push_back({i, a.op, ao.end() - o.end()});
    }
    advance(dev, d, o.start);  // retires the copies it ended
  }

  Graph& g_;
  const Trace& t_;
  const ShareModel& m_;
  const NominalDelays& nominal_;
  Part& out_;
  std::map<std::uint32_t, DeviceSweep> sweeps_;
  std::vector<ShareDemand> demands_;
  std::vector<double> rates_;
  std::vector<In> ins_;
  std::vector<std::uint32_t> keys_;
};

}  // namespace

void calibrate_sharing(Graph& g, const ShareModel& m, std::size_t split_min_ops) {
  const Trace& t = *g.trace;
  g.sharing_lost.clear();
  g.sharing_drain.clear();
  FirstPass fp = first_pass(g, split_min_ops);
  const OpId n = static_cast<OpId>(t.ops.size());
  Part parts[2];
  std::vector<OpId> none_yet(t.lanes.size(), kNone);
  if (fp.split == kNone) {
    Sweep(g, m, fp.nominal, parts[0]).run(0, n, std::move(none_yet), fp.device_ops[0]);
  } else {
    std::exception_ptr failed;
    std::thread second([&] {
      try {
        Sweep(g, m, fp.nominal, parts[1]).run(fp.split, n, std::move(fp.prev_at_split), fp.device_ops[1]);
      } catch (...) { failed = std::current_exception(); }
    });
    try {
      Sweep(g, m, fp.nominal, parts[0]).run(0, fp.split, std::move(none_yet), fp.device_ops[0]);
    } catch (...) {
      second.join();
      throw;
    }
    second.join();
    if (failed) std::rethrow_exception(failed);
  }
  for (Part& p : parts) {
    for (auto [op, ns] : p.lost) g.set_lost_to_sharing(op, ns);
    g.sharing_drain.insert(g.sharing_drain.end(), p.drains.begin(), p.drains.end());
  }
  if (!std::is_sorted(g.sharing_drain.begin(), g.sharing_drain.end())) std::sort(g.sharing_drain.begin(), g.sharing_drain.end());
  if (!parts[0].held_copies.empty() || !parts[1].held_copies.empty()) {
    GraphEditor ed(g, "copy-engine completion order");
    for (const Part& p : parts)
      for (const HeldCopy& h : p.held_copies) ed.add_edge(h.later, h.held, EdgeType::CopyEngine, DepType::EndToEnd, h.delay);
    ed.commit();
  }
}

}  // namespace bneck
