// --precision DTYPE[:SEL]. Model card: precision (autocast-like). GEMM, attention and convolution
//   kernels move to the target precision on tensor cores where the GPU has them (time x
//   model(new) / model(old)), with the cast of their weight operand (numel x (old + new bytes),
//   from shapes) folded into them; elementwise and copy kernels outside the optimizer move their
//   bytes by the element size ratio at the achieved bandwidth of their access width (PyTorch's
//   vectorized kernels keep 16-byte accesses; one element per thread kernels drop to 2-byte
//   accesses, which reach less bandwidth: half the bytes is not half the time); norms, reductions,
//   softmax (fp32 accumulation) and optimizer kernels (multi_tensor_apply) are kept.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "models/whatif/fp8.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/units.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

class Precision : public TransformStep {
 public:
  Precision(Dtype dtype, std::string sel) : dtype_(dtype), sel_(std::move(sel)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const GpuSpec& g = c.spec.gpu;
    require_math(ctx.trace, g, dtype_, text);
    auto hit = ctx.select(sel_, true);
    c.gemm_dtype = dtype_;
    std::size_t compute = 0, memory = 0, kept = 0;
    Dtype from = Dtype::FP32;  // a GEMM's precision before (the sibling's ratio, said in the log)
    TimeNs before = 0, after = 0, math_before = 0, surfaced = 0;
    const double new_b = dtype_bytes(dtype_);
    const ConvOps convs = conv_ops(ctx.trace, ctx.work, c.durations);
    for (OpId i = 0; i < ctx.trace.ops.size(); ++i) {
      const Op& o = ctx.trace.ops[i];
      if (!hit[i] || o.kind != OpKind::Kernel || (o.flags & Op::kFlagNccl)) continue;
      const KernelWork& w = ctx.work[i];
      // TF32 is a math mode of fp32 GEMMs (allow_tf32): kernels of any other type, and every
      // elementwise kernel, run as they did.
      const bool untouched = dtype_ == Dtype::TF32 ? !(w.dtype == Dtype::FP32 && is_compute_class(w.cls)) : false;
      if (untouched || w.dtype == dtype_ || (dtype_bytes(w.dtype) <= new_b && !is_compute_class(w.cls))) {
        ++kept;
        continue;
      }
      if (conv_op_kernel(w) && !is_compute_class(w.cls)) continue;  // moves with its convolution's math (below)
      const std::string& name = ctx.trace.name(o);
      TimeNs d = c.durations[i], nd = d;
      if (is_compute_class(w.cls)) {
        KernelWork w2 = w;
        w2.dtype = dtype_;
        w2.unit = g.best_unit(dtype_);
        w2.bytes = w.bytes * new_b / dtype_bytes(w.dtype);
        bool by_surfaces = false;
        const auto [o_t, n_t] = model_kernel_pair(ctx.trace, i, w, w2, c.spec, &by_surfaces);
        math_before += d;
        if (by_surfaces) surfaced += d;
        const double old_t = static_cast<double>(o_t), new_t = static_cast<double>(n_t);
        nd = old_t > 0 ? static_cast<TimeNs>(std::llround(static_cast<double>(d) * new_t / old_t)) : d;
        if (w.weight_elems > 0 && dtype_ != Dtype::TF32) {  // the cast of the weight, folded into its GEMM (TF32: a math mode)
          double cast_bytes = w.weight_elems * (dtype_bytes(w.dtype) + new_b);
          nd += static_cast<TimeNs>(std::llround(cast_bytes / (g.memory_bandwidth * g.streaming_efficiency_for(16)) * 1e9)) + g.kernel_tail;
        }
        ++compute;
        from = w.dtype;
      } else if ((w.cls == KernelClass::Elementwise || w.cls == KernelClass::Copy) &&
                 name.find("multi_tensor_apply") == std::string::npos) {
        nd = streaming_at(name, d, dtype_bytes(w.dtype), new_b, g);
        ++memory;
      } else {
        ++kept;
        continue;
      }
      before += d;
      after += nd;
      c.durations[i] = nd;
    }
    scale_conv_helpers(convs, ctx.work, c);
    if (math_before > 0) c.surface_share = static_cast<double>(surfaced) / static_cast<double>(math_before);
    const std::size_t transposes =
        g.best_unit(dtype_) == ComputeUnit::Tensor ? add_conv_layout_transposes(ctx.trace, convs, ctx.work, hit, new_b, c) : 0;
    c.log.push_back(
        text + " (the trace runs " + recipe_in_use(ctx.trace, ctx.work) + "): " + std::to_string(compute) +
        " GEMM/attention/conv kernels to " + to_string(dtype_) + " on " + to_string(g.best_unit(dtype_)) + ", " + std::to_string(memory) +
        " elementwise/copy kernels at " + fmt_num("%.0f", new_b) + " B/element, " + std::to_string(kept) + " kept" +
        (transposes ? ", " + std::to_string(transposes) + " NCHW/NHWC layout transposes added around cuDNN's convolutions" : "") +
        (compute ? gemm_pair_note(g, from, dtype_) : std::string()) + "; " + format_duration(before) + " -> " + format_duration(after));
  }

 private:
  Dtype dtype_;
  std::string sel_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  CompanionArgs a = split_companions(arg);
  const std::string& main = a.main;
  auto c = main.find(':');
  const std::string name = main.substr(0, c);
  const std::string sel = c != std::string::npos ? checked_selector(main.substr(c + 1)) : std::string();
  TimeNs host = -1;  // autocast: from the trace; fp8: 6 us (a compiled quantization kernel's launch)
  if (const std::string* h = a.find("cast-host")) {
    try {
      host = parse_duration(*h);
    } catch (const std::exception& e) { throw InputError("--cast-host " + *h + ": " + e.what()); }
  }
  if (name == "autocast-bf16" || name == "autocast-fp16")
    return make_autocast_step(name == "autocast-bf16" ? Dtype::BF16 : Dtype::FP16, sel, host);
  if (name == "fp8-tensor" || name == "fp8-row" || name == "fp8-block")
    return make_fp8_step(name.substr(4), sel, host >= 0 ? host : 6 * kNsPerUs);
  auto d = dtype_from_string(name);
  if (!d)
    throw InputError("--precision " + main +
                     ": unknown precision (fp32, tf32, bf16, fp16, fp8, autocast-bf16, autocast-fp16, fp8-tensor, fp8-row, fp8-block)");
  return std::make_unique<Precision>(*d, sel);
}

const char* const kCompanions[] = {
    "cast-host=DURATION: host time of one autocast cast (default 10.9 us, measured unprofiled) or fp8 quantization kernel (6 us)", nullptr};

}  // namespace

extern const TransformDef kPrecisionTransform{
    "precision",
    "DTYPE[:SEL]",
    TransformDef::Arg::Required,
    "GEMM/attention/conv and elementwise kernels move to DTYPE (fp32, tf32: math mode, bf16/fp16/fp8: the whole model); "
    "autocast-bf16 / autocast-fp16: PyTorch autocast's recipe (GEMMs in DTYPE behind casts, softmax and norms fp32); "
    "fp8-tensor / fp8-row / fp8-block: Linear GEMMs in fp8 behind per-tensor, per-row or per-block quantization",
    parse,
    kCompanions};

}  // namespace bneck
