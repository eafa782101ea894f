#include "sim/analysis/analysis.hpp"

#include "sim/base/error.hpp"
#include "sim/base/sort.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace bneck {

OpClass op_class(const Op& o) {
  switch (o.kind) {
    case OpKind::Api: return OpClass::Host;
    case OpKind::Memcpy:
    case OpKind::Memset: return OpClass::Memcpy;
    case OpKind::Kernel: return (o.flags & Op::kFlagNccl) ? OpClass::Communication : OpClass::Compute;
  }
  return OpClass::Host;
}

OpClass node_class(const Graph& g, NodeId n) {
  switch (g.kind(n)) {
    case OpKind::Api: return OpClass::Host;
    case OpKind::Memcpy:
    case OpKind::Memset: return OpClass::Memcpy;
    case OpKind::Kernel: return g.nccl(n) ? OpClass::Communication : OpClass::Compute;
  }
  return OpClass::Host;
}

const char* to_string(OpClass c) {
  static const char* const names[] = {"compute", "memcpy", "communication", "host"};
  return names[static_cast<int>(c)];
}

namespace {

using Intervals = std::vector<std::pair<TimeNs, TimeNs>>;

// Appends [s,e) to a merged list built from intervals sorted by start.
void add_merged(Intervals& v, TimeNs s, TimeNs e) {
  if (e <= s) return;
  if (!v.empty() && s <= v.back().second)
    v.back().second = std::max(v.back().second, e);
  else
    v.emplace_back(s, e);
}
TimeNs total(const Intervals& v) {
  TimeNs t = 0;
  for (auto& [s, e] : v) t += e - s;
  return t;
}
TimeNs intersect(const Intervals& a, const Intervals& b) {
  TimeNs t = 0;
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    TimeNs s = std::max(a[i].first, b[j].first), e = std::min(a[i].second, b[j].second);
    if (e > s) t += e - s;
    if (a[i].second < b[j].second)
      ++i;
    else
      ++j;
  }
  return t;
}

}  // namespace

namespace {
Overlap overlap_of(const Graph& g, const Schedule& s, std::vector<OpId> idx);
}  // namespace

namespace {
// Adds [b, e) to a sorted list of disjoint intervals (touching ones merged), wherever b lies;
// returns how many elements it moved (an insertion before the last interval shifts those after it).
std::size_t add_union(Intervals& v, TimeNs b, TimeNs e) {
  if (e <= b) return 0;
  if (v.empty() || b >= v.back().first) {
    add_merged(v, b, e);
    return 0;
  }
  auto it = std::upper_bound(v.begin(), v.end(), b, [](TimeNs x, const std::pair<TimeNs, TimeNs>& iv) { return x < iv.first; });
  std::size_t moved = 0;
  if (it != v.begin() && std::prev(it)->second >= b) {
    --it;
    it->second = std::max(it->second, e);
  } else {
    moved += static_cast<std::size_t>(v.end() - it);
    it = v.insert(it, {b, e});
  }
  auto next = it + 1, past = next;
  while (past != v.end() && past->first <= it->second) {
    it->second = std::max(it->second, past->second);
    ++past;
  }
  if (past != next) {
    moved += static_cast<std::size_t>(v.end() - past);
    v.erase(next, past);
  }
  return moved;
}

// One device's ops, added in any order: the classes' busy intervals, merged.
struct DeviceOverlap {
  Intervals cls[3], all;
  TimeNs first = 0, last = 0;
  bool any = false;
  std::size_t shifted = 0;  // elements moved by out-of-order additions
  void add(OpClass c, TimeNs b, TimeNs e) {
    if (!any) {
      first = b;
      last = e;
      any = true;
    }
    first = std::min(first, b);
    last = std::max(last, e);
    shifted += add_union(cls[static_cast<int>(c)], b, e);
    shifted += add_union(all, b, e);
  }
  void into(Overlap& ov) const {
    if (!any) return;
    ov.compute_ns += total(cls[0]);
    ov.memcpy_ns += total(cls[1]);
    TimeNs comm = total(cls[2]);
    ov.communication_ns += comm;
    TimeNs cc = intersect(cls[0], cls[2]);
    ov.compute_comm_overlap_ns += cc;
    ov.exposed_communication_ns += comm - cc;
    ov.compute_memcpy_overlap_ns += intersect(cls[0], cls[1]);
    TimeNs busy = total(all);
    ov.gpu_busy_ns += busy;
    ov.window_ns += last - first;
    ov.gpu_idle_ns += (last - first) - busy;
  }
};

std::uint32_t overlap_device(const Graph& g, OpId i, std::uint32_t ndev) {
  std::uint32_t d = g.device(i);
  return d == kNone || d >= ndev ? 0u : d;
}

// The overlap of the ops `each` visits, in one pass without a table of the ops: a replay's
// schedule is in start order or nearly (sharing moves starts by a few ns), so each op joins its
// device's merged intervals at or near their end. Returns false, having added nothing, once the
// additions have moved more elements than a few per op plus a million (a what-if that moved ops
// far): the caller sorts instead.
template <class Each>
bool overlap_one_pass(const Graph& g, const Schedule& s, Each&& each, Overlap& ov) {
  const std::uint32_t ndev = std::max<std::uint32_t>(1, g.num_devices);
  std::vector<DeviceOverlap> dev(ndev);
  std::size_t added = 0, moved = 0;
  bool ok = true;
  each([&](OpId i) {
    if (!ok) return;
    DeviceOverlap& d = dev[overlap_device(g, i, ndev)];
    const std::size_t before = d.shifted;
    d.add(node_class(g, i), s.start(i), s.end(i));
    moved += d.shifted - before;
    ok = moved <= 4 * ++added + (std::size_t{1} << 20);
  });
  if (!ok) return false;
  for (const DeviceOverlap& d : dev) d.into(ov);
  return true;
}
}  // namespace

