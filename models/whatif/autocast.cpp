// --precision autocast-bf16 / autocast-fp16. Model card: PyTorch's torch.autocast on CUDA, GPU and
//   host. The forward's kernels are walked in launch order with the dtype of the activation they
//   read (fp32 at first):
//   - a GEMM (linear, matmul, bmm, convolution) or fused attention kernel runs in DTYPE on tensor
//     cores (time x model(new) / model(old)) behind a cast of each fp32 input: a linear's weight and
//     its bias (every call: no cache across calls), its activation where that is fp32; a batched
//     GEMM's first operand where it is fp32 (attention probabilities after an fp32 softmax); a
//     fused attention kernel's q, k, v where fp32. A GEMM right after another reads its input (q,
//     k, v projections of one tensor). Its output is in DTYPE.
//     A linear GEMM reading what the previous one read (q/k/v, gate and up projections, with an
//     activation between them: same input elements, not the previous one's output) is its sibling.
//   - a norm, softmax, reduction or fp32-list math kernel (pow, exp, log, rsqrt, reciprocal)
//     casts a DTYPE input up, and outputs fp32.
//   - a binary elementwise op (two tensors) of two DTYPE operands, the product of sibling GEMMs'
//     outputs (SwiGLU's gate x up: same-shape operands) or of two parts of one GEMM's output (a
//     fused gate/up projection: the GEMM's output at least twice an operand), or, with shapes, two
//     full-size operands after a DTYPE activation where neither is the size of an fp32 tensor a
//     GEMM read (a CNN's residual adds; BLOOM's GELU, x * x and x * tanh(...) of the bf16 MLP
//     activation), runs at DTYPE's bytes and outputs DTYPE;
//     with one DTYPE operand (a residual, an attention mask, rotary tables) it promotes to fp32 on
//     PyTorch's casting path, kMixedBroadcast (1.5) x the fp32 kernel's time where an operand is
//     broadcast (the shapes' bytes under 2.9x the elements), kMixedFull (1.25) x where both are
//     full-size (without shapes: the fp32 time). Measured on the autocast traces of GPT-2 large and
//     Qwen2 on an H100 (validate/reference/h100/hf_autocast): mixed broadcast 1.53, 1.54,
//     1.33-1.61x; mixed full-size 1.12-1.34x. Other elementwise kernels keep their time, though
//     those of one DTYPE tensor (scaling, SiLU, GELU's parts) run at 0.47-0.50x there: priced so,
//     BERT-large's forecasts from the five H200 processes' traces fell from -6.1 / -5.7 to -12.7 /
//     -12.2 % (its small bf16 GEMMs and attention products take longer than the shape surfaces'
//     ratio prices them: 4096 x 1024 x 1024 and 128 x 512 x 512 x 64 by 15 and 46 % with the H200's
//     surface against the H100's measured kernels), and GPT-2 large's on the H200 -2.4 -> -7.2 %.
//     (Until 2026-12-05 PyTorch's non-vectorized add and Nsight Systems' spelling of the operand
//     array were not taken for binary ops: a softmax or a LayerNorm after an fp32 add paid a cast
//     that does not happen and the mask's slower add went unpriced; Qwen2's forecast was +16.4 %.)
//   Casts cost the GPU elements x (4 + DTYPE bytes) at the streaming rate plus the kernel tail
//   (folded into the op they feed, on its stream), and the host kCastHost each (aten::to ->
//   _to_copy -> empty_strided + copy_, its launch, and the autocast dispatch of the op it feeds),
//   added to the call that launches that op. Where the profiler's host cost is kept
//   (--unprofile off), each cast also pays the profiler's per-event costs for the four ops and the
//   call it records. A training step (a backward on another thread) casts every gradient of a cast
//   input back to fp32: as many casts again, their host time and GPU time spread over the
//   backward's GEMM launches. cuBLAS's helper kernels (split-K scaling, bias epilogues) belong to
//   their GEMM and keep their time. Without shapes (Nsight Systems without NVTX shapes, a profile
//   without record_shapes) a linear is taken to have a bias, and a cast's elements are a third of
//   its GEMM's bytes over 4.
//   Measured (validate/reference/h200/loops, unprofiled, three processes): the host-bound loop of 48
//   x (LayerNorm, Linear(256), GELU, add) at batch 1 runs 2.03 / 2.30 ms fp32 and 3.47 / 3.85 ms
//   under autocast with its 144 casts (3 a Linear): 10.0 / 10.8 us a cast; BERT-base 1x128 (host-
//   bound) 10.99 -> 13.30 ms with 195 casts a step: 11.8 us. kCastHost is their mean, 10.9 us
//   (fitted on those two). Held out: BERT-large, GPT-2 large, OPT-1.3B, Llama (hf_models), GPT-2
//   medium (loops) and the core block pair (docs/whatif.md).
//   A forward convolution traced in fp32 pays kConvAutocastHost more host under autocast: its
//   trace under autocast shows aten::conv2d twice (autocast's wrapper dispatches it again on the
//   cast tensors) and cuDNN's 16-bit path; the conv loops of validate/reference/h100/autocast_host
//   and h100/cnn_bn (eager, unprofiled, three processes on each of three machines) ran 42.3, 29.6
//   and 29.3 us an op over plain (medians), their two casts 22 of it. A batch norm in eval mode
//   reading a DTYPE convolution's output leaves cuDNN's fp32 kernel for PyTorch's native one:
//   kBnNativeHost more host and kBnNativeGpu more GPU (two small ops). In training (cuDNN's
//   bn_fw_tr kernels) the native path was not measured: not priced. Neither term is scaled by the
//   launch pace: three processes of one machine ran at 4.5-6.7 us a launch and their costs over it
//   scatter (batch norm 2.2-2.9x, the conv 4.4-5.4x, a cast 1.1-2.3x). Held out (h100/hf_heldout,
//   h100/profiler_cost, h100/cnn_bn), ResNet-50 inference under autocast, the dispatch at 20.3 us
//   (the first machine's alone) and no batch-norm term -> both terms as now: 64x224 -8.8 -> -3.7 %,
//   16x224 -13.2 -> +0.3 % (second machine) and -6.9 -> +15.8 % (the fastest host), 8x224 -20.8 ->
//   -1.4 %, 16x224 on a seventh machine +2.2 % (captured after); MobileNetV2 16x224 -21.4 -> -16.6 %;
//   training 32x224 +9.4 -> +7.6 %.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "models/whatif/fp8.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/units.hpp"

