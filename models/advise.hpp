// bneck advise: what holds a run back and what to change, ranked by forecast.
//
// 1. Profile: the replay's critical path summed by class (compute-, memory- and latency-bound
//    kernels, copies, communication, host calls, synchronization, the gaps between them), GPU
//    busy and idle, and the roofline aggregation by kernel class (the replay's, time-weighted).
// 2. Bottleneck of the run and of each phase the structure finds (iteration, forward, backward):
//    launch/host-bound when host calls, synchronization and gaps hold half the critical path (a
//    phase: its GPU busy under 60 % of its span); exposed communication from a quarter; else the
//    kernel class holding most of the path (compute-bound, memory-bound, latency-bound), each with
//    the evidence that decided it.
// 3. Suggestions generated from the profile (not a fixed list): CUDA graphs where host time or
//    GPU idle show, precision where fp32 GEMMs take time (autocast bf16, TF32, pure bf16), the
//    compiler's fusion where pointwise chains take time, overlap of exposed communication, another
//    GPU, more GPUs for a training step. Each is simulated by the what-if engine on the whole run
//    (or --range), ranked by its forecast (per traced batch for more GPUs), beside the naive
//    estimate (the changed ops' time saved, as if nothing overlapped), with the error bar of its
//    family's held-out validation and its trade-off.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/replay.hpp"
#include "models/whatif/error_bar.hpp"

namespace bneck {

struct AdvicePhase {
  std::string name;  // "run", "@iteration", "@forward", "@backward"
  std::size_t instances = 0;
  TimeNs span_ns = 0, busy_ns = 0;  // medians over its instances
  std::string bottleneck, evidence;
};

struct AdviceSuggestion {
  std::string title;
  std::vector<std::string> args;  // what `bneck whatif TRACE` takes to reproduce it
  std::uint32_t gpus = 1;         // GPUs it uses (the forecast is per step of every GPU)
  double batch = 1;               // samples per step relative to the traced (a larger batch)
  TimeNs baseline_ns = 0, predicted_ns = 0, amdahl_ns = 0;
  ErrorBar error_bar;  // the forecast's 80 % interval (the what-if's)
  std::string tradeoff;
  std::string error;      // non-empty: the what-if could not run (why)
  bool hardware = false;  // another GPU or more GPUs, not a change to the program
  std::string after;      // where the time goes after the change (the forecast's critical path and GPU busy)
  // Time per traced batch: the forecast over the GPUs that share the work (weak scaling).
  double effective_ns() const { return static_cast<double>(predicted_ns) / gpus / batch; }
};

// A kernel that matters (by total time): its launch, occupancy and waves on the trace's GPU.
struct AdviceKernel {
  std::string name;
  std::size_t count = 0;
  TimeNs total_ns = 0;
  std::uint64_t blocks = 0;  // of its longest launch
  std::uint32_t threads = 0, blocks_per_sm = 0;
  double waves = 0, wave_efficiency = 0;
  double sm_fill = 1;   // blocks over SMs x its busiest SM's blocks (--fill-waves; 1 for at most one block an SM)
  std::string limiter;  // what limits its blocks per SM
};

// One step of following the bottleneck: a change made on top of the ones before it.
struct AdvicePlanStep {
  std::string title;              // the change this step adds
  std::vector<std::string> args;  // every change so far, as `bneck whatif TRACE` takes them
  TimeNs baseline_ns = 0, predicted_ns = 0;
  ErrorBar error_bar;  // the combined forecast's 80 % interval
  std::string after;   // where the time goes after it
};

struct Advice {
  std::string source_hw, unprofiled;
  std::string window;  // non-empty: the advice is of a stretch of the run (traces/window.hpp): which, and why
  // With a range (--range, or the steady state by default): the critical path, its host terms, GPU
  // busy and idle, the kernels and the suggestions' grounds are of its instances, as the forecasts
  // are; `scope` says which and why (empty: the whole run).
  std::string scope;
  std::size_t scope_instances = 0;
  std::string assumed_hw;                       // non-empty: the trace's GPU was not known (what was assumed)
  std::string capture;                          // non-empty: most launches were captured into CUDA graphs (advise.cpp, capture_note)
  TimeNs span_ns = 0, path_ns = 0;              // path_ns: with a range, its instances' paths summed
  std::map<std::string, TimeNs> path_by_class;  // critical path, by class
  // The critical path's host time by cause: the framework and Python between CUDA calls (host gaps
  // ending at a call), kernel launches, copy calls, event calls, synchronization waits, other calls.
  std::map<std::string, TimeNs> host_terms;
  std::string host_note;  // when the host holds a quarter of the path or more: what dominates
  std::string host_pace;  // and how sure a host-bound forecast is (the pace between processes)
  Overlap overlap;
  std::vector<ClassRow> classes;      // the roofline aggregation by kernel class
  std::vector<AdviceKernel> kernels;  // the five kernels that take most time
  std::string bottleneck, evidence;
  std::vector<AdvicePhase> phases;
  std::vector<AdviceSuggestion> suggestions;  // changes to the program, best first
  std::vector<AdviceSuggestion> hardware;     // other GPUs and more GPUs, best first, for comparison
  std::string verdict;                        // the bottleneck, its share, the best program change
  // Following the bottleneck: the verdict's change, then, on top of it, the change that saves most
  // after it, while one saves 2 % more (up to three steps).
  std::vector<AdvicePlanStep> plan;
};

struct Structure;

struct AdviseOptions {
  std::optional<std::string> range_regex;
  std::string source_hw;
  bool sharing = true;
  const Structure* structure = nullptr;  // the trace's structure where the caller found it already
};

Advice advise(const Trace& t, const AdviseOptions& opt);

// The steady state a run's advice is of when no range is given: the structure's iterations (three or
// more on each rank, back to back: their GPU span at least 3/4 of their period), where the run
// outside them (a setup before the first, a pause after a warm-up, a teardown after the last:
// once, in a run of thousands of steps) holds more than half of the run's GPU span; the iterations
// counted at their period. `found`, the trace's structure, becomes o.structure (advise uses it);
// where the iterations are the steady state, the structure's ranges are added to `t`
// (add_structure_ranges), o.range_regex is "@iteration" and the returned text says why; else the
// text is empty.
std::string steady_state_scope(Trace& t, const Structure& found, AdviseOptions& o);

// The memory the machine has at hand: MemAvailable (free memory and the page cache it may take
// back), else the free pages; in a container whose memory limit (cgroup v2 or v1) leaves less,
// that limit less what it uses.
double available_memory_bytes();
// Peak memory of `advise` per op of the trace, the trace's own included (the 2 M-kernel bench
// export, two suggestions simulated at once: 334 bytes an op; docs/performance.md).
inline constexpr double kAdviseBytesPerOp = 340;
// Following the bottleneck simulates up to a dozen combinations a step: done for traces up to this
// many ops (the steps of larger runs are given by their ranges: --range, or the steady state).
inline constexpr std::size_t kFollowMaxOps = 2'000'000;

}  // namespace bneck
