#include "models/kernel_roofline.hpp"

#include <algorithm>
#include <map>

#include "models/roofline.hpp"

namespace bneck {

double roof_ns(const KernelWork& w, const GpuSpec& g) {
  const RooflineInput in{w.dtype, w.unit, w.flops, w.bytes, MemLevel::Hbm, false, 1.0, 1.0};
  const RooflineResult r = roofline(g, in);
  return std::max(r.compute_time_s, r.memory_time_s) * 1e9;
}

bool KernelPoint::compute_bound(const GpuSpec& g) const {
  const double peak = g.peak_of(dtype, g.best_unit(dtype));
  return g.memory_bandwidth > 0 && peak > 0 && intensity() >= peak / g.memory_bandwidth;
}

namespace {
void sort_by_time(std::vector<KernelPoint>& v) {
  std::sort(v.begin(), v.end(),
            [](const KernelPoint& a, const KernelPoint& b) { return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.name < b.name; });
}
}  // namespace

std::vector<KernelPoint> kernel_points(const Trace& t, const WorkTable& work, const GpuSpec& g) {
  std::map<StrId, KernelPoint> agg;
  for (OpId i = 0; i < t.ops.size() && i < work.size(); ++i) {
    const Op& o = t.ops[i];
    if (o.kind != OpKind::Kernel || (o.flags & Op::kFlagNccl)) continue;
    const KernelWork& w = work[i];
    KernelPoint& p = agg[o.name];
    if (p.count == 0) {
      p.name = t.name(o);
      p.cls = w.cls;
      p.dtype = w.dtype;
    }
    ++p.count;
    p.from_shapes += w.from_shapes || w.from_geometry;
    p.flops += w.flops;
    p.bytes += w.bytes;
    p.time_ns += static_cast<double>(o.duration());
    if (o.duration() > 0) p.roof_ns += roof_ns(w, g);
  }
  std::vector<KernelPoint> out;
  out.reserve(agg.size());
  for (auto& [id, p] : agg) out.push_back(std::move(p));
  sort_by_time(out);
  return out;
}

std::vector<KernelPoint> class_points(const std::vector<KernelPoint>& by_name) {
  std::map<KernelClass, KernelPoint> agg;
  for (const KernelPoint& p : by_name) {
    KernelPoint& c = agg[p.cls];
    if (c.count == 0) {
      c.name = to_string(p.cls);
      c.cls = p.cls;
      c.dtype = p.dtype;
    }
    c.count += p.count;
    c.from_shapes += p.from_shapes;
    c.flops += p.flops;
    c.bytes += p.bytes;
    c.time_ns += p.time_ns;
    c.roof_ns += p.roof_ns;
  }
  std::vector<KernelPoint> out;
  for (auto& [k, c] : agg) out.push_back(std::move(c));
  sort_by_time(out);
  return out;
}

}  // namespace bneck
