#include "sim/engine/sharing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace bneck {

void solve_rates(const std::vector<ShareDemand>& ops, std::uint32_t sm_count, std::vector<double>& rates,
                 std::vector<std::uint8_t>* binding) {
  const std::size_t n = ops.size();
  rates.assign(n, 1.0);
  if (binding) binding->assign(n, 0);
  if (n == 0) return;
  // SMs in start order. Groups of SMs with the same room left, roomiest first.
  std::vector<std::pair<double, std::uint32_t>> groups{{1.0, std::max<std::uint32_t>(sm_count, 1)}};
  constexpr double kEps = 1e-9;
  for (std::size_t i = 0; i < n; ++i) {
    const ShareDemand& d = ops[i];
    if (d.sms == 0 || d.sm_fraction <= 0) continue;
    std::uint32_t need = std::min(d.sms, std::max<std::uint32_t>(sm_count, 1)), got = 0;
    const double f = std::min<double>(d.sm_fraction, 1.0);
    std::vector<std::pair<double, std::uint32_t>> next;
    for (auto [room, count] : groups) {
      std::uint32_t take = room + kEps >= f ? std::min(count, need - got) : 0;
      got += take;
      if (take) next.emplace_back(room - f, take);
      if (count > take) next.emplace_back(room, count - take);
    }
    std::sort(next.begin(), next.end(), [](auto& a, auto& b) { return a.first > b.first; });
    groups.clear();  // merge equal rooms
    for (auto& g : next) {
      if (!groups.empty() && std::fabs(groups.back().first - g.first) < kEps) groups.back().second += g.second;
      else groups.push_back(g);
    }
    if (got < need && !d.fixed_rate) {
      rates[i] = static_cast<double>(got) / need;
      if (binding) (*binding)[i] = 1;
    }
  }
  // HBM: fixed-rate ops take theirs; the others share the rest max-min fairly (water-filling on
  // the rate, each capped by its SM share).
  double left = 1.0;
  std::vector<std::size_t> flex;
  for (std::size_t i = 0; i < n; ++i) {
    if (ops[i].fixed_rate) left -= ops[i].hbm;
    else if (ops[i].hbm > 0) flex.push_back(i);
  }
  left = std::max(left, 0.0);
  double want = 0;
  for (std::size_t i : flex) want += rates[i] * ops[i].hbm;
  if (want <= left + kEps) return;
  std::sort(flex.begin(), flex.end(), [&](std::size_t a, std::size_t b) { return rates[a] < rates[b]; });
  double weight = 0;
  for (std::size_t i : flex) weight += ops[i].hbm;
  for (std::size_t k = 0; k < flex.size(); ++k) {
    std::size_t i = flex[k];
    double level = weight > 0 ? left / weight : 0;  // the common rate of the ops not yet capped
    if (rates[i] <= level) {                         // capped below the level: keeps its rate
      left -= rates[i] * ops[i].hbm;
      weight -= ops[i].hbm;
      continue;
    }
    for (std::size_t j = k; j < flex.size(); ++j) {
      rates[flex[j]] = level;
      if (binding) (*binding)[flex[j]] = 2;
    }
    break;
  }
}