Overlap compute_overlap(const Graph& g, const Schedule& s, const std::function<bool(OpId)>& include) {
  auto each = [&](auto&& f) {
    for (OpId i = 0; i < g.num_nodes(); ++i)
      if (s.device_node(g, i) && (!include || include(i))) f(i);
  };
  Overlap ov;
  if (overlap_one_pass(g, s, each, ov)) return ov;
  std::vector<OpId> idx;
  each([&](OpId i) { idx.push_back(i); });
  return overlap_of(g, s, std::move(idx));
}

namespace {
// The overlap of the device ops `idx` (any order).
Overlap overlap_of(const Graph& g, const Schedule& s, std::vector<OpId> idx) {
  Overlap ov;
  if (overlap_one_pass(
          g, s,
          [&](auto&& f) {
            for (OpId i : idx) f(i);
          },
          ov))
    return ov;
  const std::uint32_t ndev = std::max<std::uint32_t>(1, g.num_devices);
  // By device, then start: one pass. The keys are gathered first, so that sorting compares
  // contiguous values (a what-if's schedule moves ops far from their order).
  struct Key {
    std::uint32_t dev;
    OpId id;
    TimeNs start;
  };
  std::vector<Key> keys(idx.size());
  for (std::size_t k = 0; k < idx.size(); ++k) keys[k] = Key{overlap_device(g, idx[k], ndev), idx[k], s.start(idx[k])};
  std::vector<OpId>().swap(idx);
  sort_nearly_sorted(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.dev != b.dev) return a.dev < b.dev;
    return a.start != b.start ? a.start < b.start : a.id < b.id;
  });
  std::size_t k = 0;
  while (k < keys.size()) {
    const std::uint32_t d = keys[k].dev;
    DeviceOverlap dv;
    for (; k < keys.size() && keys[k].dev == d; ++k) dv.add(node_class(g, keys[k].id), keys[k].start, s.end(keys[k].id));
    dv.into(ov);
  }
  return ov;
}
}  // namespace

Span device_span(const Graph& g, const Schedule& s) {
  Span sp;
  bool any = false;
  for (int pass = 0; pass < 2 && !any; ++pass)
    for (OpId i = 0; i < g.num_nodes(); ++i) {
      if (s.measured() && !g.measured(i)) continue;
      if (pass == 0 && !g.is_device(i)) continue;
      if (!any) {
        sp.begin = s.start(i);
        sp.end = s.end(i);
        any = true;
      }
      sp.begin = std::min(sp.begin, s.start(i));
      sp.end = std::max(sp.end, s.end(i));
    }
  return sp;
}

