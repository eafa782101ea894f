// --precision fp8-tensor / fp8-row / fp8-block: a model's Linear layers in fp8 as Transformer Engine
// and torchao's Float8Linear run them; attention, norms, softmax, elementwise ops and the optimizer
// keep their precision.
//   GEMMs of two-dimensional operands (aten::mm / addmm; batched GEMMs are attention's and stay) run
//   in fp8 on tensor cores: time x model(fp8) / model(source), rowwise scaling x kRowGemm.
//   Each operand is quantized first, kernels folded into the GEMM's time on its stream:
//   - tensor (dynamic per-tensor scaling): an amax reduction to one scalar (kAmaxTensor of the
//     memory bandwidth: a split reduction of a few hundred blocks, far from streaming), then a
//     scale-and-cast pass (source bytes read, 1 B written: kCast); in training the cast also writes
//     the transposed copy the backward's GEMMs read (kCastTranspose, 2 B written);
//   - row (per-row / per-output-channel scales): the amax per row streams (kAmaxRow), then the cast;
//   - block (1 x 128 activation, 128 x 128 weight blocks, DeepSeek-V3 style): one fused pass per
//     operand (amax and cast in the block), at kCast.
//   Inference (no backward GEMM in the trace) casts weights once up front: only activations are
//   quantized. Training quantizes x and W in each forward GEMM and the output gradient once for the
//   two backward GEMMs that read it (each backward GEMM's first operand is that gradient or its
//   transpose: half a quantization each).
//   Two small kernels per quantization (the reduction's last stage, the scale) of one kernel tail
//   each; each quantization kernel's launch adds `host` to the call that launches the GEMM.
// Rates measured on an H200 (validate/reference/h200/fp8: torch._scaled_mm with torch.compile'd
// quantization, the 8 x 4096 x 8192 runs; the 4 x 8192 x 4096 runs held out).
#include "models/whatif/fp8.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {

LaneId forward_lane(const Trace& t) {
  LaneId main = kNone;
  TimeNs first = std::numeric_limits<TimeNs>::max();
  for (const Op& o : t.ops)
    if (o.kind == OpKind::Kernel && o.link != kNone && t.ops[o.link].start < first) {
      first = t.ops[o.link].start;
      main = t.ops[o.link].lane;
    }
  return main;
}

bool conv_op_kernel(const KernelWork& w) { return w.from_shapes && w.op.find("convolution") != std::string_view::npos; }

ConvOps conv_ops(const Trace& t, const WorkTable& work, const std::vector<TimeNs>& durations) {
  ConvOps ops;
  bool any = false;
  for (OpId i = 0; i < t.ops.size() && !any; ++i) any = t.ops[i].kind == OpKind::Kernel && conv_op_kernel(work[i]);
  if (!any) return ops;
  std::vector<OpId> ks;  // every launched kernel, in launch order per thread
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].kind == OpKind::Kernel && t.ops[i].link != kNone) ks.push_back(i);
  auto launch = [&](OpId k) { return std::pair{t.ops[t.ops[k].link].lane, t.ops[t.ops[k].link].start}; };
  std::stable_sort(ks.begin(), ks.end(), [&](OpId a, OpId b) { return launch(a) < launch(b); });
  for (std::size_t a = 0; a < ks.size();) {
    const KernelWork& wa = work[ks[a]];
    std::size_t b = a + 1;
    if (conv_op_kernel(wa)) {
      while (b < ks.size() && launch(ks[b]).first == launch(ks[a]).first && conv_op_kernel(work[ks[b]]) && work[ks[b]].op == wa.op &&
             work[ks[b]].out_elems == wa.out_elems)
        ++b;
      ops.kernels.emplace_back(ks.begin() + static_cast<long>(a), ks.begin() + static_cast<long>(b));
      double math = 0;
      for (OpId k : ops.kernels.back())
        if (is_compute_class(work[k].cls)) math += static_cast<double>(durations[k]);
      ops.math_before.push_back(math);
    }
    a = b;
  }
  return ops;
}

