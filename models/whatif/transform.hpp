// What-if transforms: a registry of named graph rewrites (docs/design.md: pure functions Graph, spec ->
// Graph', spec', log). Each transform is one file in models/whatif/ defining a TransformDef and
// one line in registry.cpp; the CLI options, `bneck whatif --help`, the scenario JSON keys and the
// README's list are generated from the table (`bneck whatif --list-transforms`).
//
// A case starts from the baseline: the calibrated graph of a trace and the durations of its base
// cost model (measured). Transforms rewrite durations, edges and nodes (through GraphEditor:
// synthesized nodes, removals, repeats, splits) and the hardware spec; they compose in the order
// given and each writes a line to the case's log.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hw/spec.hpp"
#include "models/kernel_work.hpp"
#include "sim/engine/engine.hpp"
#include "sim/graph/edit.hpp"

namespace bneck {

// What transforms share: the trace, its base graph and GPU, the work estimated for its kernels.
struct WhatIfContext {
  const Trace& trace;
  std::shared_ptr<const Graph> base;
  HwSpec source;
  WorkTable work;
  // Ops a selector picks (all ops, or device ops only); an empty selector picks every device op.
  std::vector<bool> select(const std::string& sel, bool device_only) const;
};

// What one GPU holds under a parallel layout (whatif --json `memory_per_gpu`), in bytes; a part
// below 0 is one the trace cannot tell (JSON null). The pipeline's figure is its largest stage's.
struct MemoryPerGpu {
  double parameters = -1, gradients = -1, optimizer = -1, activations = -1;
  double buffers = 0;    // what the layout adds beside them (DDP's gradient buckets, FSDP's gathered units)
  double total() const;  // the known parts, buffers included
};
// The optimizer the trace's `Optimizer.step#NAME.step` range names ("" if none) and the state it
// keeps per parameter byte (Adam, AdamW: two moments; another named one: none, as without momentum;
// no such range: -1, unknown).
struct OptimizerState {
  std::string name;
  double per_param = -1;
};
OptimizerState optimizer_state(const Trace& t);
// `params` bytes of parameters on a GPU, with the gradients (as many, where the trace trains) and
// the optimizer state (optimizer_state) that go with them; activations unknown.
MemoryPerGpu model_state_memory(const Trace& t, double params);
// "gradients 12 MiB, optimizer state 24 MiB; total 48 MiB" (unknown parts said so).
std::string memory_parts_text(const MemoryPerGpu& m);

struct WhatIfCase {
  std::shared_ptr<const Graph> graph;  // the base graph, or this case's own edited copy
  std::vector<TimeNs> durations;       // per trace op (synthetic nodes: by their DurationSource)
  HwSpec spec;                         // the target after --hw
  std::vector<std::string> log;
  std::vector<bool> scaled;            // ops a --scale selected (for Amdahl)
  double scale_factor = 0;             // the first --scale's factor, 0 if none
  std::optional<MemoryPerGpu> memory;  // set by the parallel layouts
  bool profiler_removed = false;       // --unprofile took the profiler's host cost out
  TimeNs profiler_removed_ns = 0;      // how much host time it took out
  double profiler_cost_cv = 0;         // its per-event cost's spread over programs (ProfilerSetting::cost_cv)
  double layout_ranks = 0;             // the ranks a parallel layout forecasts (0: the trace's own)
  double host_ranks = 0;               // the ranks whose slowest host the forecast's host runs at (0: not applied)
  bool host_pace_given = false;        // --host-speed set every rank's pace
  bool grad_compress = false;          // --grad-compress: fp32 gradient all-reduces in 16 bits
  std::optional<Dtype> gemm_dtype;     // the precision GEMMs run in after a --precision (none: as traced)
  double surface_share = 1;            // of the math a --precision changed (its time before), the share measured shape surfaces priced
  TimeNs fused_host_removed_ns = 0;    // host time --fuse took out (the fused ops' dispatches, the compiled wrapper's cap)
  TimeNs host_gaps_removed_ns = 0;     // host time between calls a transform took out (--input-workers), for Amdahl
  double fused_conv_share = 0;         // --fuse auto: the convolutions' share of the kernels' time it started from
  // Autocast's casts of an op's activation input folded into its duration (a GEMM's fp32 input
  // cast down, a norm's or softmax's low-precision input cast up), GPU time by op; --fuse auto
  // takes them out where the compiled kernel writes or reads that dtype itself (fuse.cpp).
  std::vector<std::pair<OpId, TimeNs>> input_casts;
  // The case's own graph (copied from the base on first use) to edit.
  Graph& edit_graph();
};

// One parsed transform, ready to apply.
class TransformStep {
 public:
  virtual ~TransformStep() = default;
  virtual void apply(const WhatIfContext& ctx, WhatIfCase& c) const = 0;
  // Whether it prices work on the GPU's rates (a roofline, a collective, a launch cost): false for
  // the transforms that keep or rescale measured times (--scale, --remove, --repeat, --unprofile),
  // which run on a trace of a GPU no preset names.
  virtual bool needs_gpu_rates() const { return true; }
  std::string text;  // as given ("--scale 2:name~gemm"), for the log
};
using Transform = std::shared_ptr<const TransformStep>;

struct TransformDef {
  enum class Arg { None, Optional, Required };
  const char* name;     // option name without dashes: "scale" -> --scale, scenario key "scale"
  const char* metavar;  // "FACTOR:SEL"
  Arg arg;
  const char* help;                                                 // one line
  std::unique_ptr<TransformStep> (*parse)(const std::string& arg);  // throws InputError
  // Companion options ("tp-comm" for --tensor-parallel: `--tensor-parallel 2 --tp-comm SEL`), each
  // "name=METAVAR: help", nullptr-terminated; they follow the transform on the command line (or sit
  // beside its key in a scenario entry) and reach parse() inside its argument (split_companions).
  const char* const* companions = nullptr;
};

// A transform's argument with its companion options: "2\ntp-comm=name~gemm" -> {"2", {tp-comm: ...}}.
struct CompanionArgs {
  std::string main;
  std::vector<std::pair<std::string, std::string>> options;  // in the order given
  const std::string* find(const std::string& name) const;
};
CompanionArgs split_companions(const std::string& arg);

// The table (registry.cpp), in the order --help lists it.
const std::vector<const TransformDef*>& transform_registry();
// By name; '-' and '_' are the same ("cuda-graph" = "cuda_graph"). nullptr if unknown.
const TransformDef* find_transform(const std::string& name);
// "--scale 2:name~k_compute" -> parse_transform("scale", "2:name~k_compute"). Throws InputError.
Transform parse_transform(const std::string& name, const std::string& arg);
// The transforms as the option list of --help and the README (markdown when `markdown`).
std::string transform_help(bool markdown);

struct Scenario {
  std::string name;
  std::vector<Transform> transforms;
};
// {"name": "...", "transforms": [{"scale": "2:name~gemm"}, {"remove": "kind=memset"}, ...]}: keys
// are the registry's names.
Scenario load_scenario(const std::string& path);

// Re-times the communication kernels of the trace's collectives for `ranks` ranks: each by the
// collective model's time for `ranks` over its time for the group it had, on the case's spec
// (--ranks, --data-parallel). Returns the kernels re-timed; adds their time before and after.
struct RetimedCollectives {
  std::size_t kernels = 0;
  TimeNs before = 0, after = 0;
};
RetimedCollectives retime_collectives(const Trace& t, WhatIfCase& c, std::uint32_t ranks);
// Command-line words after TRACE: `--NAME ARG`, `--NAME=ARG`, `--scenario FILE`, in order.
std::vector<Transform> parse_transform_args(const std::vector<std::string>& args, std::string& scenario_name);

// Helpers of the parallelism transforms (data, tensor, pipeline):
// "2" -> 2 for `--option 2`, within 1 .. max (InputError naming the option and `what` otherwise).
std::uint32_t parse_count(const std::string& text, const char* option, std::uint32_t max, const char* what);
// A companion's size ("16 MiB"), positive; `dflt` when absent.
Bytes companion_bytes(const CompanionArgs& a, const char* name, Bytes dflt);
// Which batch a parallel forecast holds fixed (`--scaling weak|strong`, a companion of --fsdp,
// --data-parallel, --tensor-parallel, --pipeline-parallel): weak the per-GPU batch (every GPU does
// the traced batch's work: the global batch is N times it), strong the global batch (the traced
// one, shared by the GPUs).
enum class Scaling { Weak, Strong };
// The companion "scaling", `dflt` when absent; an InputError for anything but weak or strong.
Scaling companion_scaling(const CompanionArgs& a, Scaling dflt);
// The kernels among `ops` (collectives passed over) doing `factor` times their work: each one's
// time x model(factor work) / model(work) (retime_by_work, the grid too). Adds their times before
// and after to `before` and `after`; returns how many.
std::size_t rescale_kernels(const WhatIfContext& ctx, WhatIfCase& c, const std::vector<OpId>& ops, double factor, TimeNs& before,
                            TimeNs& after);
// The log line of a replicated-model forecast (data parallel, FSDP) of `n` GPUs: weak, or strong
// with its compute kernels' time before and after the split.
std::string replica_scaling_line(Scaling s, std::uint32_t n, TimeNs before, TimeNs after);
// A kernel's measured time `d` re-timed for a multiple of its work: measured x model(work') /
// model(work), with FLOPs x `flops_factor`, bytes x `bytes_factor`, and its grid x `grid_factor`
// (fewer blocks only where it had more than one per SM; more blocks unless it was one block or a
// persistent grid of exactly the SMs). `rows_factor`: a GEMM of known shape has that many times its
// output rows (its batch count for a batched GEMM), so that its efficiency is the larger shape's
// (a larger batch: the weights and the inner dimension stay). `fixed_excess`: a kernel that took
// over 1.25x the model's time keeps the excess as it was (launch latency, a small grid's overheads,
// split-K helpers), model(work') + (measured - model(work)), instead of scaling it (--batch).
TimeNs retime_by_work(const Trace& t, OpId i, const KernelWork& w, TimeNs d, const HwSpec& spec, double flops_factor, double bytes_factor,
                      double grid_factor, double rows_factor = 1, bool fixed_excess = false);
// The weights (second operands, from shapes) of the GEMM kernels `keep` accepts in the first
// top-level range that has any (a step): what one copy of the model holds. 0 without shapes.
double step_gemm_weights(const WhatIfContext& ctx, const std::function<bool(OpId)>& keep);
// The profiler a trace was recorded with, and its host cost per recorded event (unprofile.cpp).
struct ProfilerSetting {
  std::string name;        // empty: none known (a hand-written workload)
  TimeNs per_op = 0;       // per recorded op range (PyTorch op, NVTX range)
  TimeNs per_call = 0;     // per recorded CUDA call
  TimeNs pace = 0;         // the trace's launch pace (launch_pace) the PyTorch profiler's costs scale with (0: none)
  std::string pace_note;   // the pace outside those measured, said
  std::string unmodelled;  // a setting the trace shows whose cost is not taken out (said in the log)
  double cost_cv = 0;      // the per-event cost's coefficient of variation over the programs it was measured on
  bool costs() const { return per_op > 0 || per_call > 0; }
};
ProfilerSetting profiler_setting(const Trace& t);
// The host's pace a trace shows: the median recorded duration of its kernel-launch calls (0: fewer
// than 20). A profiler's per-event cost moves with it from one host to the next.
TimeNs launch_pace(const Trace& t);
// The host's pace from one process to the next (host_speed.cpp): each program's per-process median
// host step over its median, measured on H200 hosts, sorted.
struct HostSpread {
  static const std::vector<double>& ratios();
  static double expected_max(double n);                                     // E[max of n draws]
  static double expected_max(double n, const std::vector<double>& sorted);  // of another sample
  static double expected_slowest(double n, double k = 1);                   // E[max of n] / E[max of k]
  static std::pair<double, double> slowest_spread(double n);                // 10th / 90th percentile of max of n over its mean
};
// Every CUDA call's own time and every host gap between calls on a thread x `factor`.
void scale_host_work(const Trace& t, WhatIfCase& c, double factor);
// Ranks with device work in the trace (at least 1).
std::uint32_t traced_ranks(const Trace& t);
// A layout forecast of more ranks than the trace's (c.layout_ranks): the host runs at the expected
// slowest of them (logged). WhatIfEngine::apply calls it after the transforms.
void slowest_host_of_ranks(const Trace& t, WhatIfCase& c);
// A parallel layout of `n` ranks composes with the ones before it (n x theirs).
inline void add_layout_ranks(WhatIfCase& c, double n) { c.layout_ranks = (c.layout_ranks > 0 ? c.layout_ranks : 1) * n; }
// The two casts around an fp32 gradient bucket of `fp32_bytes` all-reduced in 16 bits (--grad-compress).
TimeNs grad_compress_casts(const GpuSpec& g, Bytes fp32_bytes);
// A communication stream on `device` of `process` named `name`.
LaneId add_comm_lane(GraphEditor& ed, std::uint32_t device, std::uint32_t process, std::string name);
// A communication kernel of fixed duration `d` on `lane`.
NodeId add_comm_node(GraphEditor& ed, LaneId lane, std::string name, TimeNs d);

// A constant duration per trace op.
class VectorCostModel : public CostModel {
 public:
  explicit VectorCostModel(std::vector<TimeNs> d, std::string name = "what-if") : d_(std::move(d)), name_(std::move(name)) {}
  const char* name() const override { return name_.c_str(); }
  const char* description() const override { return "durations rewritten by what-if transforms"; }
  TimeNs duration(OpId n, const Graph&) const override { return d_[n]; }

