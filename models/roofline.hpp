// Model card: roofline per precision, unit and memory level.
// Captures: a kernel is bound either by arithmetic (FLOPs over the peak of its precision and unit)
//   or by data movement (bytes over the bandwidth of the memory level it streams from), each
//   derated by a calibrated efficiency; plus a fixed per-kernel tail (ramp-up and drain).
// Equation: time = max(F / (P_dtype,unit * e_c), B / (BW_level * e_m)) + tail;
//   ridge = P / BW (FLOP per byte); attainable(I) = min(P * e_c, I * BW * e_m).
// Valid: kernels that stream their operands once at a steady rate (elementwise, reductions,
//   large GEMMs). Latency-bound kernels (tiny grids) and launch-bound runs are the launch and
//   wave-quantization models' business.
// Source: Williams, Waterman, Patterson, "Roofline", CACM 2009; peaks from hw/presets.
#pragma once
#include <string>

#include "hw/spec.hpp"

namespace bneck {

enum class MemLevel : std::uint8_t { Hbm = 0, L2 = 1 };
enum class Bound : std::uint8_t { Compute = 0, Memory = 1, Latency = 2, Launch = 3 };
const char* to_string(Bound b);

struct RooflineResult {
  double ridge_flop_per_byte = 0;    // P / BW (with efficiencies)
  double attainable_flop_per_s = 0;  // at this kernel's intensity
  double compute_time_s = 0, memory_time_s = 0;
  TimeNs time_ns = 0;  // max of the two + tail
  Bound bound = Bound::Memory;
  double peak = 0, bandwidth = 0;  // effective rates used
};

struct RooflineInput {
  Dtype dtype = Dtype::FP32;
  ComputeUnit unit = ComputeUnit::Simt;
  double flops = 0;
  double bytes = 0;
  MemLevel level = MemLevel::Hbm;
  bool with_tail = true;
  double memory_efficiency = -1;  // < 0: the spec's
  double compute_efficiency = -1;
};

RooflineResult roofline(const GpuSpec& g, const RooflineInput& in);

}  // namespace bneck
