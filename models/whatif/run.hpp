// The what-if pipeline: baseline and predicted replays of a transform list side by side, per
// range, with Amdahl's forecast for --scale, what moved onto and off the critical path, and the
// ops whose slack changed. tools/views renders what it returns.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/whatif/error_bar.hpp"
#include "models/whatif/host_path.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/ranges.hpp"

namespace bneck {

struct WhatIfOptions {
  std::optional<std::string> range_regex;
  std::vector<Transform> transforms;
  std::string scenario_name;
  std::string source_hw;
  bool sharing = true;         // concurrent device ops share their GPU (sim/engine/sharing.hpp)
  bool unprofile = true;       // baseline and forecast without the profiler's host cost (--unprofile off: with)
  TimeNs unprofiled_time = 0;  // a measured unprofiled step (or run): the profiler's costs scaled to reach it
  std::size_t top = 12;
};

struct WhatIfRange {
  std::string name;
  std::uint32_t rank = 0;  // of the range's thread
  TimeNs start_ns = 0, measured_span_ns = 0, baseline_ns = 0, predicted_ns = 0;
  double amdahl_fraction = 0;
  TimeNs amdahl_ns = 0;
  std::vector<std::string> cp_before, cp_after;  // device-op names on the range's critical path
  std::vector<OpId> path_after;                  // the predicted critical path (nodes)
  ErrorBar error_bar;                            // around predicted_ns
  double busy_after = 1;                         // the forecast's GPU busy fraction of its span
};

struct WhatIfReport {
  const Trace* trace = nullptr;
  std::shared_ptr<const Graph> base_graph, pred_graph;
  std::vector<std::string> log;
  std::string source_hw, target_hw;
  std::string unprofiled;      // the profiler whose host cost the baseline and forecast leave out (empty: none)
  std::string unprofile_log;   // what that took out
  std::string unprofile_note;  // how the costs were scaled to a measured unprofiled time, if they were
  Span measured, baseline, predicted;
  std::vector<WhatIfRange> ranges;
  TimeNs baseline_ns = 0, predicted_ns = 0, measured_ns = 0;  // medians over ranges, or GPU spans
  double speedup = 1;
  bool has_amdahl = false;
  double amdahl_fraction = 0, amdahl_factor = 0;
  TimeNs amdahl_ns = 0;
  std::vector<std::string> onto_cp, off_cp;  // op names that moved onto / off the critical path
  HostOnPath host_after;                     // the host's part of the forecast's critical path (a typical range's)
  TimeNs host_gaps_removed_ns = 0;           // host time between calls the transforms took out (WhatIfCase)
  struct SlackChange {
    std::string name;
    OpId id;
    TimeNs before, after;
  };
  std::vector<SlackChange> slack_changes;
  Overlap baseline_overlap, predicted_overlap;
  std::vector<RankStats> baseline_ranks, predicted_ranks;  // one per process with device ops
  std::shared_ptr<const SimResult> base_sim;               // the baseline's schedule, shared by the reports of one WhatIfBaseline
  SimResult pred_sim;
  ErrorBar error_bar;                  // around predicted_ns: where the measured time lies, 4 times in 5
  std::optional<MemoryPerGpu> memory;  // what one GPU holds under a parallel layout
  Bytes memory_capacity = 0;           // the target GPU's memory
};

WhatIfReport run_whatif(const Trace& t, const WhatIfOptions& opt);

// The baseline of what-ifs on one trace with one set of options (range, source GPU, sharing, the
// profiler's step), built once (graph, work, engine, the baseline's simulation and what is read
// from it): run() answers each set of transforms as run_whatif would, without building it again
// (advise's suggestions). Transforms whose profiler step differs from the baseline's get a
// baseline of their own.
class WhatIfBaseline {
 public:
  WhatIfBaseline(const Trace& t, const WhatIfOptions& opt);  // of opt.transforms, only --unprofile counts here
  WhatIfReport run(const std::vector<Transform>& transforms) const;
  const WorkTable& work() const;  // each op's work on the trace's GPU (estimate_work)

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};
// The trace's GPU: --source-hw, the device name, or (hand-written workloads) a hypothetical GPU.
HwSpec pick_source(const Trace& t, const std::string& override_spec);

// The profiler's host cost step a what-if runs first (--unprofile given among opt.transforms, or
// "auto" by default when the trace's profiler has costs; null with --unprofile off or none), the
// other transforms after it in `transforms`, the profiler's name in `name`.
Transform unprofile_step(const Trace& t, const WhatIfOptions& opt, std::vector<Transform>& transforms, std::string& name);

}  // namespace bneck
