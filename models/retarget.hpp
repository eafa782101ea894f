// Model card: model-mode replay and retargeting.
// Captures: the duration of each kernel, copy and memset on a target GPU.
//   model:  from the models alone: the roofline of its work (kernel_work.hpp) on the target, with
//           wave quantization from its launch configuration and the target's occupancy; copies and
//           memsets from the transfer model.
//   hybrid: the measured duration scaled by model(target) / model(source): what the models say
//           changes, applied to what was measured (Habitat's idea). Same GPU: the measured time.
//   measured: the trace's durations.
// Host API calls keep their measured CPU time; communication kernels keep their measured time
// (the collective model comes with the multi-rank issue).
// Equation: small grids (fewer blocks than SMs) get the fraction blocks/SMs of the device's rates;
//   larger ones divide the math time by the wave efficiency (waves = ceil(blocks / slots)).
// Valid: as the roofline and kernel_work models; precision changes are the what-if engine's.
// Source: Yu et al., "Habitat", USENIX ATC 2021 (scaling measured kernels across GPUs).
#pragma once
#include <unordered_map>
#include <vector>

#include "hw/spec.hpp"
#include "models/kernel_work.hpp"
#include "models/roofline.hpp"
#include "sim/engine/cost_model.hpp"

namespace bneck {

enum class DurationMode : std::uint8_t { Measured = 0, Model = 1, Hybrid = 2 };
const char* to_string(DurationMode m);

// The model's time for any device op on `hw` (kernels, copies, memsets).
TimeNs model_device_op(const Trace& t, OpId i, const KernelWork& w, const HwSpec& hw);

// Whether two GPUs are one chip with other memory (an H200 and an H100 SXM): the same SMs, clock
// and FP32 rate, so the same libraries pick the same kernels on both.
bool same_chip(const GpuSpec& a, const GpuSpec& b);

class RetargetCostModel : public CostModel {
 public:
  // The work of each kernel estimated from the trace (estimate_work), or given (a workload
  // described op by op, as validate/ describes its microbenchmarks).
  RetargetCostModel(const Trace& t, HwSpec source, HwSpec target, DurationMode mode);
  RetargetCostModel(const Trace& t, HwSpec source, HwSpec target, DurationMode mode, WorkTable work);
  // Work held elsewhere, one entry per op of `t`, kept alive (or outliving the model) by `work`.
  RetargetCostModel(const Trace& t, HwSpec source, HwSpec target, DurationMode mode, std::shared_ptr<const WorkTable> work);
  const char* name() const override {
    return mode_ == DurationMode::Model ? "model" : mode_ == DurationMode::Hybrid ? "hybrid" : "measured";
  }
  const char* description() const override { return "roofline, waves and transfers on a target GPU (models/retarget.hpp)"; }
  TimeNs duration(OpId n, const Graph& g) const override;
  const WorkTable& work() const { return *work_; }
  const HwSpec& source() const { return source_; }
  const HwSpec& target() const { return target_; }
  DurationMode mode() const { return mode_; }
  TimeNs device_time(OpId n) const { return times_[n]; }  // precomputed for device ops
  // What retargeting assumed, one line each: precisions or units the target lacks and what runs
  // instead (the roofline's fallback: the precision on SIMT cores, else FP32 SIMT, emulated).
  std::vector<std::string> assumptions() const;

 private:
  const Trace& t_;
  HwSpec source_, target_;
  DurationMode mode_;
  std::shared_ptr<const WorkTable> work_;
  std::vector<TimeNs> times_;
  bool same_chip_ = false;   // the target is the source's chip (same_chip)
  HwSpec same_chip_target_;  // then: the target with the source's GEMM efficiencies
  // Communication kernels: the collective model's time on the target (model mode) and the ratio
  // target/source (hybrid), applied to the measured part after the last member arrived.
  std::unordered_map<OpId, TimeNs> coll_model_;
  std::unordered_map<OpId, double> coll_ratio_;
};

// The spec of the GPU the trace was captured on: `override_spec` if given, else the preset that
// matches its device name. Throws InputError if neither works.
// The part a device the trace leaves unnamed (or names by ROCm's generic "AMD Radeon Graphics") is,
// where its properties tell (a ROCm profile's: HIP runtime calls, its CUs and gfx version;
// amd_part_from_properties); "" otherwise.
std::string unnamed_device_part(const Trace& t, const Device& d);
// The name the trace gives its GPU (its last named device), "" where it names none.
std::string named_device(const Trace& t);
// A trace that names no GPU and records no properties: the preset of the architecture most of its
// kernels were built for, where cuBLAS and cuDNN name it (volta_, sm80_, nvjet_sm90_...), with
// `why` saying so; "" where none does. source_spec takes it (its from_trace says it is a guess).
std::string preset_from_kernel_names(const Trace& t, std::string& why);
HwSpec source_spec(const Trace& t, const std::string& override_spec);

}  // namespace bneck