 private:
  std::vector<TimeNs> d_;
  std::string name_;
};

class WhatIfEngine {
 public:
  // `base` is built from `t` with calibration; `source` is the trace's GPU.
  WhatIfEngine(const Trace& t, std::shared_ptr<const Graph> base, HwSpec source, WorkTable work = {});
  WhatIfCase baseline() const;  // measured durations
  WhatIfCase apply(const std::vector<Transform>& transforms) const;
  // apply() in two parts: `prefix` applies the first transforms and `resume` the rest to a copy of
  // its case, then what follows every transform (the ranks' slowest host); resume(prefix(a), b) is
  // apply(a + b) when a is not empty. A case shares its graph until a transform edits it, so the
  // cases resumed from one prefix share its graph.
  WhatIfCase prefix(const std::vector<Transform>& first) const;
  WhatIfCase resume(WhatIfCase c, const std::vector<Transform>& rest) const;
  const WorkTable& work() const { return ctx_.work; }
  const WhatIfContext& context() const { return ctx_; }

 private:
  void find_blocked_launches();
  WhatIfContext ctx_;
  std::vector<std::pair<OpId, TimeNs>> unblocked_;  // launch calls that waited on the queue: their own CPU time
  std::string blocked_note_;
};

// Helpers for transforms.
std::size_t count_selected(const std::vector<bool>& v);
// The trace ops `hit` marks removed from the case (--remove's mechanism: each a zero-time
// pass-through node, by `transform`); returns the time they took.
TimeNs remove_ops(WhatIfCase& c, const std::vector<bool>& hit, const std::string& transform);
std::string fmt_num(const char* f, double a);
// A transform argument that must be a selector (checked now, so errors come before the import).
std::string checked_selector(const std::string& sel);
// The share of its busiest SM's load a grid's average SM carries: B / (S x ceil(B / S)) for B
// blocks on S SMs, 1 for at most S blocks or no launch geometry (--fill-waves, advise).
double sm_fill(const LaunchConfig* lc, std::uint64_t sms);
// sm_fill of kernel `k` on `hw` where filling its grid would gain (a GEMM, convolution, attention or
// another kernel the model does not call memory-bound); 1 for streaming and communication kernels.
double wave_fill(const Trace& t, OpId k, const KernelWork& w, const HwSpec& hw);

}  // namespace bneck
