// --batch K. Model card: a K times larger batch per step (weak batch scaling on one GPU). Every
//   kernel does K times its work: its time x model(K work) / model(work), its grid K times larger
//   (more waves; a small grid fills more SMs), a GEMM of known shape K times its rows (or its
//   batch count: a batched GEMM), so that the measured GEMM surface prices the larger shape; a
//   kernel that took over 1.25x the model's time keeps that excess fixed (small kernels at batch 1
//   are mostly launch latency and a library's split-K helpers: scaling it with the work made
//   BERT-base at batch 64 2.5x too slow; validate/reference/h200/batch, docs/whatif.md). Copies
//   move K times their bytes (time x K); the host launches the same calls (the work per call
//   grows, its host time does not). The step then carries K times the samples: throughput is K x
//   the step's speedup. Not modelled: memory (the activations grow K times; a batch that does not
//   fit is not detected), kernels whose choice changes with the batch (the library's tile
//   selection follows the model's efficiency only).
#include <cmath>

#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

class Batch : public TransformStep {
 public:
  explicit Batch(double k) : k_(k) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    TimeNs before = 0, after = 0;
    std::size_t kernels = 0, copies = 0;
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      if (!is_device_op(o.kind) || (o.flags & Op::kFlagNccl)) continue;
      const TimeNs d = c.durations[i];
      TimeNs nd = d;
      if (o.kind == OpKind::Kernel) {
        nd = retime_by_work(t, i, ctx.work[i], d, c.spec, k_, k_, k_, k_, true);
        ++kernels;
      } else {
        nd = static_cast<TimeNs>(std::llround(static_cast<double>(d) * k_));
        ++copies;
      }
      before += d;
      after += nd;
      c.durations[i] = nd;
    }
    c.log.push_back(text + ": " + std::to_string(kernels) + " kernels with " + fmt_num("%g", k_) + "x their work, " +
                    std::to_string(copies) + " copies with " + fmt_num("%g", k_) + "x their bytes (" + format_duration(before) + " -> " +
                    format_duration(after) + "); each step carries " + fmt_num("%g", k_) +
                    "x the samples; host calls as traced; activation memory grows " + fmt_num("%g", k_) + "x (not checked)");
  }

 private:
  double k_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  double k = 0;
  try {
    std::size_t pos = 0;
    k = std::stod(arg, &pos);
    if (pos != arg.size() || !(k > 0) || k > 4096 || !std::isfinite(k)) throw std::invalid_argument("k");
  } catch (const std::exception&) { throw InputError("--batch " + arg + ": expected the batch's factor, a number in (0, 4096]"); }
  return std::make_unique<Batch>(k);
}

}  // namespace

extern const TransformDef kBatchTransform{
    "batch", "K", TransformDef::Arg::Required,
    "a K times larger batch per step: every kernel and copy does K times its work, the host's calls stay", parse};

}  // namespace bneck
