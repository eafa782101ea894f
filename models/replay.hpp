// The replay pipeline: builds the graph of a trace, picks the cost model (measured, model, hybrid,
// retargeted), simulates, and analyses the schedule (spans, overlap, ranks, critical paths, slack,
// per-range figures, the per-class model table). tools/views renders what it returns.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/analysis/ranges.hpp"
#include "sim/engine/cost_model.hpp"

namespace bneck {

struct ReplayOptions {
  std::optional<std::string> range_regex;        // --range: NVTX ranges whose name matches in full
  std::string hw;                                // --hw: target GPU (preset or file); empty: the trace's
  std::string source_hw;                         // --source-hw: the trace's GPU if its name is not enough
  std::string durations = "measured";            // measured | model | hybrid (default hybrid with --hw)
  bool durations_explicit = false;               // --durations was given
  std::size_t cp_limit = 10000;                  // most critical-path entries listed in JSON
  std::size_t top = 15;                          // rows in text tables
  bool sharing = true;                           // concurrent device ops share their GPU (sim/engine/sharing.hpp)
  const std::vector<char>* class_ops = nullptr;  // per trace op: the class table counts these only (null: all)
};

struct RangeResult {
  std::size_t index = 0;  // into trace.ranges
  std::string name;
  std::uint32_t rank = 0;  // of the range's thread
  TimeNs start_ns = 0;     // push time as the trace records it
  TimeNs measured_span_ns = 0, simulated_span_ns = 0;
  TimeNs measured_start_ns = 0;  // its first device op's start as the trace records it
  std::vector<OpId> critical_path;
  std::vector<std::pair<OpId, TimeNs>> slack;  // device ops of the range and their slack
  TimeNs lost_to_sharing_ns = 0;               // its device ops' simulated time beyond their time alone
};

// Device ops that ran slower than alone because they shared their GPU, by kernel name.
struct SharedRow {
  std::string name, bound;  // bound: "SMs" or "HBM" (the more frequent)
  std::size_t count = 0;
  TimeNs alone_ns = 0, shared_ns = 0;
};

// Per kernel class: the roofline table of a model-mode or retargeted replay.
struct ClassRow {
  std::string cls;
  std::size_t kernels = 0, with_shapes = 0;
  TimeNs measured_ns = 0;      // sum of measured durations
  TimeNs model_source_ns = 0;  // the models on the trace's GPU
  TimeNs predicted_ns = 0;     // what the replay used on the target
  double flops = 0, bytes = 0;
  std::string bound;             // on the target, by time
  double achieved_fraction = 0;  // of the source's peak of the binding resource
};
struct MovedKernel {
  std::string name, bound, reason;
  std::size_t count = 0;
  TimeNs measured_ns = 0, predicted_ns = 0;
};

// A matched collective's measured time beside the collective model's: the kernel of the member that
// arrived last (it waited for nobody) from its start to its end.
struct CollectiveCheck {
  std::size_t index = 0;  // into t.collectives
  TimeNs measured_ns = 0, model_ns = 0;
};

struct ReplayReport {
  const Trace* trace = nullptr;
  std::unique_ptr<Graph> graph;
  std::unique_ptr<CostModel> model_impl;
  std::string source_hw, target_hw;
  std::vector<std::string> assumptions;  // what retargeting to target_hw assumed (RetargetCostModel::assumptions)
  std::vector<ClassRow> classes;
  std::vector<MovedKernel> moved;
  SimResult sim;
  std::string model;
  Span measured, simulated;
  Overlap measured_overlap, simulated_overlap;
  std::vector<OpId> critical_path;
  std::vector<TimeNs> slack;
  std::vector<RangeResult> ranges;
  std::vector<RankStats> measured_ranks, simulated_ranks;  // one per process with device ops
  std::vector<CollectiveWait> waits;                       // matched collectives, simulated
  std::vector<CollectiveCheck> collective_checks;          // matched collectives with a kind and size
  std::string collective_spec;                             // the spec the model ran on
  std::vector<SharedRow> shared;                           // by time lost, largest first
  std::size_t drained_kernels = 0;                         // kernels whose last blocks gave SMs to later ones (sharing calibration)
  TimeNs lost_to_sharing_ns = 0;
  double import_s = 0, graph_s = 0, replay_s = 0, analysis_s = 0;
  double import_rss_mb = 0, graph_rss_mb = 0, replay_rss_mb = 0, analysis_rss_mb = 0;  // peak RSS after each phase
};

ReplayReport run_replay(const Trace& t, const ReplayOptions& opt);

// Peak resident set size of this process so far, MiB (Linux; 0 elsewhere).
double peak_rss_mb();

// "no device work in this trace: nothing to WHAT (why)" for a trace with no timed kernel, copy or
// memset (a CPU-only profile, an execution trace without timings); "" when it has some.
std::string no_device_work_line(const Trace& t, const std::string& what);

}  // namespace bneck