namespace bneck {
namespace {

constexpr TimeNs kCastHost = 10'900;  // ns: one cast's host time unprofiled, H200 hosts (card above)
// A convolution's own host work under autocast beyond its casts (card above): the conv loops of
// validate/reference/h100/autocast_host (38.7-45.2 us an op over plain in three processes) and
// h100/cnn_bn (28.1-34.2 and 28.4-34.6 on two more machines), the nine's median 34.2 us less its
// two casts at 10.9 us (the LayerNorm loops' one cast an op: 11.0 and 7.7 us on two machines).
constexpr TimeNs kConvAutocastHost = 12'400;
// A batch norm in eval mode whose input is DTYPE where the fp32 trace ran cuDNN's (card above):
// PyTorch's native path, its stats copied (a device-to-device copy) and its inverse deviation
// computed by a kernel of its own before the transform. Host: the bn_mixed loops of
// validate/reference/h100/cnn_bn (bf16 input against fp32, fp32 stats, unprofiled), 14.05 us an op
// more (the median of six processes on two machines: 13.5-16.6 and 10.3-17.5; the conv + batch
// norm loops' difference over the conv loop, 16.1-17.6). GPU: the copy and the kernel, 1.28 + 1.50
// us (medians of ResNet-50 64x224's autocast trace, h100/hf_heldout). The profiler's cost where
// kept: three ops and one call more.
constexpr TimeNs kBnNativeHost = 14'050, kBnNativeGpu = 2'780;
constexpr double kMixedBroadcast = 1.5, kMixedFull = 1.25;  // a mixed-dtype binary op's time over its fp32 kernel's (card)

enum class Dt { F32, Low };

// Two tensor inputs: PyTorch's vectorized kernels carry their operands in a std::array of
// inputs + output pointers; its binary functors name themselves (AUnary/BUnary: one tensor and a
// scalar), and so does add/sub's (CUDAFunctor_add; CUDAFunctorOnSelf_add / OnOther_add: a scalar
// operand), which a broadcast (an attention mask added to the scores) runs without the array.
// (Nsight Systems spells the array std::array<char *, (unsigned long)3>.)
bool binary_elementwise(const std::string& n) {
  if (auto p = n.find("std::array<char"); p != std::string::npos) {
    auto c = n.find(',', p);
    if (c != std::string::npos) {
      auto d = n.find_first_of("0123456789", c);
      if (d != std::string::npos && d < c + 20 && (n[d] == '3' || n[d] == '4') &&
          (d + 1 >= n.size() || !std::isdigit(static_cast<unsigned char>(n[d + 1]))))
        return true;
    }
  }
  if (n.find("CUDAFunctor_add<") != std::string::npos) return true;
  return n.find("BinaryFunctor") != std::string::npos && n.find("UnaryFunctor") == std::string::npos;
}

// Math on autocast's fp32 list (pow, exp, log, rsqrt, reciprocal): a DTYPE input is cast up first.
bool fp32_list_math(const std::string& n) {
  for (const char* k : {"pow_tensor", "exp_kernel", "log_kernel", "rsqrt_kernel", "reciprocal_kernel"})
    if (n.find(k) != std::string::npos) return true;
  return false;
}

TimeNs scaled(TimeNs d, double f) { return static_cast<TimeNs>(std::llround(static_cast<double>(d) * f)); }

// Batch norm is on neither of autocast's lists: it runs in its input's dtype (cuDNN's fp32 kernels
// for fp32 input, PyTorch's batch_norm_*_kernel<BFloat16> for bf16), its output too.
bool batch_norm(const std::string& n) {
  return n.find("batch_norm") != std::string::npos || n.find("cudnn::bn_") != std::string::npos || n.find("BatchNorm") != std::string::npos;
}

// A convolution kernel's input elements: its op's shapes' bytes (fp32) less its weight and output.
double conv_input_elems(const KernelWork& w) { return std::max(0.0, w.bytes / 4 - w.weight_elems - w.out_elems); }

// cuBLAS's helpers around one GEMM call (split-K's beta scaling and reduction, cuBLASLt's bias
// epilogue): part of the GEMM before or after them, no op of their own.
bool gemm_helper(const std::string& n) {
  return n.find("scal_kernel") != std::string::npos || n.find("epilogue") != std::string::npos ||
         n.find("splitKreduce") != std::string::npos;
}

class Autocast : public TransformStep {
 public:
  Autocast(Dtype dtype, std::string sel, TimeNs host) : dtype_(dtype), sel_(std::move(sel)), host_(host) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    require_math(t, c.spec.gpu, dtype_, text);
    const std::vector<bool> hit = ctx.select(sel_, true);
    const LaneId main = forward_lane(t);
    const TimeNs host = (host_ >= 0 ? host_ : kCastHost) + (c.profiler_removed ? 0 : profiler_cost_per_cast(t));
    State s;
    c.gemm_dtype = dtype_;
    const ConvOps convs = conv_ops(t, ctx.work, c.durations);
    // A new iteration starts from the input (fp32) after the host waited for the GPU on the
    // forward's thread or a backward ran: the dtype walk starts over there.
    std::vector<TimeNs> restarts;
    for (const Op& o : t.ops)
      if (o.kind == OpKind::Api && ((o.lane == main && blocks_host(static_cast<ApiClass>(o.sub))) ||
                                    (o.lane != main && static_cast<ApiClass>(o.sub) == ApiClass::Launch)))
        restarts.push_back(o.start);
    std::sort(restarts.begin(), restarts.end());
    TimeNs last_launch = std::numeric_limits<TimeNs>::min();
    for (OpId i : forward_kernels(t, main)) {
      const TimeNs at = t.ops[t.ops[i].link].start;
      if (std::upper_bound(restarts.begin(), restarts.end(), last_launch) != std::lower_bound(restarts.begin(), restarts.end(), at))
        s.restart();
      last_launch = at;
      step(ctx, c, i, hit[i], host, s);
    }
    const std::size_t bw_casts = has_backward(t) ? backward(ctx, c, hit, main, host, s) : 0;
    const std::size_t conv_calls = conv_dispatch(t, convs, ctx.work, hit, main, c);
    scale_conv_helpers(convs, ctx.work, c);
    const std::size_t transposes = add_conv_layout_transposes(t, convs, ctx.work, hit, dtype_bytes(dtype_), c);
    c.log.push_back(
        text + " (the trace runs " + recipe_in_use(t, ctx.work) + "): " + std::to_string(s.gemms) + " GEMM/attention kernels in " +
        to_string(dtype_) + " on " + to_string(c.spec.gpu.best_unit(dtype_)) + ", " + std::to_string(s.casts) + " casts in the forward" +
        (bw_casts ? " and " + std::to_string(bw_casts) + " of gradients in the backward" : "") + " (" + format_duration(s.cast_gpu) +
        " on the GPU, " + format_duration(s.cast_host) + " on the host, " + format_duration(host) + " a cast" +
        (host_ >= 0           ? ", given"
         : c.profiler_removed ? ""
                              : ", the profiler's cost kept") +
        "); norms and softmax fp32, elementwise kernels by their operands' dtypes" +
        (transposes ? ", " + std::to_string(transposes) + " NCHW/NHWC layout transposes around cuDNN's convolutions" : "") +
        (conv_calls
             ? ", " + std::to_string(conv_calls) + " convolutions' autocast dispatch (" + format_duration(kConvAutocastHost) + " each)"
             : "") +
        (s.bn_native ? ", " + std::to_string(s.bn_native) + " batch norms on PyTorch's native path (" + format_duration(kBnNativeHost) +
                           " host, " + format_duration(kBnNativeGpu) + " GPU each)"
                     : "") +
        (s.gemms ? gemm_pair_note(c.spec.gpu, Dtype::FP32, dtype_) : std::string()) + "; " + format_duration(s.before) + " -> " +
        format_duration(s.after));
  }