std::vector<CollectiveWait> collective_waits(const Graph& g, const Schedule& s) {
  std::vector<CollectiveWait> out;
  const Trace& t = *g.trace;
  for (std::size_t c = 0; c < t.collectives.size(); ++c) {
    const Collective& col = t.collectives[c];
    if (col.members.size() < 2) continue;
    CollectiveWait w;
    w.index = c;
    TimeNs first = std::numeric_limits<TimeNs>::max(), last = std::numeric_limits<TimeNs>::min();
    for (OpId m : col.members) {
      first = std::min(first, s.start(m));
      if (s.start(m) > last) {
        last = s.start(m);
        w.straggler = g.rank(m);
      }
      w.end_ns = std::max(w.end_ns, s.end(m));
    }
    w.start_ns = first;
    w.arrival_spread_ns = last - first;
    out.push_back(w);
  }
  return out;
}

std::vector<RankStats> rank_stats(const Graph& g, const Schedule& s) {
  std::vector<RankStats> out;
  const Trace& t = *g.trace;
  // One pass over the nodes: each process's device ops.
  std::vector<std::vector<OpId>> ops_of(g.num_processes);
  for (OpId i = 0; i < g.num_nodes(); ++i) {
    std::uint32_t p = g.process(i);
    if (s.device_node(g, i) && p < ops_of.size()) ops_of[p].push_back(i);
  }
  for (std::uint32_t p = 0; p < g.num_processes; ++p) {
    if (ops_of[p].empty()) continue;
    RankStats r;
    r.process = p;
    r.rank = g.rank_of_process(p);
    r.span = {s.start(ops_of[p][0]), s.end(ops_of[p][0])};
    for (OpId i : ops_of[p]) {
      r.span.begin = std::min(r.span.begin, s.start(i));
      r.span.end = std::max(r.span.end, s.end(i));
    }
    r.overlap = overlap_of(g, s, std::move(ops_of[p]));
    out.push_back(r);
  }
  auto by_rank = [&](std::uint32_t rank) -> RankStats* {
    for (auto& r : out)
      if (r.rank == rank) return &r;
    return nullptr;
  };
  for (const CollectiveWait& w : collective_waits(g, s)) {
    const Collective& col = t.collectives[w.index];
    TimeNs last = w.start_ns + w.arrival_spread_ns;
    for (OpId m : col.members) {
      RankStats* r = by_rank(g.rank(m));
      if (!r) continue;
      r->collectives++;
      r->waited_ns += last - s.start(m);
    }
    if (RankStats* st = by_rank(w.straggler)) {
      st->last_arrivals++;
      for (OpId m : col.members) st->made_wait_ns += last - s.start(m);
    }
  }
  std::sort(out.begin(), out.end(), [](const RankStats& a, const RankStats& b) { return a.rank < b.rank; });
  return out;
}

OpId last_device_op(const Graph& g, const Schedule& s, const std::function<bool(OpId)>& include) {
  OpId best = kNone;
  for (OpId i = 0; i < g.num_nodes(); ++i) {
    if (!s.device_node(g, i) || (include && !include(i))) continue;
    if (best == kNone || s.end(i) > s.end(best)) best = i;
  }
  return best;
}

std::vector<OpId> critical_path(const SimResult& r, OpId last, const std::function<bool(OpId)>& keep) {
  std::vector<OpId> path;
  if (last == kNone) return path;
  OpId cur = last;
  bool at_end = true;
  std::size_t guard = 0;
  while (cur != kNone && guard++ <= r.start.size() * 2 + 2) {
    if (keep && !keep(cur)) break;
    if (path.empty() || path.back() != cur) path.push_back(cur);
    if (at_end) {
      auto it = r.end_src.find(cur);
      if (it != r.end_src.end()) {
        cur = it->second & SimResult::kSrcMask;
        at_end = !(it->second & SimResult::kViaStart);
        continue;
      }
    }
    std::uint32_t src = r.start_src[cur];
    if (src == kNone) break;
    cur = src & SimResult::kSrcMask;
    at_end = !(src & SimResult::kViaStart);
  }
  std::reverse(path.begin(), path.end());
  path.shrink_to_fit();  // up to half its capacity is slack, on a path of millions of ops
  return path;
}

