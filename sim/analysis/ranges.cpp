#include "sim/analysis/ranges.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "sim/base/stats.hpp"

namespace bneck {

CloneIndex::CloneIndex(const Graph& g) {
  for (NodeId n = static_cast<NodeId>(g.num_trace_nodes()); n < g.num_nodes(); ++n)
    if (g.synthetic(n) && g.origin(n) != kNone) by_origin_.emplace_back(g.origin(n), n);
  std::sort(by_origin_.begin(), by_origin_.end());
}

void CloneIndex::add_clones(std::vector<NodeId>& ops) const {
  if (by_origin_.empty()) return;
  const std::size_t n = ops.size();
  for (std::size_t k = 0; k < n; ++k) {
    auto it = std::lower_bound(by_origin_.begin(), by_origin_.end(), std::make_pair(ops[k], NodeId{0}));
    for (; it != by_origin_.end() && it->first == ops[k]; ++it) ops.push_back(it->second);
  }
}

std::vector<RangeSpan> range_spans(const Graph& g, const SimResult& r, const Regex& re) {
  const Trace& t = *g.trace;
  RangeIndex idx(t);
  CloneIndex clones(g);
  std::vector<RangeSpan> out;
  for (std::size_t ri : idx.match(re)) {
    RangeSpan rs;
    rs.index = ri;
    rs.name = t.strings.str(t.ranges[ri].name);
    rs.start_ns = t.ranges[ri].start;
    rs.rank = t.rank_of_lane(t.ranges[ri].lane);
    idx.device_ops(ri, rs.nodes);
    // Removed nodes leave the range.
    rs.nodes.erase(std::remove_if(rs.nodes.begin(), rs.nodes.end(), [&](NodeId n) { return g.removed(n); }), rs.nodes.end());
    if (!rs.nodes.empty()) {
      rs.measured = measured_span(t, rs.nodes);
      const std::size_t traced = rs.nodes.size();
      clones.add_clones(rs.nodes);
      rs.nodes.erase(
          std::remove_if(rs.nodes.begin() + static_cast<long>(traced), rs.nodes.end(), [&](NodeId n) { return !g.is_device(n); }),
          rs.nodes.end());
      rs.simulated = span_of(rs.nodes, r);
      rs.last = rs.nodes[0];
      for (NodeId o : rs.nodes)
        if (r.end[o] > r.end[rs.last] || (r.end[o] == r.end[rs.last] && o < rs.last)) rs.last = o;
      std::vector<OpId> apis;
      idx.api_ops(ri, apis);
      rs.path_from = rs.simulated.begin;
      for (OpId a : apis) rs.path_from = std::min(rs.path_from, r.start[a]);
    }
    out.push_back(std::move(rs));
  }
  return out;
}

std::vector<OpId> range_critical_path(const SimResult& r, const RangeSpan& rs) {
  if (rs.last == kNone) return {};
  return critical_path(r, rs.last, [&](OpId o) { return r.end[o] > rs.path_from; });
}

Span span_of(const std::vector<NodeId>& nodes, const SimResult& r) {
  Span s;
  bool any = false;
  for (NodeId o : nodes) {
    if (!any) {
      s.begin = r.start[o];
      s.end = r.end[o];
      any = true;
    }
    s.begin = std::min(s.begin, r.start[o]);
    s.end = std::max(s.end, r.end[o]);
  }
  return s;
}

Span measured_span(const Trace& t, const std::vector<OpId>& ops) {
  Span s;
  if (ops.empty()) return s;
  s.begin = t.ops[ops[0]].start;
  s.end = t.ops[ops[0]].end();
  for (OpId o : ops) {
    s.begin = std::min(s.begin, t.ops[o].start);
    s.end = std::max(s.end, t.ops[o].end());
  }
  return s;
}

TimeNs interval_union(std::vector<std::pair<TimeNs, TimeNs>> iv) {
  std::sort(iv.begin(), iv.end());
  TimeNs total = 0, cs = 0, ce = 0;
  bool open = false;
  for (auto [s, e] : iv) {
    if (!open || s > ce) {
      if (open) total += ce - cs;
      cs = s;
      ce = e;
      open = true;
    } else {
      ce = std::max(ce, e);
    }
  }
  if (open) total += ce - cs;
  return total;
}

TimeNs busy_union(const std::vector<NodeId>& nodes, const std::vector<bool>& sel, const SimResult& r) {
  std::vector<std::pair<TimeNs, TimeNs>> iv;
  for (NodeId o : nodes)
    if (o < sel.size() && sel[o]) iv.emplace_back(r.start[o], r.end[o]);
  return interval_union(std::move(iv));
}

TimeNs amdahl_ns(TimeNs baseline, double fraction, double factor) {
  return static_cast<TimeNs>(std::llround(static_cast<double>(baseline) * (1 - fraction + fraction / factor)));
}

std::map<std::string, TimeNs> path_breakdown(const Graph& g, const SimResult& r, const std::vector<OpId>& path) {
  std::map<std::string, TimeNs> by;
  if (path.empty()) return by;
  TimeNs cursor = r.start[path.front()];
  TimeNs covered = 0;
  // Summed by class first (a path has millions of nodes and a handful of classes), host API calls
  // after the classes; named at the end.
  constexpr std::size_t kApi = 4;
  static_assert(static_cast<std::size_t>(OpClass::Host) + 1 == kApi, "one slot per OpClass, then host API calls");
  std::array<TimeNs, kApi + 1> sum{};
  std::array<bool, kApi + 1> seen{};
  for (OpId n : path) {
    TimeNs s = std::max(r.start[n], cursor), e = r.end[n];
    if (e > s) {
      const std::size_t k = g.kind(n) == OpKind::Api ? kApi : static_cast<std::size_t>(node_class(g, n));
      sum[k] += e - s;
      seen[k] = true;
      covered += e - s;
    }
    cursor = std::max(cursor, r.end[n]);
  }
  for (std::size_t k = 0; k <= kApi; ++k)
    if (seen[k]) by[k == kApi ? "host API calls" : to_string(static_cast<OpClass>(k))] += sum[k];
  TimeNs total = r.end[path.back()] - r.start[path.front()];
  by["latency and gaps"] = std::max<TimeNs>(0, total - covered);
  return by;
}

double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }

double repeats_center(const std::vector<double>& v, const std::vector<double>& measured) {
  const double m = median(measured);
  double sum = 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < v.size() && i < measured.size(); ++i)
    if (near_median(measured[i], m)) sum += v[i], ++n;
  return n ? sum / static_cast<double>(n) : median(v);
}

std::optional<TimeNs> simulated_center(const std::vector<RangeSpan>& spans) {
  std::vector<double> v, meas;
  for (const RangeSpan& rs : spans)
    if (!rs.nodes.empty()) {
      v.push_back(static_cast<double>(rs.simulated.length()));
      meas.push_back(static_cast<double>(rs.measured.length()));
    }
  if (v.empty()) return std::nullopt;
  return static_cast<TimeNs>(repeats_center(v, meas));
}

}  // namespace bneck