 private:
  struct State {
    Dt cur = Dt::F32, last_act = Dt::F32;
    std::string_view conv_op;  // the last convolution op's name and output elements
    double conv_out = 0;
    bool f32_made = false;           // an op of the forward has output an fp32 tensor (a norm, softmax, fp32 math, a promoted add)
    std::vector<double> f32_inputs;  // elements of the fp32 tensors GEMMs read (distinct, at most 64)
    void restart() {
      cur = last_act = Dt::F32;
      prev_linear = f32_made = false;
      last_in = last_out = conv_out = 0;
      siblings = 0;
      conv_op = {};
      f32_inputs.clear();
    }
    bool prev_linear = false;          // the previous kernel (copies aside) was a linear GEMM
    double last_in = 0, last_out = 0;  // elements of the last linear GEMM's input and output (shapes; 0: unknown)
    int siblings = 0;                  // linear GEMMs since the last binary op or norm reading one input (q/k/v, gate/up)
    std::size_t gemms = 0, casts = 0, bn_native = 0;
    TimeNs before = 0, after = 0, cast_gpu = 0, cast_host = 0;
  };

  // Under autocast a forward convolution traced in fp32 is dispatched twice (autocast's wrapper
  // calls it again on the cast tensors) and runs cuDNN's 16-bit path: kConvAutocastHost more host,
  // in the call that launches its first math kernel. Returns the convolutions.
  static std::size_t conv_dispatch(const Trace& t, const ConvOps& ops, const WorkTable& work, const std::vector<bool>& hit, LaneId main,
                                   WhatIfCase& c) {
    std::size_t n = 0;
    for (const std::vector<OpId>& group : ops.kernels) {
      auto math = std::find_if(group.begin(), group.end(), [&](OpId k) { return is_compute_class(work[k].cls); });
      if (math == group.end() || !hit[*math]) continue;
      const Op& k = t.ops[*math];
      if (k.link == kNone || t.ops[k.link].lane != main || (work[*math].dtype != Dtype::FP32 && work[*math].dtype != Dtype::TF32)) continue;
      c.durations[k.link] += kConvAutocastHost;
      ++n;
    }
    return n;
  }

