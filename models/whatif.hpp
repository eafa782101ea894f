// What-if transforms and their application (DESIGN.md: pure functions Graph, spec -> Graph',
// spec', log). They live beside the cost models because fusion, precision and retargeting need
// them; sim/whatif holds the selectors they use.
//
// A case starts from the baseline: the calibrated graph of a trace and the durations of its base
// cost model (measured, or retargeted with --hw). Each transform rewrites durations and, for CUDA
// graphs, edge delays; the engine then replays the changed graph. Transforms compose in the order
// given and each writes a line to the case's log.
//
// Model card: fusion. Each maximal run of consecutive selected kernels on one stream becomes one
//   kernel: intermediates stay on chip, so bytes = the first kernel's inputs + the last kernel's
//   outputs (each kernel's bytes taken as half read, half written), FLOPs add up, one launch and one
//   tail. Time = the models' time for the fused work x (the run's measured time / the models' time
//   for its kernels): the run's own calibration carries over. Host launch calls are kept.
// Model card: precision (autocast-like). GEMM, attention and convolution kernels move to the target
//   precision on tensor cores where the GPU has them (time x model(new) / model(old)), with the cast
//   of their weight operand (numel x (old + new bytes), from shapes) folded into them; elementwise and
//   copy kernels outside the optimizer move their bytes by the element size ratio at the achieved
//   bandwidth of their access width (PyTorch's vectorized kernels keep 16-byte accesses; one element
//   per thread kernels drop to 2-byte accesses, which reach less bandwidth: half the bytes is not half
//   the time); norms, reductions, softmax (fp32 accumulation) and optimizer kernels
//   (multi_tensor_apply) are kept.
// Model card: CUDA graph. In each selected region (each instance of the selected NVTX ranges, or
//   each top-level range), the host launch calls become one graph launch: the first launch call
//   takes the GPU spec's graph_launch_overhead, the other calls and the CPU time between them take
//   none (blocking syncs keep waiting); the first kernel starts launch_latency after the graph
//   launch, the others follow each other after graph_node_latency.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "hw/spec.hpp"
#include "models/retarget.hpp"
#include "sim/engine/engine.hpp"
#include "sim/whatif/selector.hpp"
#include "models/measured.hpp"

namespace bneck {

struct Transform {
  enum Kind { Scale, Remove, Fuse, Precision, CudaGraph, Hw, OverlapComm, Ranks } kind = Scale;
  std::uint32_t ranks = 0;    // Ranks
  double factor = 1;          // Scale
  std::string selector;       // empty: everything the transform applies to
  Dtype dtype = Dtype::BF16;  // Precision
  std::string hw;             // Hw
  std::string text;           // as given, for the log
};
// "--scale 2:name~k_compute" -> parse_transform("scale", "2:name~k_compute"). Throws InputError.
Transform parse_transform(const std::string& kind, const std::string& arg);

struct Scenario {
  std::string name;
  std::vector<Transform> transforms;
};
// {"name": "...", "transforms": [{"scale": "2:name~gemm"}, {"remove": "kind=memset"},
//  {"fuse": "range~chain"}, {"precision": "bf16"}, {"cuda_graph": "range~tok.*"}, {"hw": "h100-sxm"}]}
Scenario load_scenario(const std::string& path);

// A constant duration per node.
class VectorCostModel : public CostModel {
 public:
  explicit VectorCostModel(std::vector<TimeNs> d, std::string name = "what-if") : d_(std::move(d)), name_(std::move(name)) {}
  const char* name() const override { return name_.c_str(); }
  const char* description() const override { return "durations rewritten by what-if transforms"; }
  TimeNs duration(OpId n, const Graph&) const override { return d_[n]; }
  const std::vector<TimeNs>& durations() const { return d_; }

 private:
  std::vector<TimeNs> d_;
  std::string name_;
};

struct WhatIfCase {
  std::shared_ptr<const Graph> graph;   // the base graph, or a copy with rewritten edge delays
  std::vector<TimeNs> durations;        // per node
  HwSpec spec;                          // the target after --hw
  std::vector<std::string> log;
  std::vector<bool> scaled;             // ops a --scale selected (for Amdahl)
  double scale_factor = 0;              // the first --scale's factor, 0 if none
};

class WhatIfEngine {
 public:
  // `base` is built from `t` with calibration; `source` is the trace's GPU.
  WhatIfEngine(const Trace& t, std::shared_ptr<const Graph> base, HwSpec source);
  // The baseline durations: measured (no --hw in the transforms).
  WhatIfCase baseline() const;
  WhatIfCase apply(const std::vector<Transform>& transforms) const;
  const std::vector<KernelWork>& work() const { return work_; }

 private:
  void scale(WhatIfCase& c, const Transform& tr) const;
  void remove(WhatIfCase& c, const Transform& tr) const;
  void fuse(WhatIfCase& c, const Transform& tr) const;
  void precision(WhatIfCase& c, const Transform& tr) const;
  void cuda_graph(WhatIfCase& c, const Transform& tr) const;
  void retarget(WhatIfCase& c, const Transform& tr) const;
  void overlap_comm(WhatIfCase& c, const Transform& tr) const;
  void ranks(WhatIfCase& c, const Transform& tr) const;
  std::vector<bool> select(const std::string& sel, bool device_only) const;

  const Trace& t_;
  std::shared_ptr<const Graph> base_;
  HwSpec source_;
  std::vector<KernelWork> work_;
};

}  // namespace bneck