std::vector<TimeNs> compute_slack(const Graph& g, const SimResult& r, std::vector<std::uint32_t> scratch) {
  const std::size_t n = g.num_nodes();
  // Start->end edges (collectives) join members both ways: they are left out of the order and of
  // the slack (a member's slack comes from its own rank's successors).
  auto ordered = [&](const EdgeProps& p) { return p.attach() != DepType::StartToEnd; };
  // Kahn topological order over all edges; the in-degrees live in the slack vector meanwhile.
  std::vector<TimeNs> slack(n, 0);
  for (OpId u = 0; u < n; ++u)
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g.csr)))
      if (ordered(g.csr[e])) slack[boost::target(e, g.csr)]++;
  std::vector<OpId>& order = scratch;
  order.clear();
  order.reserve(n);
  for (OpId u = 0; u < n; ++u)
    if (slack[u] == 0) order.push_back(u);
  for (std::size_t k = 0; k < order.size(); ++k) {
    OpId u = order[k];
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g.csr)))
      if (ordered(g.csr[e]) && --slack[boost::target(e, g.csr)] == 0) order.push_back(boost::target(e, g.csr));
  }
  if (order.size() < n) std::fill(slack.begin(), slack.end(), 0);  // nodes in a cycle keep 0
  TimeNs horizon = 0;
  for (OpId u = 0; u < n; ++u) horizon = std::max(horizon, r.end[u]);
  // Reverse order: every successor's slack is final before its predecessors read it.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    OpId u = *it;
    TimeNs best = horizon - r.end[u];
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g.csr))) {
      const EdgeProps& p = g.csr[e];
      if (!ordered(p)) continue;
      OpId v = boost::target(e, g.csr);
      TimeNs src_t = p.attach() == DepType::StartToStart ? r.start[u] : r.end[u];
      TimeNs dst_t = p.attach() == DepType::EndToEnd ? r.end[v] : r.start[v];
      best = std::min(best, dst_t - (src_t + p.delay()) + slack[v]);
    }
    slack[u] = std::max<TimeNs>(0, best);
  }
  return slack;
}

Regex range_regex(const std::string& text) {
  try {
    return Regex(text);
  } catch (const InputError& e) { throw InputError("--range '" + text + "': " + e.what()); }
}

RangeIndex::RangeIndex(const Trace& t) : t_(t) {
  // The ops `take` accepts grouped by `key` (counting sort; ops are sorted by start, so each group
  // is too).
  auto group = [&](std::size_t groups, auto take, auto key, std::vector<std::uint32_t>& offset, std::vector<OpId>& ops) {
    offset.assign(groups + 1, 0);
    for (const Op& o : t.ops)
      if (take(o)) offset[key(o) + 1]++;
    for (std::size_t i = 1; i < offset.size(); ++i) offset[i] += offset[i - 1];
    ops.resize(offset.back());
    std::vector<std::uint32_t> fill(offset.begin(), offset.end() - 1);
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (take(t.ops[i])) ops[fill[key(t.ops[i])]++] = i;
  };
  auto api = [](const Op& o) { return o.kind == OpKind::Api; };
  group(
      t.lanes.size(), api, [](const Op& o) { return o.lane; }, lane_offset_, thread_ops_);
  auto proc = [&](const Op& o) { return std::min<std::uint32_t>(t.lanes[o.lane].process, static_cast<std::uint32_t>(t.processes.size())); };
  group(t.processes.size() + 1, api, proc, proc_offset_, proc_ops_);
  if (t.range_scope == RangeScope::Process) {
    // Each lane's trace ranges as a union of intervals.
    std::vector<std::pair<LaneId, std::pair<TimeNs, TimeNs>>> rs;
    for (const Range& r : t.ranges)
      if (!r.structure && r.lane < t.lanes.size()) rs.push_back({r.lane, {r.start, r.end}});
    std::sort(rs.begin(), rs.end());
    busy_offset_.assign(t.lanes.size() + 1, 0);
    for (std::size_t k = 0; k < rs.size();) {
      LaneId l = rs[k].first;
      auto cur = rs[k].second;
      for (++k; k < rs.size() && rs[k].first == l; ++k) {
        if (rs[k].second.first > cur.second) {
          busy_.push_back(cur);
          busy_offset_[l + 1]++;
          cur = rs[k].second;
        } else {
          cur.second = std::max(cur.second, rs[k].second.second);
        }
      }
      busy_.push_back(cur);
      busy_offset_[l + 1]++;
    }
    for (std::size_t i = 1; i < busy_offset_.size(); ++i) busy_offset_[i] += busy_offset_[i - 1];
  }
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (is_device_op(t.ops[i].kind) && t.ops[i].link != kNone) by_link_.push_back(i);
  bool stream_ranges = false;
  for (const Range& r : t.ranges) stream_ranges = stream_ranges || (r.lane < t.lanes.size() && t.lanes[r.lane].kind == LaneKind::Stream);
  if (stream_ranges) {
    auto dev = [&](const Op& o) { return std::min<std::uint32_t>(t.lanes[o.lane].device, static_cast<std::uint32_t>(t.devices.size())); };
    group(
        t.devices.size() + 1, [](const Op& o) { return is_device_op(o.kind); }, dev, dev_offset_, dev_ops_);
  }
  std::stable_sort(by_link_.begin(), by_link_.end(), [&](OpId a, OpId b) { return t.ops[a].link < t.ops[b].link; });
}