  // The profiler's cost of one cast's recorded events where it is kept: four ops (to, _to_copy,
  // empty_strided, copy_) and one CUDA call.
  static TimeNs profiler_cost_per_cast(const Trace& t) {
    const ProfilerSetting p = profiler_setting(t);
    return 4 * p.per_op + p.per_call;
  }

  // The profiler's cost of the events PyTorch's native batch norm records beyond cuDNN's: three
  // ops (empty_strided, copy_ and a reshape's view, less cuDNN's own op) and one call (the copy).
  static TimeNs bn_profiler_cost(const Trace& t) {
    const ProfilerSetting p = profiler_setting(t);
    return 3 * p.per_op + p.per_call;
  }

  // The kernels `main` launches, in launch order.
  static std::vector<OpId> forward_kernels(const Trace& t, LaneId main) {
    std::vector<OpId> v;
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      if (o.kind == OpKind::Kernel && !(o.flags & Op::kFlagNccl) && o.link != kNone && t.ops[o.link].lane == main) v.push_back(i);
    }
    std::stable_sort(v.begin(), v.end(), [&](OpId a, OpId b) { return t.ops[t.ops[a].link].start < t.ops[t.ops[b].link].start; });
    return v;
  }

  TimeNs cast_ns(const GpuSpec& g, double elems) const {
    if (elems <= 0) return 0;
    return static_cast<TimeNs>(
               std::llround(elems * (4 + dtype_bytes(dtype_)) / (g.memory_bandwidth * g.streaming_efficiency_for(16)) * 1e9)) +
           g.kernel_tail;
  }

