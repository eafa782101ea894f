// Analyses of a simulated (or measured) schedule: overlap and idle time, the critical path,
// per-op slack, and per-NVTX-range spans.
#pragma once
#include <functional>
#include "sim/base/regex.hpp"
#include <string>
#include <vector>

#include "sim/engine/engine.hpp"

namespace bneck {

// A schedule: start and end per graph node (the trace's measured times, or a SimResult's). A
// measured schedule covers the trace's nodes only: analyses skip synthetic ones in it.
struct Schedule {
  const Trace* trace = nullptr;  // measured times when the vectors are null
  const std::vector<TimeNs>* starts = nullptr;
  const std::vector<TimeNs>* ends = nullptr;
  TimeNs start(OpId i) const { return starts ? (*starts)[i] : trace->ops[i].start; }
  TimeNs end(OpId i) const { return ends ? (*ends)[i] : trace->ops[i].end(); }
  bool measured() const { return starts == nullptr; }
  // Whether node `i` of `g` has a time in this schedule and counts as a device op.
  bool device_node(const Graph& g, OpId i) const { return g.is_device(i) && (!measured() || g.measured(i)); }
};
inline Schedule measured_schedule(const Trace& t) { return {&t, nullptr, nullptr}; }
inline Schedule sim_schedule(const SimResult& r) { return {nullptr, &r.start, &r.end}; }

enum class OpClass : std::uint8_t { Compute = 0, Memcpy = 1, Communication = 2, Host = 3 };
OpClass op_class(const Op& o);
OpClass node_class(const Graph& g, NodeId n);
const char* to_string(OpClass c);

// Busy time as the union of op intervals per class and device, summed over devices (docs/design.md:
// NCCL kernels are communication; memcpy and memset are memcpy).
struct Overlap {
  TimeNs compute_ns = 0, communication_ns = 0, memcpy_ns = 0;
  TimeNs compute_comm_overlap_ns = 0;   // compute and communication at once
  TimeNs exposed_communication_ns = 0;  // communication with no compute beside it
  TimeNs compute_memcpy_overlap_ns = 0;
  TimeNs gpu_busy_ns = 0;  // any device op running
  TimeNs gpu_idle_ns = 0;  // per device: its first-op-to-last-op window minus busy
  TimeNs window_ns = 0;    // sum over devices of first op start to last op end
};
// `include` selects ops (default: every device op).
Overlap compute_overlap(const Graph& g, const Schedule& s, const std::function<bool(OpId)>& include = {});

// First device-op start and last device-op end (or over all ops if there is no device op).
struct Span {
  TimeNs begin = 0, end = 0;
  TimeNs length() const { return end - begin; }
};
Span device_span(const Graph& g, const Schedule& s);

// Per rank of a multi-rank trace (one rank per process): its GPU span, its overlap, and how its
// collectives went in schedule `s`: every member of a collective waits inside its kernel for the
// last member to arrive; that last one is the collective's straggler.
struct RankStats {
  std::uint32_t rank = 0, process = 0;
  Span span;
  Overlap overlap;
  std::size_t collectives = 0;    // matched collectives (2+ traced members) it took part in
  std::size_t last_arrivals = 0;  // of those, the ones it arrived at last
  TimeNs waited_ns = 0;           // its members' time between their start and the last arrival
  TimeNs made_wait_ns = 0;        // the other members' waiting at the collectives it arrived last at
};
std::vector<RankStats> rank_stats(const Graph& g, const Schedule& s);
struct CollectiveWait {
  std::size_t index = 0;            // into t.collectives
  std::uint32_t straggler = 0;      // rank that arrived last
  TimeNs arrival_spread_ns = 0;     // last arrival minus first arrival
  TimeNs start_ns = 0, end_ns = 0;  // first arrival, last member end
};
std::vector<CollectiveWait> collective_waits(const Graph& g, const Schedule& s);

// Critical path: from `last` walking back along the bindings the engine recorded (start edges,
// end edges and resource waits), in time order. `keep` may stop the walk at the first op it
// rejects (used for ranges).
std::vector<OpId> critical_path(const SimResult& r, OpId last, const std::function<bool(OpId)>& keep = {});
// The device op that ends last (ties: lowest id), or kNone.
OpId last_device_op(const Graph& g, const Schedule& s, const std::function<bool(OpId)>& include = {});

// Total float of every op: how much later it could end without delaying the end of the run,
// through the graph's edges (resource contention not counted).
// `scratch` lends its storage to the topological order (the run's start bindings, once the paths
// are walked): the slack vector counts in-degrees first, so no other per-node memory is taken.
std::vector<TimeNs> compute_slack(const Graph& g, const SimResult& r, std::vector<std::uint32_t> scratch = {});

// The --range regular expression; a malformed one is an InputError naming it.
Regex range_regex(const std::string& text);

// NVTX ranges and the ops they launched: the device ops launched by the API calls the range holds
// (Trace::range_scope: by default the calls of any thread of its process made while it is open,
// except threads inside an earlier-opened range of their own; strictly per thread as an option).
// A range on a stream lane (a structure instance of a GPU-only trace) holds its device's ops that
// start inside it.
class RangeIndex {
 public:
  explicit RangeIndex(const Trace& t);
  // Device ops of range `ri`, appended to `out`.
  void device_ops(std::size_t ri, std::vector<OpId>& out) const;
  // The same, sorted and each once.
  std::vector<OpId> device_ops(std::size_t ri) const;
  // A range's work: its API calls and the device ops they launched, sorted, each once (into `out`,
  // replacing what it held).
  void work(std::size_t ri, std::vector<OpId>& out) const;
  // API calls of range `ri` (starting inside it, on the threads its scope takes), appended to `out`
  // in start order.
  void api_ops(std::size_t ri, std::vector<OpId>& out) const;
  // Indices of ranges whose name matches `re` in full, in time order.
  std::vector<std::size_t> match(const Regex& re) const;

 private:
  // True if lane `l`, at time `at`, is inside a trace range of its own opened before `since`.
  bool busy_before(LaneId l, TimeNs at, TimeNs since) const;
  const Trace& t_;
  std::vector<std::uint32_t> lane_offset_;
  std::vector<OpId> thread_ops_;  // api ops grouped by lane, by start
  std::vector<std::uint32_t> proc_offset_;
  std::vector<OpId> proc_ops_;  // api ops grouped by process, by start
  std::vector<std::uint32_t> busy_offset_;
  std::vector<std::pair<TimeNs, TimeNs>> busy_;  // per lane: the union of its trace ranges, in order
  std::vector<OpId> by_link_;                    // device ops sorted by launching op
  std::vector<std::uint32_t> dev_offset_;
  std::vector<OpId> dev_ops_;  // device ops grouped by device, by start (ranges on a stream lane)
};

}  // namespace bneck
