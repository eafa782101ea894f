// The trace's kernels on the roofline: one aggregation for `roofline`, `report`, `advise` and the
// replay's class table. Per kernel name (and per class, the sum of its names): launches, summed
// FLOPs and bytes, summed measured time, and the time the roofline gives them at full efficiency
// on `g`; the achieved fraction of the binding roof is roof time over measured time (time-weighted:
// a long launch counts for its time, not as one kernel). Communication kernels are left out.
#pragma once
#include <string>
#include <vector>

#include "models/kernel_work.hpp"

namespace bneck {

struct KernelPoint {
  std::string name;  // kernel name, or the class for a class row
  KernelClass cls = KernelClass::Other;
  Dtype dtype = Dtype::FP32;  // of its first launch
  std::size_t count = 0, from_shapes = 0;
  double flops = 0, bytes = 0;
  double time_ns = 0;  // measured
  double roof_ns = 0;  // max(FLOPs / peak, bytes / bandwidth) on g, no efficiency, no tail
  double intensity() const { return bytes > 0 ? flops / bytes : 1e4; }
  double achieved_flop_per_s() const { return time_ns > 0 ? flops / (time_ns * 1e-9) : 0; }
  double achieved_bytes_per_s() const { return time_ns > 0 ? bytes / (time_ns * 1e-9) : 0; }
  double achieved_fraction() const { return time_ns > 0 ? roof_ns / time_ns : 0; }
  bool compute_bound(const GpuSpec& g) const;  // its intensity at or past the ridge of its precision
};

// Roofline time of one launch's work on g (no efficiency, no tail), the unit of roof_ns.
double roof_ns(const KernelWork& w, const GpuSpec& g);
// Per kernel name, by measured time (longest first).
std::vector<KernelPoint> kernel_points(const Trace& t, const WorkTable& work, const GpuSpec& g);
// The same points summed per class, by measured time.
std::vector<KernelPoint> class_points(const std::vector<KernelPoint>& by_name);

}  // namespace bneck