  // A GEMM's casts (count and GPU time) for an activation of dtype `act`; `act_ns`: the part that
  // casts the activation (its weight's and bias's are the rest).
  std::pair<std::size_t, TimeNs> gemm_casts(const Trace& t, OpId i, const KernelWork& w, Dt act, const GpuSpec& g, TimeNs& act_ns) const {
    const bool attention = w.cls == KernelClass::Attention, batched = attention || w.batch > 1;
    double act_elems = 0, weight_elems = 0, bias_elems = 0;
    bool bias = true;
    if (w.from_shapes && w.out_rows > 0 && w.out_cols > 0 && w.flops > 0) {
      const double batch = std::max(1.0, w.batch), inner = w.flops / (2 * batch * w.out_rows * w.out_cols);
      act_elems = batch * w.out_rows * inner;
      weight_elems = w.rhs_elems > 0 ? w.rhs_elems : inner * w.out_cols;
      bias_elems = w.out_cols;
      bias = w.op.find("mm") == std::string::npos || w.op.find("addmm") != std::string::npos;  // aten::mm, bmm, matmul: none
    } else if (conv_op_kernel(w) && w.weight_elems > 0) {
      // A convolution's weight (its bias is an add of its own) and its input: the shapes' bytes
      // less the weight and the output.
      weight_elems = w.weight_elems;
      act_elems = conv_input_elems(w);
      bias = false;
    } else {
      act_elems = weight_elems = w.bytes / 12;  // a third of its fp32 bytes each (no shapes)
    }
    std::size_t n = 0;
    TimeNs d = 0;
    act_ns = 0;
    if (act == Dt::F32) {
      n += attention ? 3 : 1;
      act_ns = attention ? 3 * cast_ns(g, act_elems) : cast_ns(g, act_elems);
      d += act_ns;
    }
    if (!batched) {
      n += 1;
      d += cast_ns(g, weight_elems);
      if (bias) {
        n += 1;
        d += cast_ns(g, bias_elems);
      }
    }
    (void)t;
    (void)i;
    return {n, d};
  }