bool RangeIndex::busy_before(LaneId l, TimeNs at, TimeNs since) const {
  auto b = busy_.begin() + busy_offset_[l], e = busy_.begin() + busy_offset_[l + 1];
  auto it = std::upper_bound(b, e, at, [](TimeNs v, const std::pair<TimeNs, TimeNs>& iv) { return v < iv.first; });
  if (it == b) return false;
  --it;
  return at <= it->second && it->first < since;
}

void RangeIndex::api_ops(std::size_t ri, std::vector<OpId>& out) const {
  const Range& rg = t_.ranges[ri];
  auto in_range = [&](const std::vector<OpId>& ops, std::size_t lo, std::size_t hi) {
    auto b = ops.begin() + lo, e = ops.begin() + hi;
    auto first = std::lower_bound(b, e, rg.start, [&](OpId o, TimeNs v) { return t_.ops[o].start < v; });
    auto last = std::upper_bound(first, e, rg.end, [&](TimeNs v, OpId o) { return v < t_.ops[o].start; });
    return std::make_pair(first, last);
  };
  if (rg.lane >= t_.lanes.size() || t_.lanes[rg.lane].kind == LaneKind::Stream) return;
  // Structure instances hold every launch of their process in their interval.
  if (!rg.structure && t_.range_scope == RangeScope::Thread) {
    auto [first, last] = in_range(thread_ops_, lane_offset_[rg.lane], lane_offset_[rg.lane + 1]);
    out.insert(out.end(), first, last);
    return;
  }
  std::uint32_t p = std::min<std::uint32_t>(t_.lanes[rg.lane].process, static_cast<std::uint32_t>(t_.processes.size()));
  auto [first, last] = in_range(proc_ops_, proc_offset_[p], proc_offset_[p + 1]);
  for (auto it = first; it != last; ++it) {
    const Op& o = t_.ops[*it];
    if (o.lane == rg.lane || rg.structure || !busy_before(o.lane, o.start, rg.start)) out.push_back(*it);
  }
}

void RangeIndex::device_ops(std::size_t ri, std::vector<OpId>& out) const {
  const Range& rg = t_.ranges[ri];
  if (rg.lane < t_.lanes.size() && t_.lanes[rg.lane].kind == LaneKind::Stream) {
    std::uint32_t d = std::min<std::uint32_t>(t_.lanes[rg.lane].device, static_cast<std::uint32_t>(t_.devices.size()));
    auto b = dev_ops_.begin() + dev_offset_[d], e = dev_ops_.begin() + dev_offset_[d + 1];
    auto lo = std::lower_bound(b, e, rg.start, [&](OpId o, TimeNs v) { return t_.ops[o].start < v; });
    for (; lo != e && t_.ops[*lo].start <= rg.end; ++lo)
      if (t_.lanes[t_.ops[*lo].lane].process == t_.lanes[rg.lane].process) out.push_back(*lo);
    return;
  }
  std::vector<OpId> apis;
  api_ops(ri, apis);
  for (OpId api : apis) {
    auto it = std::lower_bound(by_link_.begin(), by_link_.end(), api, [&](OpId d, OpId a) { return t_.ops[d].link < a; });
    for (; it != by_link_.end() && t_.ops[*it].link == api; ++it) out.push_back(*it);
  }
}

namespace {
void sort_unique(std::vector<OpId>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}
}  // namespace

std::vector<OpId> RangeIndex::device_ops(std::size_t ri) const {
  std::vector<OpId> out;
  device_ops(ri, out);
  sort_unique(out);
  return out;
}

void RangeIndex::work(std::size_t ri, std::vector<OpId>& out) const {
  out.clear();
  api_ops(ri, out);
  device_ops(ri, out);
  sort_unique(out);
}

std::vector<std::size_t> RangeIndex::match(const Regex& re) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < t_.ranges.size(); ++i)
    if (re.full(t_.strings.str(t_.ranges[i].name))) out.push_back(i);
  return out;
}

}  // namespace bneck