namespace {

void late_starts(Graph& g, const ShareModel& m, std::uint32_t dev, const std::vector<std::pair<TimeNs, std::int64_t>>& sweep) {
  const Trace& t = *g.trace;
  // The device's kernels in start order, and each one's launch and stream-order in-edges (from its
  // launch call and from the previous op of its stream).
  std::vector<OpId> kernels, prev;
  std::map<LaneId, OpId> last_on_lane;
  for (auto [tm, code] : sweep) {
    if (code <= 0) continue;
    OpId o = static_cast<OpId>(code - 1);
    auto it = last_on_lane.find(t.ops[o].lane);
    if (t.ops[o].kind == OpKind::Kernel) {
      kernels.push_back(o);
      prev.push_back(it == last_on_lane.end() ? kNone : it->second);
    }
    last_on_lane[t.ops[o].lane] = o;
  }
  struct In {
    EdgeProps* p;
    TimeNs src_time;
  };
  auto in_edges = [&](std::size_t k) {
    std::vector<In> out;
    OpId u = kernels[k];
    for (OpId src : {t.ops[u].link, prev[k]}) {
      if (src == kNone) continue;
      for (auto e : boost::make_iterator_range(boost::out_edges(src, g.csr))) {
        EdgeProps& p = g.csr[e];
        if (boost::target(e, g.csr) != u) continue;
        if (p.type() != EdgeType::Launch && p.type() != EdgeType::GraphLaunch && p.type() != EdgeType::StreamOrder) continue;
        out.push_back({&p, p.attach() == DepType::StartToStart ? t.ops[src].start : t.ops[src].end()});
      }
    }
    return out;
  };
  // The shortest delay of each edge type on this device (what a launch or a stream's next op needs).
  std::map<EdgeType, TimeNs> nominal;
  for (std::size_t k = 0; k < kernels.size(); ++k)
    for (const In& in : in_edges(k)) {
      auto [it, fresh] = nominal.emplace(in.p->type(), in.p->delay());
      if (!fresh) it->second = std::min(it->second, in.p->delay());
    }
  std::vector<ShareDemand> d;
  std::vector<double> rates;
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    OpId u = kernels[k];
    std::vector<In> ins = in_edges(k);
    TimeNs earliest = std::numeric_limits<TimeNs>::min();
    bool late = false;
    for (const In& in : ins) {
      earliest = std::max(earliest, in.src_time + std::min(in.p->delay(), nominal[in.p->type()]));
      late = late || in.p->delay() > nominal[in.p->type()];
    }
    if (!late || earliest >= t.ops[u].start) continue;
    // What ran on the GPU at `earliest` and still ran when u started, in start order.
    d.clear();
    for (auto [tm, code] : sweep) {
      if (code <= 0) continue;
      OpId o = static_cast<OpId>(code - 1);
      if (o == u || t.ops[o].start > earliest) continue;
      if (t.ops[o].end() >= t.ops[u].start) d.push_back(m.demand(o, g));
    }
    if (d.empty()) continue;
    d.push_back(m.demand(u, g));
    solve_rates(d, m.sm_count(dev), rates);
    if (rates.back() > 0) continue;
    for (const In& in : ins) in.p->set_delay(std::min(in.p->delay(), nominal[in.p->type()]));
  }
}

}  // namespace

void calibrate_sharing(Graph& g, const ShareModel& m) {
  g.alone.clear();
  const Trace& t = *g.trace;
  // Boundaries of the measured device ops, per GPU.
  std::map<std::uint32_t, std::vector<std::pair<TimeNs, std::int64_t>>> sweeps;  // (time, +op+1 start / -(op+1) end)
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (!is_device_op(o.kind) || o.duration() <= 0) continue;
    std::uint32_t dev = g.device(i);
    if (dev == kNone) continue;
    auto& v = sweeps[dev];
    v.emplace_back(o.start, static_cast<std::int64_t>(i) + 1);
    v.emplace_back(o.end(), -(static_cast<std::int64_t>(i) + 1));
  }
  std::vector<ShareDemand> demands;
  std::vector<double> rates;
  for (auto& [dev, v] : sweeps) {
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first < b.first : a.second < b.second; });  // ends first
    std::vector<OpId> active;  // in start order
    std::map<OpId, ShareDemand> demand_of;
    std::map<OpId, double> lost;  // ns of alone-speed work not done while shared
    TimeNs prev = 0;
    for (auto [tm, code] : v) {
      if (active.size() >= 2 && tm > prev) {
        demands.clear();
        for (OpId a : active) demands.push_back(demand_of[a]);
        solve_rates(demands, m.sm_count(dev), rates);
        for (std::size_t k = 0; k < active.size(); ++k)
          if (rates[k] < 1.0 && !demands[k].fixed_rate) lost[active[k]] += (1.0 - rates[k]) * static_cast<double>(tm - prev);
      }
      prev = tm;
      if (code > 0) {
        OpId op = static_cast<OpId>(code - 1);
        active.push_back(op);
        if (active.size() >= 2)
          for (OpId a : active)
            if (!demand_of.count(a)) demand_of[a] = m.demand(a, g);
      } else {
        OpId op = static_cast<OpId>(-code - 1);
        active.erase(std::find(active.begin(), active.end(), op));
        demand_of.erase(op);
      }
    }
    // Kernels that started late because the GPU was full: a launch delay learned from the trace
    // would hold them back even when what filled the GPU is gone. Their launch edges keep the
    // device's shortest launch delay; the engine holds them at rate 0 until SMs free up.
    late_starts(g, m, dev, v);
    for (auto [op, l] : lost) {
      TimeNs base = t.ops[op].duration();
      if (auto it = g.intrinsic.find(op); it != g.intrinsic.end()) base = it->second;
      auto cut = static_cast<TimeNs>(std::llround(l));
      if (cut > 0) g.alone[op] = std::max<TimeNs>(0, base - cut);
    }
  }
}

}  // namespace bneck