  void step(const WhatIfContext& ctx, WhatIfCase& c, OpId i, bool hit, TimeNs host, State& s) const {
    const Trace& t = ctx.trace;
    const Op& o = t.ops[i];
    const KernelWork& w = ctx.work[i];
    const GpuSpec& g = c.spec.gpu;
    const std::string& name = t.name(o);
    const bool fp32 = w.dtype == Dtype::FP32 || w.dtype == Dtype::TF32;
    const TimeNs d = c.durations[i];
    TimeNs nd = d;
    std::size_t n_cast = 0;
    TimeNs cast = 0, act_cast = 0;  // all of its casts' GPU time; the activation's
    if (gemm_helper(name)) return;
    const bool conv = conv_op_kernel(w);
    if (conv && !is_compute_class(w.cls)) return;  // part of its convolution's algorithm (scale_conv_helpers)
    // A convolution's second math kernel (cuDNN's FFT algorithm: a complex GEMM) reads no new input.
    const bool same_conv = conv && s.conv_op == w.op && s.conv_out == w.out_elems && s.prev_linear;
    if (conv) s.conv_op = w.op, s.conv_out = w.out_elems;
    if (is_compute_class(w.cls)) {
      const bool linear = w.cls != KernelClass::Attention && w.batch <= 1;
      // A linear GEMM reading what the previous one read (gate and up projections, an activation
      // between them) is its sibling: it reads that activation, and their outputs are both DTYPE.
      const double in = linear && w.from_shapes && w.out_rows > 0 ? w.out_rows * gemm_inner(w) : 0;
      const bool sibling = in > 0 && s.last_in == in && s.last_out != in;
      const Dt act = linear && (s.prev_linear || sibling) ? s.last_act : s.cur;
      if (fp32 && hit) {
        KernelWork w2 = w;
        w2.dtype = dtype_;
        w2.unit = g.best_unit(dtype_);
        w2.bytes = w.bytes * dtype_bytes(dtype_) / 4;
        const auto [o_t, n_t] = model_kernel_pair(t, i, w, w2, c.spec);
        const double old_t = static_cast<double>(o_t), new_t = static_cast<double>(n_t);
        nd = old_t > 0 ? scaled(d, new_t / old_t) : d;
        if (!same_conv) std::tie(n_cast, cast) = gemm_casts(t, i, w, act, g, act_cast);
        if (act == Dt::F32 && s.f32_inputs.size() < 64) {  // an fp32 tensor a GEMM read (its elements)
          const double elems = in > 0 ? in : conv && w.weight_elems > 0 ? conv_input_elems(w) : 0;
          if (elems > 0 && std::find(s.f32_inputs.begin(), s.f32_inputs.end(), elems) == s.f32_inputs.end()) s.f32_inputs.push_back(elems);
        }
        ++s.gemms;
      }
      s.siblings = linear && (sibling || s.prev_linear) ? s.siblings + 1 : 1;
      s.last_in = in;
      s.last_out = linear ? w.out_elems : 0;
      s.last_act = act;
      s.prev_linear = linear;
      s.cur = Dt::Low;
    } else if (w.cls == KernelClass::Norm && batch_norm(name)) {
      if (s.cur == Dt::Low && hit) nd = streaming_at(name, d, 4, dtype_bytes(dtype_), g);
      if (s.cur == Dt::Low && hit && name.find("bn_fw_inf") != std::string::npos) {  // cuDNN's eval-mode kernel -> PyTorch's
        nd += kBnNativeGpu;
        if (o.link != kNone) c.durations[o.link] += kBnNativeHost + (c.profiler_removed ? 0 : bn_profiler_cost(t));
        ++s.bn_native;
      }
      s.prev_linear = false;
      s.siblings = 0;
      s.last_in = s.last_out = 0;
    } else if (w.cls == KernelClass::Norm || w.cls == KernelClass::Softmax || w.cls == KernelClass::Reduction ||
               (w.cls == KernelClass::Elementwise && fp32_list_math(name))) {
      if (s.cur == Dt::Low && hit) {
        n_cast = 1;
        act_cast = cast = cast_ns(g, w.bytes / 8);  // its input up (it reads and writes fp32)
      }
      s.cur = Dt::F32;
      s.f32_made = true;
      s.prev_linear = false;
      s.siblings = 0;
      s.last_in = s.last_out = 0;
    } else if (w.cls == KernelClass::Elementwise && binary_elementwise(name)) {
      // Both operands DTYPE (the product of sibling GEMMs' outputs: SwiGLU's gate x up): DTYPE's
      // bytes. One DTYPE operand and an fp32 one (a residual, a mask, rotary tables): promoted to
      // fp32 on PyTorch's casting path, slower than the fp32 kernel (kMixed*).
      const bool broadcast = w.from_shapes && w.flops > 0 && w.bytes < 2.9 * 4 * w.flops;
      // (Or the halves of one GEMM's output: Phi-3's fused gate/up projection, chunked.)
      const bool halves = s.last_out > 0 && w.flops > 0 && s.last_out >= 1.9 * w.flops;
      // (Or any two full-size activations after a DTYPE one where neither is the size of an fp32
      // tensor a GEMM read: a convolutional network, whose batch norms keep DTYPE, adds DTYPE
      // residuals; BLOOM's GELU multiplies its bf16 input by itself and by its tanh; a residual add
      // of the hidden states a GEMM read in fp32, or an MLP adding its own fp32 input, promotes.)
      const bool reads_input = w.from_shapes && std::find(s.f32_inputs.begin(), s.f32_inputs.end(), w.flops) != s.f32_inputs.end();
      if (s.cur == Dt::Low && (s.siblings >= 2 || halves) && w.from_shapes && !broadcast) {
        if (hit) nd = scaled(d, dtype_bytes(dtype_) / 4.0);
      } else if (s.cur == Dt::Low && !broadcast && !reads_input && (!s.f32_made || w.from_shapes)) {
        if (hit) nd = streaming_at(name, d, 4, dtype_bytes(dtype_), g);
      } else {
        if (s.cur == Dt::Low && hit && w.from_shapes) nd = scaled(d, broadcast ? kMixedBroadcast : kMixedFull);
        s.cur = Dt::F32;
        s.f32_made = true;
      }
      s.prev_linear = false;
      s.siblings = 0;
      s.last_in = s.last_out = 0;
    } else if (w.cls == KernelClass::Elementwise && s.cur == Dt::Low && !s.f32_made) {
      // One DTYPE tensor in, DTYPE out (ReLU, GELU, SiLU, a scaling): DTYPE's bytes.
      if (hit && w.from_shapes) nd = streaming_at(name, d, 4, dtype_bytes(dtype_), g);
      s.prev_linear = false;
    } else if (w.cls != KernelClass::Copy) {
      s.prev_linear = false;
    }
    nd += cast;
    if (act_cast > 0) c.input_casts.emplace_back(i, act_cast);
    if (n_cast > 0) {
      const TimeNs h = host * static_cast<TimeNs>(n_cast);
      c.durations[o.link] += h;  // the casts' host time, in the call that launches the op they feed
      s.cast_host += h;
      s.cast_gpu += cast;
      s.casts += n_cast;
    }
    s.before += d;
    s.after += nd;
    c.durations[i] = nd;
  }