void scale_conv_helpers(const ConvOps& ops, const WorkTable& work, WhatIfCase& c) {
  for (std::size_t n = 0; n < ops.kernels.size(); ++n) {
    double math = 0;
    for (OpId k : ops.kernels[n])
      if (is_compute_class(work[k].cls)) math += static_cast<double>(c.durations[k]);
    if (ops.math_before[n] > 0)
      for (OpId k : ops.kernels[n])
        if (!is_compute_class(work[k].cls))
          c.durations[k] = static_cast<TimeNs>(std::llround(static_cast<double>(c.durations[k]) * math / ops.math_before[n]));
  }
}

std::size_t add_conv_layout_transposes(const Trace& t, const ConvOps& ops, const WorkTable& work, const std::vector<bool>& hit, double elem,
                                       WhatIfCase& c, bool channels_last) {
  const GpuSpec& g = c.spec.gpu;
  if (ops.kernels.empty()) return 0;
  std::vector<TimeNs> launches;  // the launch calls' durations: their median is a transpose's
  for (const Op& o : t.ops)
    if (o.kind == OpKind::Kernel && o.link != kNone) launches.push_back(c.durations[o.link]);
  std::nth_element(launches.begin(), launches.begin() + static_cast<long>(launches.size() / 2), launches.end());
  const TimeNs launch = launches[launches.size() / 2];
  std::size_t added = 0;
  for (const std::vector<OpId>& group : ops.kernels) {
    OpId math = kNone;
    bool nchw = true;
    double bytes = 0;
    for (OpId k : group) {
      const KernelWork& w = work[k];
      bytes += w.bytes;
      if (!is_compute_class(w.cls)) continue;
      if (math == kNone) math = k;
      if (w.dtype != Dtype::FP32 || t.name(t.ops[k]).find("nhwc") != std::string::npos) nchw = false;
    }
    const bool spatial = work[group.front()].conv_spatial;
    if (math == kNone || !nchw || !(spatial || channels_last) || !hit[math]) continue;
    // The op's tensors: its shapes' bytes (fp32) over 4 = input + filter + output elements.
    const double elems = bytes / 4;
    const int n = spatial ? 3 : 2;  // a 1x1 filter's layouts are the same
    c.durations[math] +=
        static_cast<TimeNs>(std::llround(2 * elems * elem / (g.memory_bandwidth * g.memory_efficiency) * 1e9)) + n * g.kernel_tail;
    c.durations[t.ops[math].link] += n * launch;
    added += static_cast<std::size_t>(n);
  }
  return added;
}

TimeNs streaming_at(const std::string& name, TimeNs d, double old_b, double new_b, const GpuSpec& g) {
  const bool vectorized = name.find("vectorized") != std::string::npos;
  const Bytes old_w = vectorized ? 16 : static_cast<Bytes>(old_b), new_w = vectorized ? 16 : static_cast<Bytes>(new_b);
  const double eff = g.streaming_efficiency_for(old_w) / g.streaming_efficiency_for(new_w);
  const double body = static_cast<double>(std::max<TimeNs>(0, d - g.kernel_tail));
  return static_cast<TimeNs>(std::llround(body * new_b / old_b * eff)) + std::min(d, g.kernel_tail);
}

std::string recipe_in_use(const Trace& t, const WorkTable& work) {
  double gemm[8] = {}, pointwise[8] = {};
  for (OpId i = 0; i < t.ops.size() && i < work.size(); ++i) {
    const Op& o = t.ops[i];
    if (o.kind != OpKind::Kernel || (o.flags & Op::kFlagNccl)) continue;
    const auto d = static_cast<std::size_t>(work[i].dtype) & 7;
    if (is_compute_class(work[i].cls)) gemm[d] += static_cast<double>(o.duration());  // GEMMs, convolutions, attention
    if (work[i].cls == KernelClass::Norm || work[i].cls == KernelClass::Softmax) pointwise[d] += static_cast<double>(o.duration());
  }
  const auto top = [](const double* v) { return static_cast<Dtype>(std::max_element(v, v + 8) - v); };
  if (*std::max_element(gemm, gemm + 8) <= 0) return "no GEMMs";
  const Dtype g = top(gemm), e = top(pointwise);
  const bool half = g == Dtype::BF16 || g == Dtype::FP16;
  if (half && e == Dtype::FP32) return std::string("autocast-") + to_string(g) + " (" + to_string(g) + " GEMMs, fp32 norms and softmax)";
  if (half) return std::string(to_string(g)) + " (the whole model)";
  if (g == Dtype::FP8) return "fp8 GEMMs";
  return to_string(g);
}

