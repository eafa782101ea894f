#include "models/sharing.hpp"

#include <algorithm>
#include <cmath>

#include "models/kernel_work.hpp"
#include "models/occupancy.hpp"

namespace bneck {

GpuShareModel::GpuShareModel(const Trace& t, HwSpec spec, const WorkTable* work, bool hbm_from_work) : t_(t), spec_(std::move(spec)) {
  const double bw = spec_.gpu.memory_bandwidth * spec_.gpu.memory_efficiency;
  if (work && work->size() == t.ops.size() && bw > 0 && hbm_from_work) {
    hbm_of_op_.assign(t.ops.size(), -1.0f);
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const KernelWork& w = (*work)[i];
      TimeNs d = t.ops[i].duration();
      if (t.ops[i].kind != OpKind::Kernel || !w.from_shapes || d <= 0) continue;
      double hbm = w.level == MemLevel::Hbm ? w.bytes / (bw * static_cast<double>(d) * 1e-9) : 0.0;
      hbm_of_op_[i] = static_cast<float>(std::clamp(hbm, 0.0, 1.0));
    }
  }
  // Kernel classes by name, once per distinct name (demands are asked per op, from several threads).
  class_of_name_.assign(t.strings.size(), -1);
  for (const Op& o : t.ops)
    if (o.kind == OpKind::Kernel && o.name < class_of_name_.size() && class_of_name_[o.name] < 0)
      class_of_name_[o.name] = static_cast<std::int8_t>(classify_kernel(t.name(o)));
  // Occupancy once per distinct launch configuration.
  blocks_per_sm_.reserve(t.kernels.size());
  for (const LaunchConfig& lc : t.kernels) {
    std::uint32_t threads = std::uint32_t{lc.block[0]} * lc.block[1] * lc.block[2];
    OccupancyResult occ = occupancy(spec_.gpu, {threads, lc.registers, Bytes{lc.static_smem} + lc.dynamic_smem});
    blocks_per_sm_.push_back(static_cast<std::uint16_t>(std::clamp<std::uint32_t>(occ.blocks_per_sm, 1, 0xFFFF)));
  }
  // Demands once per distinct launch, for the class of the first kernel launched so (a launch's
  // kernels nearly always share a class; others are computed when asked).
  launch_class_.assign(t.kernels.size(), -1);
  of_launch_.resize(t.kernels.size());
  for (const Op& o : t.ops) {
    if (o.kind != OpKind::Kernel || o.extra >= t.kernels.size() || launch_class_[o.extra] >= 0 || (o.flags & Op::kFlagNccl) ||
        o.name >= class_of_name_.size() || class_of_name_[o.name] < 0)
      continue;
    launch_class_[o.extra] = class_of_name_[o.name];
    of_launch_[o.extra] = demand_of_class(&t.kernels[o.extra], class_of_name_[o.name], blocks_per_sm_[o.extra]);
  }
  // Persistent GEMMs with known tiles: a grid within one wave of the GPU (occupancy of its launch
  // from the table above) and more tiles than blocks.
  if (work && work->size() == t.ops.size()) {
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const KernelWork& w = (*work)[i];
      const LaunchConfig* lc = t.launch(t.ops[i]);
      if (t.ops[i].kind != OpKind::Kernel || w.tiles <= 0 || !lc || t.ops[i].extra >= blocks_per_sm_.size()) continue;
      const std::uint64_t blocks = std::uint64_t{lc->grid(0)} * lc->grid(1) * lc->grid(2);
      const std::uint64_t wave = std::uint64_t{spec_.gpu.sm_count} * blocks_per_sm_[t.ops[i].extra];
      if (blocks == 0 || blocks > wave || w.tiles <= static_cast<double>(blocks) || w.tiles > 1e9) continue;
      tiles_of_op_.emplace_back(i, static_cast<std::uint32_t>(w.tiles));
    }
  }
}

ShareDemand GpuShareModel::demand_of_class(const LaunchConfig* lc, int cls, std::uint32_t blocks_per_sm) const {
  const GpuSpec& g = spec_.gpu;
  ShareDemand d;
  auto c = static_cast<KernelClass>(cls);
  switch (c) {
    case KernelClass::Elementwise:
    case KernelClass::Reduction:
    case KernelClass::Softmax:
    case KernelClass::Norm:
    case KernelClass::Copy: d.hbm = 1.0f; break;
    case KernelClass::Communication:
      d.hbm = 0.2f;
      d.fixed_rate = true;
      break;
    default: d.hbm = 0.3f; break;
  }
  d.sms = g.sm_count;
  d.sm_fraction = 1.0f;
  LaunchConfig ring;  // a NCCL ring all-reduce's launch on an H200 (see the model card)
  if (!lc && c == KernelClass::Communication) {
    ring.set_grid(0, 24);
    ring.block[0] = 544;
    ring.registers = 96;
    ring.dynamic_smem = 103808;
    lc = &ring;
  }
  if (!lc || g.sm_count == 0) return d;
  std::uint64_t blocks = std::uint64_t{lc->grid(0)} * lc->grid(1) * lc->grid(2);
  std::uint32_t threads = std::uint32_t{lc->block[0]} * lc->block[1] * lc->block[2];
  if (blocks == 0 || threads == 0) return d;
  Bytes smem = Bytes{lc->static_smem} + lc->dynamic_smem;
  std::uint32_t bps =
      blocks_per_sm ? blocks_per_sm : std::max<std::uint32_t>(1, occupancy(g, {threads, lc->registers, smem}).blocks_per_sm);
  d.sms = static_cast<std::uint32_t>(std::min<std::uint64_t>(blocks, g.sm_count));
  double per_sm = std::min<double>(bps, std::ceil(static_cast<double>(blocks) / d.sms));
  double f = per_sm / std::max<std::uint32_t>(1, g.max_blocks_per_sm);
  f = std::max(f, per_sm * threads / std::max<std::uint32_t>(1, g.max_threads_per_sm));
  if (lc->registers) f = std::max(f, per_sm * threads * lc->registers / std::max<std::uint32_t>(1, g.registers_per_sm));
  if (g.shared_memory_per_sm) f = std::max(f, per_sm * static_cast<double>(smem) / static_cast<double>(g.shared_memory_per_sm));
  d.sm_fraction = static_cast<float>(std::min(1.0, f));
  // One block per SM and one wave: short of SMs, the blocks that find none run in a second wave
  // (128 blocks on 108 SMs: 2 rounds, rate 1/2; the fluid share would say 108/128).
  if (bps == 1 && blocks > 1 && blocks <= g.sm_count && c != KernelClass::Communication) d.tiles = static_cast<std::uint32_t>(blocks);
  return d;
}

