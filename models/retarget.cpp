#include "models/retarget.hpp"

#include <algorithm>
#include <cmath>

#include "models/occupancy.hpp"
#include "models/transfer.hpp"
#include "sim/base/error.hpp"

namespace bneck {

const char* to_string(DurationMode m) {
  static const char* const names[] = {"measured", "model", "hybrid"};
  return names[static_cast<int>(m)];
}

KernelEstimate model_kernel(const Trace& t, OpId k, const KernelWork& w, const HwSpec& hw) {
  KernelEstimate e;
  const GpuSpec& g = hw.gpu;
  RooflineInput in{w.dtype, w.unit, w.flops, w.bytes, MemLevel::Hbm, true, -1, -1};
  RooflineResult r = roofline(g, in);
  double compute_s = r.compute_time_s, memory_s = r.memory_time_s;
  if (const LaunchConfig* lc = t.launch(t.ops[k])) {
    std::uint64_t blocks = std::uint64_t{lc->grid[0]} * lc->grid[1] * lc->grid[2];
    std::uint32_t threads = std::uint32_t{lc->block[0]} * lc->block[1] * lc->block[2];
    OccupancyResult occ = occupancy(g, {threads, lc->registers, Bytes{lc->static_smem} + lc->dynamic_smem});
    Waves wv = wave_quantization(blocks, std::max<std::uint32_t>(1, occ.blocks_per_sm), g.sm_count);
    e.waves = wv.waves;
    e.wave_efficiency = wv.efficiency;
    if (blocks > 0 && blocks < g.sm_count) {
      double f = static_cast<double>(blocks) / g.sm_count;  // only some SMs work
      compute_s /= f;
      memory_s /= f;
    } else if (wv.efficiency > 0) {
      compute_s /= wv.efficiency;
    }
  }
  double s = std::max(compute_s, memory_s);
  e.bound = compute_s >= memory_s ? Bound::Compute : Bound::Memory;
  e.time_ns = static_cast<TimeNs>(std::llround(s * 1e9)) + g.kernel_tail;
  if (static_cast<double>(g.kernel_tail) > s * 1e9) e.bound = Bound::Latency;
  return e;
}

TimeNs model_device_op(const Trace& t, OpId i, const KernelWork& w, const HwSpec& hw) {
  const Op& o = t.ops[i];
  if (o.kind == OpKind::Kernel) return model_kernel(t, i, w, hw).time_ns;
  const CopyInfo* ci = t.copy(o);
  Bytes b = ci ? ci->bytes : 0;
  if (o.kind == OpKind::Memset) return memset_time(hw, b);
  return transfer_time(hw, ci ? ci->copy_kind : MemcpyKind::Unknown, ci ? ci->src : MemKind::Unknown,
                       ci ? ci->dst : MemKind::Unknown, b);
}

RetargetCostModel::RetargetCostModel(const Trace& t, HwSpec source, HwSpec target, DurationMode mode)
    : t_(t), source_(std::move(source)), target_(std::move(target)), mode_(mode) {
  work_ = estimate_work(t, source_);
  times_.assign(t.ops.size(), 0);
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (!is_device_op(o.kind)) continue;
    if (mode_ == DurationMode::Measured || (o.flags & Op::kFlagNccl)) {
      times_[i] = o.duration();
      continue;
    }
    TimeNs tgt = model_device_op(t, i, work_[i], target_);
    if (mode_ == DurationMode::Model) {
      times_[i] = tgt;
    } else {
      TimeNs src = model_device_op(t, i, work_[i], source_);
      times_[i] = src > 0 ? static_cast<TimeNs>(std::llround(static_cast<double>(o.duration()) * static_cast<double>(tgt) / static_cast<double>(src)))
                          : o.duration();
    }
  }
}

TimeNs RetargetCostModel::duration(OpId n, const Graph& g) const {
  const Op& o = g.trace->ops[n];
  if (is_device_op(o.kind)) return times_[n];
  if (!g.intrinsic.empty()) {
    auto it = g.intrinsic.find(n);
    if (it != g.intrinsic.end()) return it->second;
  }
  return o.duration();
}

HwSpec source_spec(const Trace& t, const std::string& override_spec) {
  if (!override_spec.empty()) return load_hw(override_spec);
  for (const auto& d : t.devices) {
    std::string p = preset_for_device(d.name);
    if (!p.empty()) return load_hw(p);
  }
  throw InputError(t.source, "cannot tell which GPU the trace was captured on (device '" +
                                 (t.devices.empty() ? std::string("?") : t.devices[0].name) + "'): pass --source-hw SPEC");
}

}  // namespace bneck
