// --fill-waves[=SEL]. Model card: a kernel's grid filled to a whole multiple of the GPU's SMs.
// Captures: the blocks of a grid are spread over the SMs; a kernel lasts as long as its busiest
//   SM, which runs n = ceil(B / S) blocks (B blocks, S SMs) while the average SM runs B / S. A
//   grid of a whole multiple of S blocks (a batch, head count or tile size that gives one) does
//   the same work with every SM equally loaded.
// Equation: t' = t x B / (S x ceil(B / S)) for each selected kernel with B > S; measured time t.
// Valid: kernels whose blocks do equal work and whose busiest SM sets the time (attention,
//   implicit-GEMM convolutions, non-persistent GEMMs); persistent kernels (a grid of S or of the
//   resident blocks) are whole already. Not applied: grids of at most S blocks (an underfilled
//   GPU: more blocks, not fuller waves), communication kernels, streaming kernels (elementwise,
//   reductions, softmax, norms, copies) and unclassified ones the model calls memory-bound: the
//   bandwidth a partial wave leaves goes to their other blocks.
// Measured: validate/reference/h200/waves (one H200, 132 SMs): FlashAttention forward (29 grids),
//   an implicit-GEMM convolution (14), cutlass memory-efficient attention (33, held out): median
//   |error| 2.5, 3.1 and 7.6 % against each kernel's per-block time at whole multiples; the
//   misses (up to +34 %) keep time that co-resident blocks sharing an SM do not take.
// Source: NVIDIA, "GPU Performance Background User's Guide" (wave quantization).
#include <cmath>

#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {
namespace {

class FillWaves : public TransformStep {
 public:
  explicit FillWaves(std::string sel) : sel_(std::move(sel)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    const std::vector<bool> hit = ctx.select(sel_, true);
    const std::uint64_t sms = std::max<std::uint32_t>(1, c.spec.gpu.sm_count);
    std::size_t n = 0, streaming = 0;
    TimeNs before = 0, after = 0;
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      if (!hit[i] || o.kind != OpKind::Kernel || (o.flags & Op::kFlagNccl) || sm_fill(t.launch(o), sms) >= 1) continue;
      const double eff = wave_fill(t, i, ctx.work[i], c.spec);
      if (eff >= 1) {
        ++streaming;
        continue;
      }
      const TimeNs d = c.durations[i];
      const TimeNs nd = static_cast<TimeNs>(std::llround(static_cast<double>(d) * eff));
      before += d;
      after += nd;
      c.durations[i] = nd;
      ++n;
    }
    const std::string sm_text = std::to_string(sms) + " SMs of " + c.spec.name;
    if (n == 0)
      throw InputError(text + ": no kernel of more blocks than the " + sm_text + " whose busiest SM runs more blocks than the average" +
                       (streaming ? " (" + std::to_string(streaming) + " streaming kept)" : std::string()));
    c.log.push_back(text + ": " + std::to_string(n) + " kernels' grids filled to whole multiples of the " + sm_text + ", " +
                    format_duration(before) + " -> " + format_duration(after) + " (the same work, every SM as loaded as the busiest was)" +
                    (streaming ? "; " + std::to_string(streaming) + " streaming kept" : std::string()));
  }

 private:
  std::string sel_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) { return std::make_unique<FillWaves>(checked_selector(arg)); }

}  // namespace

double sm_fill(const LaunchConfig* lc, std::uint64_t sms) {
  if (!lc || sms == 0) return 1;
  const std::uint64_t blocks = std::uint64_t{lc->grid(0)} * lc->grid(1) * lc->grid(2);
  if (blocks <= sms) return 1;
  const std::uint64_t busiest = (blocks + sms - 1) / sms;
  return static_cast<double>(blocks) / static_cast<double>(busiest * sms);
}

double wave_fill(const Trace& t, OpId k, const KernelWork& w, const HwSpec& hw) {
  const Op& o = t.ops[k];
  if (o.kind != OpKind::Kernel || (o.flags & Op::kFlagNccl)) return 1;
  const double fill = sm_fill(t.launch(o), hw.gpu.sm_count);
  if (fill >= 1) return 1;
  const KernelClass c = w.cls;
  if (c == KernelClass::Elementwise || c == KernelClass::Reduction || c == KernelClass::Softmax || c == KernelClass::Norm ||
      c == KernelClass::Copy || c == KernelClass::Communication)
    return 1;
  if (!is_compute_class(c) && w.flops > 0 && model_kernel(t, k, w, hw).bound == Bound::Memory) return 1;
  return fill;
}

extern const TransformDef kFillWavesTransform{
    "fill-waves", "SEL", TransformDef::Arg::Optional,
    "kernels whose grid leaves SMs a block short (more blocks than SMs, not a multiple) timed as if the grid filled every SM "
    "(a batch, head count or tile size that gives whole waves)",
    parse};
}  // namespace bneck