void require_math(const Trace& t, const GpuSpec& g, Dtype d, const std::string& what) {
  if (g.peak_of(d, ComputeUnit::Tensor) > 0 || g.peak_of(d, ComputeUnit::Simt) > 0) return;
  throw InputError(t.source, what + ": no " + to_string(d) + " math on " + (g.name.empty() ? std::string("this GPU") : g.name) + " (--hw " +
                                 (d == Dtype::FP8 ? "h100-sxm" : "a100-sxm-80gb") + " before it asks another GPU)");
}

bool has_backward(const Trace& t) {
  const LaneId main = forward_lane(t);
  for (const Op& o : t.ops)
    if (o.kind == OpKind::Kernel && o.link != kNone && t.ops[o.link].lane != main) return true;
  return false;
}

namespace {

constexpr double kAmaxTensor = 0.33;     // amax to one scalar: 1.58 TB/s of 4.8 on the H200 (fit)
constexpr double kAmaxRow = 0.67;        // amax per row: 3.22 TB/s (fit)
constexpr double kCast = 0.64;           // scale, clamp and cast, 2 B read + 1 B written: 3.07 TB/s (fit)
constexpr double kCastTranspose = 0.41;  // the same writing both layouts (4 B an element): 1.95 TB/s (fit)
constexpr double kRowGemm = 1.03;        // rowwise-scaled GEMM over per-tensor: 13.79 / 13.39 ms (fit)

enum class QuantScaling { Tensor, Row, Block };

class Fp8 : public TransformStep {
 public:
  Fp8(QuantScaling s, std::string sel, TimeNs host) : s_(s), sel_(std::move(sel)), host_(host) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    require_math(t, c.spec.gpu, Dtype::FP8, text);
    auto hit = ctx.select(sel_, true);
    const LaneId main = forward_lane(t);
    bool training = false;
    for (OpId i = 0; i < t.ops.size() && !training; ++i)
      training = linear(ctx, i) && t.ops[i].link != kNone && t.ops[t.ops[i].link].lane != main;
    std::size_t gemms = 0, kept = 0, quants = 0, low_bit = 0;
    TimeNs before = 0, after = 0, quant_total = 0, host_total = 0;
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      if (!hit[i] || o.kind != OpKind::Kernel || (o.flags & Op::kFlagNccl) || !is_compute_class(ctx.work[i].cls)) continue;
      if (!linear(ctx, i)) {
        ++kept;
        continue;
      }
      if (low_bit_weight_gemm(t.name(o))) {  // weights already in 4 bits: fp8's would double their bytes
        ++low_bit;
        continue;
      }
      const KernelWork& w = ctx.work[i];
      const TimeNs d = c.durations[i];
      TimeNs nd = gemm_time(ctx, c, i);
      const bool forward = o.link != kNone && t.ops[o.link].lane == main;
      double n_quant = 0;
      TimeNs q = 0;
      if (w.from_shapes && w.out_rows > 0 && w.out_cols > 0) {
        const double m = w.out_rows, n = w.out_cols, k = w.flops / (2 * m * n);
        const double src = dtype_bytes(w.dtype);
        if (!forward) {  // the output gradient (or its transpose), shared with the other backward GEMM
          q = quant_ns(c.spec.gpu, m * k, src, true) / 2;
          n_quant = 0.5;
        } else {
          q = quant_ns(c.spec.gpu, m * k, src, training);
          n_quant = 1;
          if (training) q += quant_ns(c.spec.gpu, k * n, src, true), n_quant += 1;
        }
      }
      nd += q;
      quant_total += q;
      quants += static_cast<std::size_t>(std::lround(2 * n_quant));
      if (n_quant > 0 && o.link != kNone) {
        const TimeNs h = static_cast<TimeNs>(std::llround(static_cast<double>(host_) * kernels_per_quant() * n_quant));
        c.durations[o.link] += h;
        host_total += h;
      }
      before += d;
      after += nd;
      c.durations[i] = nd;
      ++gemms;
    }
    const char* names[] = {"per-tensor", "per-row", "per-block"};
    c.log.push_back(
        text + " (the trace runs " + recipe_in_use(t, ctx.work) + "): " + std::to_string(gemms) + " linear GEMMs in fp8 (" +
        names[static_cast<int>(s_)] + " scaling, " +
        (training ? "training: x, W and the output gradient" : "inference: activations; weights cast once") + " quantized, " +
        std::to_string(quants / 2) + " quantizations: " + format_duration(quant_total) + " on the GPU, " + format_duration(host_total) +
        " on the host), " + std::to_string(kept) + " batched GEMM/attention kernels kept" +
        (low_bit ? ", " + std::to_string(low_bit) + " GEMMs whose weights are already 4-bit (mxfp4, int4: their names) kept" : "") + "; " +
        format_duration(before) + " -> " + format_duration(after));
  }

 private:
  // A GEMM of two-dimensional operands, not already fp8.
  static bool linear(const WhatIfContext& ctx, OpId i) {
    const KernelWork& w = ctx.work[i];
    return ctx.trace.ops[i].kind == OpKind::Kernel && w.cls == KernelClass::Gemm && w.batch <= 1 && w.dtype != Dtype::FP8 &&
           w.dtype != Dtype::INT8 && w.dtype != Dtype::FP64;
  }
  TimeNs gemm_time(const WhatIfContext& ctx, const WhatIfCase& c, OpId i) const {
    const KernelWork& w = ctx.work[i];
    KernelWork w2 = w;
    w2.dtype = Dtype::FP8;
    w2.unit = c.spec.gpu.best_unit(Dtype::FP8);
    w2.bytes = w.bytes / dtype_bytes(w.dtype);
    const auto [o_t, n_t] = model_kernel_pair(ctx.trace, i, w, w2, c.spec);
    const double old_t = static_cast<double>(o_t), new_t = static_cast<double>(n_t) * (s_ == QuantScaling::Row ? kRowGemm : 1.0);
    const double d = static_cast<double>(c.durations[i]);
    return old_t > 0 ? static_cast<TimeNs>(std::llround(d * new_t / old_t)) : c.durations[i];
  }
  double kernels_per_quant() const { return s_ == QuantScaling::Block ? 1 : 4; }  // amax, its last stage, the scale, the cast
  // One operand of `elems` elements of `src` bytes quantized (with its transposed copy).
  TimeNs quant_ns(const GpuSpec& g, double elems, double src, bool transposed) const {
    const double bw = g.memory_bandwidth;
    const double cast = transposed ? elems * (src + 2) / (bw * kCastTranspose) : elems * (src + 1) / (bw * kCast);
    double sec = cast;
    TimeNs small = 0;
    if (s_ != QuantScaling::Block) {
      sec += elems * src / (bw * (s_ == QuantScaling::Tensor ? kAmaxTensor : kAmaxRow));
      small = 2 * g.kernel_tail;
    }
    return static_cast<TimeNs>(std::llround(sec * 1e9)) + small + g.kernel_tail;
  }
  QuantScaling s_;
  std::string sel_;
  TimeNs host_;
};

}  // namespace

std::unique_ptr<TransformStep> make_fp8_step(const std::string& scaling, std::string sel, TimeNs host) {
  const QuantScaling s = scaling == "row" ? QuantScaling::Row : scaling == "block" ? QuantScaling::Block : QuantScaling::Tensor;
  return std::make_unique<Fp8>(s, std::move(sel), host);
}

}  // namespace bneck
