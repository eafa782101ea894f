// The host's part of a critical path, by cause: the runtime calls on it by class and the host
// time before a call that no op on the path covers (the framework and Python between calls).
// advise reports it for the run, whatif for the forecast after a change.
#pragma once
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "sim/engine/engine.hpp"
#include "sim/graph/graph.hpp"

namespace bneck {

inline constexpr const char* kBetweenCalls = "framework and Python between calls";
inline constexpr const char* kAllocationCalls = "memory allocation calls";
// The names of the runtime calls that allocate or free memory (a regular expression): CUDA's runtime
// (cudaMalloc, cudaFree, cudaHostAlloc, cudaMallocAsync, ...), its driver (cuMemAlloc, cuMemFree,
// and the virtual memory calls of expandable segments: cuMemCreate, cuMemMap, cuMemRelease, ...)
// and HIP's (hipMalloc, hipFree, hipHostMalloc, hipExtMallocWithFlags, ...).
inline constexpr const char* kAllocationPattern =
    "^(cuda|hip|cu)(Mem|Ext)?(Malloc|Free|Alloc|HostAlloc|HostMalloc|HostFree|Create|Release|Map|Unmap|AddressReserve|AddressFree|"
    "SetAccess)";

inline constexpr const char* kInputPipeline = "input pipeline (DataLoader)";

// The cause a host call's time on the critical path counts under ("kernel launches", ...).
const char* host_term(ApiClass c);

// The host calls made inside a stream capture, per op of `t` (cudaStreamBeginCapture .. EndCapture
// on one thread, both included; HIP spells them alike): the program building a CUDA graph, whose
// launches there record nodes and run nothing (vLLM's and SGLang's graph-capture profiles).
std::vector<bool> stream_capture_calls(const Trace& t);

// The input pipeline's ranges on each host thread: PyTorch's profiler records each batch the
// DataLoader hands the loop as `enumerate(DataLoader)#..._next__` (a user_annotation; an op in
// PyTorch 1.8-1.9). Sorted, disjoint intervals per lane.
class InputPipeline {
 public:
  explicit InputPipeline(const Trace& t);
  bool empty() const { return by_lane_.empty(); }
  std::size_t ranges() const { return count_; }
  // How much of [a, b) on lane `l` lies inside the input pipeline's ranges.
  TimeNs overlap(LaneId l, TimeNs a, TimeNs b) const;

 private:
  std::map<LaneId, std::vector<std::pair<TimeNs, TimeNs>>> by_lane_;
  std::size_t count_ = 0;
};

// The same for an op of `t`, allocation calls apart (kAllocationCalls: each name matched once), and
// the host time before a call split between the input pipeline's ranges and the framework.
class HostTermOf {
 public:
  explicit HostTermOf(const Trace& t);
  const char* operator()(const Op& o) const;
  bool allocation(const Op& o) const { return o.kind == OpKind::Api && o.name < allocation_.size() && allocation_[o.name]; }
  // `gap` of host time before `call` (by its measured start) into `terms`: the part the input
  // pipeline's ranges hold (kInputPipeline), the rest kBetweenCalls.
  void add_gap(std::map<std::string, TimeNs>& terms, const Op& call, TimeNs gap) const;

 private:
  std::vector<char> allocation_;  // per string id
  InputPipeline input_;
};

// Walks a critical path in end order: each node adds the time after the one before (a blocking
// call that waited for kernels counts only its own tail) and the time before it that no earlier
// node covers (a gap): visit(node, gap, own). Returns the path's span.
template <class Visit>
TimeNs walk_path(const SimResult& sim, std::vector<OpId> path, Visit&& visit) {
  std::sort(path.begin(), path.end(), [&](OpId x, OpId y) { return sim.end[x] < sim.end[y]; });
  if (path.empty()) return 0;
  TimeNs prev = sim.start[path.front()];
  const TimeNs begin = prev;
  for (OpId o : path) {
    const TimeNs s = sim.start[o], e = sim.end[o];
    if (e <= prev) continue;
    visit(o, s > prev ? s - prev : TimeNs{0}, e - std::max(s, prev));
    prev = e;
  }
  return prev - begin;
}

struct HostOnPath {
  TimeNs path_ns = 0;
  std::map<std::string, TimeNs> terms;  // host time on the path by cause
  TimeNs host() const;
  // "the host holds H % of the critical path; T dominate (P %)" when the host holds a quarter of
  // it or more, else empty.
  std::string note() const;
};

// The host's part of a critical path of g's schedule `sim`: runtime calls by their class (a node a
// transform synthesized from nothing: "host work a change added"), gaps before a call between calls.
HostOnPath host_on_path(const Graph& g, const SimResult& sim, const std::vector<OpId>& path);

}  // namespace bneck
