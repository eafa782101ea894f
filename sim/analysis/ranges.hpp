// Per-range figures on a graph's schedule: the device nodes of an NVTX range (its trace ops and
// the synthetic nodes cloned from them), its span, its critical path, busy time of a selection,
// Amdahl's forecast, and the breakdown of a path by class. Shared by replay, what-if and sweep.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/analysis/analysis.hpp"

namespace bneck {

// Clones of each trace op in a graph (repeats, splits), for range membership.
class CloneIndex {
 public:
  explicit CloneIndex(const Graph& g);
  // Appends the clones of the ops in `ops` (any order) to `ops`.
  void add_clones(std::vector<NodeId>& ops) const;

 private:
  std::vector<std::pair<OpId, NodeId>> by_origin_;  // sorted
};

struct RangeSpan {
  std::size_t index = 0;  // into trace.ranges
  std::string name;
  std::uint32_t rank = 0;     // of the range's thread
  TimeNs start_ns = 0;        // push time as the trace records it
  std::vector<NodeId> nodes;  // device nodes (trace ops, then clones)
  Span measured, simulated;
  NodeId last = kNone;   // the node that ends last in the simulation (ties: lowest id)
  TimeNs path_from = 0;  // the range's critical path stops at nodes ending before this
};
// The ranges matching `re` in full that launched device work, in time order. The measured span
// is over the range's trace ops; the simulated one over them and their clones.
std::vector<RangeSpan> range_spans(const Graph& g, const SimResult& r, const Regex& re);
// The range's critical path: back from its last device node through anything (other threads and
// streams included) that ended after the range's first call started.
std::vector<OpId> range_critical_path(const SimResult& r, const RangeSpan& rs);

// Span of the nodes in a simulated schedule.
Span span_of(const std::vector<NodeId>& nodes, const SimResult& r);
// Span of trace ops as the trace measured them (first start to last end; empty: {0, 0}).
Span measured_span(const Trace& t, const std::vector<OpId>& ops);
// Total length of the union of [start, end) intervals.
TimeNs interval_union(std::vector<std::pair<TimeNs, TimeNs>> iv);
// Busy time (union of intervals) of the nodes with sel[n] among `nodes`.
TimeNs busy_union(const std::vector<NodeId>& nodes, const std::vector<bool>& sel, const SimResult& r);
// Amdahl's law: a run of `baseline` in which a `fraction` of the time gets `factor` x faster.
TimeNs amdahl_ns(TimeNs baseline, double fraction, double factor);
// Time each class contributes to a path in time order (overlaps counted once), plus "latency and gaps".
std::map<std::string, TimeNs> path_breakdown(const Graph& g, const SimResult& r, const std::vector<OpId>& path);
double median(std::vector<double> v);
// The figure of repeated ranges (the steps a forecast is made for): the mean of `v` over the ranges
// whose measured span `measured` lies within a factor 1.3 of the median measured span; one farther
// off (a warm-up, a first step, a stall) is left out of every figure alike. A profiled host's pace
// varies from step to step (0.85-1.24x the median over 30 profiled GPT-2 steps), and the median of
// three such steps moves about 1.35x as far as their mean.
double repeats_center(const std::vector<double>& v, const std::vector<double>& measured);
// A repeat counts when its measured span lies within 1.3x of their median either way.
inline bool near_median(double x, double m) { return x <= 1.3 * m && x * 1.3 >= m; }
// repeats_center of the simulated spans of the ranges that launched device work; nullopt if none did.
std::optional<TimeNs> simulated_center(const std::vector<RangeSpan>& spans);

}  // namespace bneck