  // A training step: the backward's GEMMs run in DTYPE on the saved casts (the forward's rule),
  // and each cast input's gradient is cast back to fp32: as many casts as the forward's, their host
  // and GPU time spread over the backward's GEMM launches. Returns those casts.
  std::size_t backward(const WhatIfContext& ctx, WhatIfCase& c, const std::vector<bool>& hit, LaneId main, TimeNs host, State& s) const {
    const Trace& t = ctx.trace;
    std::vector<OpId> bw;
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      if (hit[i] && o.kind == OpKind::Kernel && !(o.flags & Op::kFlagNccl) && o.link != kNone && t.ops[o.link].lane != main &&
          is_compute_class(ctx.work[i].cls))
        bw.push_back(i);
    }
    if (bw.empty()) return 0;
    const GpuSpec& g = c.spec.gpu;
    const double share = static_cast<double>(s.casts) / static_cast<double>(bw.size());
    const TimeNs gpu_share = static_cast<TimeNs>(std::llround(static_cast<double>(s.cast_gpu) / static_cast<double>(bw.size())));
    for (OpId i : bw) {
      const KernelWork& w = ctx.work[i];
      const TimeNs d = c.durations[i];
      TimeNs nd = d;
      if (w.dtype == Dtype::FP32 || w.dtype == Dtype::TF32) {
        KernelWork w2 = w;
        w2.dtype = dtype_;
        w2.unit = g.best_unit(dtype_);
        w2.bytes = w.bytes * dtype_bytes(dtype_) / 4;
        const auto [o_t, n_t] = model_kernel_pair(t, i, w, w2, c.spec);
        const double old_t = static_cast<double>(o_t), new_t = static_cast<double>(n_t);
        nd = old_t > 0 ? scaled(d, new_t / old_t) : d;
        ++s.gemms;
      }
      nd += gpu_share;
      const TimeNs h = static_cast<TimeNs>(std::llround(share * static_cast<double>(host)));
      c.durations[t.ops[i].link] += h;
      s.cast_host += h;
      s.cast_gpu += gpu_share;
      s.before += d;
      s.after += nd;
      c.durations[i] = nd;
    }
    return s.casts;
  }

  Dtype dtype_;
  std::string sel_;
  TimeNs host_;
};

}  // namespace

std::unique_ptr<TransformStep> make_autocast_step(Dtype dtype, std::string sel, TimeNs host) {
  return std::make_unique<Autocast>(dtype, std::move(sel), host);
}

}  // namespace bneck
