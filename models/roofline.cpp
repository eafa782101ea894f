#include "models/roofline.hpp"

#include <algorithm>
#include <cmath>

namespace bneck {

const char* to_string(Bound b) {
  static const char* const names[] = {"compute", "memory", "latency", "launch"};
  return names[static_cast<int>(b)];
}

RooflineResult roofline(const GpuSpec& g, const RooflineInput& in) {
  RooflineResult r;
  double ec = in.compute_efficiency > 0 ? in.compute_efficiency : g.compute_efficiency;
  double em = in.memory_efficiency > 0 ? in.memory_efficiency : g.memory_efficiency;
  double peak = g.peak_of(in.dtype, in.unit);
  if (peak <= 0) peak = g.peak_of(in.dtype, ComputeUnit::Simt);
  if (peak <= 0) peak = g.peak_of(Dtype::FP32, ComputeUnit::Simt);  // emulated in FP32
  double bw = in.level == MemLevel::L2 && g.l2_bandwidth > 0 ? g.l2_bandwidth : g.memory_bandwidth;
  r.peak = peak * ec;
  r.bandwidth = bw * em;
  r.ridge_flop_per_byte = r.peak / r.bandwidth;
  double intensity = in.bytes > 0 ? in.flops / in.bytes : INFINITY;
  r.attainable_flop_per_s = std::min(r.peak, intensity * r.bandwidth);
  r.compute_time_s = in.flops / r.peak;
  r.memory_time_s = in.bytes / r.bandwidth;
  r.bound = r.compute_time_s >= r.memory_time_s ? Bound::Compute : Bound::Memory;
  double t = std::max(r.compute_time_s, r.memory_time_s);
  r.time_ns = static_cast<TimeNs>(std::llround(t * 1e9)) + (in.with_tail ? g.kernel_tail : 0);
  if (in.with_tail && g.kernel_tail > 0 && static_cast<double>(g.kernel_tail) > t * 1e9) r.bound = Bound::Latency;
  return r;
}

}  // namespace bneck