ShareDemand GpuShareModel::demand(NodeId n, const Graph& g) const {
  OpId o = g.origin(n);
  if (o == kNone || o >= t_.ops.size()) {
    if (g.nccl(n)) {  // a synthesized collective: it waits for all its SMs (no measured start to keep)
      ShareDemand d = demand_of_class(nullptr, static_cast<int>(KernelClass::Communication));
      d.needs_sms = true;
      return d;
    }
    ShareDemand d;
    d.sms = spec_.gpu.sm_count;
    d.sm_fraction = 1.0f;
    d.hbm = 0.3f;
    return d;
  }
  const Op& op = t_.ops[o];
  if (op.kind == OpKind::Kernel) {
    bool nccl = (op.flags & Op::kFlagNccl) != 0 || g.nccl(n);
    int cls = nccl                                                              ? static_cast<int>(KernelClass::Communication)
              : op.name < class_of_name_.size() && class_of_name_[op.name] >= 0 ? class_of_name_[op.name]
                                                                                : static_cast<int>(classify_kernel(t_.name(op)));
    const LaunchConfig* lc = t_.launch(op);
    ShareDemand d = lc && op.extra < launch_class_.size() && launch_class_[op.extra] == cls
                        ? of_launch_[op.extra]
                        : demand_of_class(lc, cls, lc && op.extra < blocks_per_sm_.size() ? blocks_per_sm_[op.extra] : 0);
    if (o < hbm_of_op_.size() && hbm_of_op_[o] >= 0 && !d.fixed_rate) d.hbm = hbm_of_op_[o];
    if (!tiles_of_op_.empty() && !d.fixed_rate) {
      auto it = std::lower_bound(tiles_of_op_.begin(), tiles_of_op_.end(), std::make_pair(o, std::uint32_t{0}));
      if (it != tiles_of_op_.end() && it->first == o) d.tiles = it->second;
    }
    return d;
  }
  ShareDemand d;
  const CopyInfo* ci = t_.copy(op);
  const bool h2d = ci && ci->copy_kind == MemcpyKind::HtoD, d2h = ci && ci->copy_kind == MemcpyKind::DtoH;
  if (h2d || d2h) {  // over PCIe, by the copy engines
    const NodeSpec& nd = spec_.node;
    auto path_bw = [&](const char* name, double dflt) {
      auto it = nd.copy_paths.find(name);
      return it != nd.copy_paths.end() && it->second.bandwidth > 0 ? it->second.bandwidth : dflt;
    };
    const double pinned = path_bw(h2d ? "h2d_pinned" : "d2h_pinned", nd.pcie_bandwidth);
    const double pageable = path_bw(h2d ? "h2d_pageable" : "d2h_pageable", nd.pageable_bandwidth);
    const MemKind host = h2d ? ci->src : ci->dst;
    double share = 1.0;  // of its direction
    if (host == MemKind::Pageable) share = pinned > 0 && pageable > 0 ? std::min(1.0, pageable / pinned) : 0.1;
    (h2d ? d.pcie_h2d : d.pcie_d2h) = static_cast<float>(share);
    if (nd.pcie_bidirectional_bandwidth > 0 && pinned > 0)
      d.pcie = static_cast<float>(std::min(1.0, share * pinned / nd.pcie_bidirectional_bandwidth));
    d.hbm = 0.02f;
    return d;
  }
  // Device-to-device copies and memsets: copy kernels on the SMs, at full occupancy.
  d.sms = spec_.gpu.sm_count;
  d.sm_fraction = 1.0f;
  d.hbm = 1.0f;
  return d;
}

void enable_sharing(Graph& g, const HwSpec& spec, const WorkTable* work, bool hbm_from_work) {
  auto m = std::make_shared<GpuShareModel>(*g.trace, spec, work, hbm_from_work);
  g.sharing = m;
  if (g.trace->measured) calibrate_sharing(g, *m);
}

}  // namespace bneck
