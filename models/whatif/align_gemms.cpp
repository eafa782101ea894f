// --align-gemms[=SEL]. Model card: GEMM dimensions padded to a multiple of 64 elements (a vocabulary
//   of 50257 padded to 50304, as Megatron's make-vocab-size-divisible-by does). Each selected GEMM
//   kernel of known shape (from the trace's shapes) whose inner or output dimension is not a
//   multiple of 16 bytes of elements is priced at its padded shape: its measured time x the
//   model's time for the padded shape (the GPU's measured surface of aligned GEMMs) over the model's
//   time for its own (the measured surface of unaligned ones, gpu.gemm_samples_unaligned). A GPU
//   without unaligned measurements cannot price it: said, nothing changed. The padding's extra
//   output (logits of the padded vocabulary) is computed and not used; nothing else changes. After a
//   --precision, the GEMMs are priced in the precision it gave them.
#include <cmath>

#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {
namespace {

class AlignGemms : public TransformStep {
 public:
  explicit AlignGemms(std::string sel) : sel_(std::move(sel)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    const std::vector<bool> hit = ctx.select(sel_, true);
    std::size_t n = 0, unpriced = 0;
    TimeNs before = 0, after = 0;
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      if (!hit[i] || o.kind != OpKind::Kernel) continue;
      KernelWork w = ctx.work[i];
      if (gemm_inner(w) <= 0) continue;
      if (c.gemm_dtype && *c.gemm_dtype != w.dtype) {  // after a --precision: its GEMMs' precision
        w.bytes *= dtype_bytes(*c.gemm_dtype) / std::max(1.0, dtype_bytes(w.dtype));
        w.dtype = *c.gemm_dtype;
        w.unit = c.spec.gpu.best_unit(w.dtype);
      }
      if (!gemm_unaligned(w)) continue;
      const double batch = std::max(1.0, w.batch);
      const long long k = std::llround(gemm_inner(w)), cols = std::llround(w.out_cols);
      if (!c.spec.gpu.gemm_samples_unaligned.count(w.dtype)) {
        ++unpriced;
        continue;
      }
      KernelWork p = w;
      const double k2 = static_cast<double>((k + 63) / 64 * 64), cols2 = static_cast<double>((cols + 63) / 64 * 64);
      p.out_cols = cols2;
      p.flops = 2 * batch * w.out_rows * k2 * cols2;
      p.bytes = w.bytes * (k2 * cols2) / std::max(1.0, static_cast<double>(k) * static_cast<double>(cols));
      const double old_t = static_cast<double>(model_kernel(t, i, w, c.spec).time_ns);
      const double new_t = static_cast<double>(model_kernel(t, i, p, c.spec).time_ns);
      if (old_t <= 0) continue;
      const TimeNs d = c.durations[i];
      const TimeNs nd = static_cast<TimeNs>(std::llround(static_cast<double>(d) * new_t / old_t));
      before += d;
      after += nd;
      c.durations[i] = nd;
      ++n;
    }
    if (n == 0)
      throw InputError(text + ": " +
                       (unpriced ? std::to_string(unpriced) + " GEMMs off a multiple of 16 bytes, but " + c.spec.name +
                                       " has no measurements of unaligned GEMMs to price them (gpu.gemm_samples_unaligned)"
                                 : std::string("no GEMM of known shape whose inner or output dimension is off a multiple of 16 bytes")));
    c.log.push_back(text + ": " + std::to_string(n) + " GEMMs padded to multiples of 64 elements, " + format_duration(before) + " -> " +
                    format_duration(after) + " (the measured surfaces of aligned and unaligned GEMMs)" +
                    (unpriced ? "; " + std::to_string(unpriced) + " of a precision without unaligned measurements kept" : std::string()));
  }

 private:
  std::string sel_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) { return std::make_unique<AlignGemms>(checked_selector(arg)); }

}  // namespace

extern const TransformDef kAlignGemmsTransform{
    "align-gemms", "SEL", TransformDef::Arg::Optional,
    "GEMMs whose inner or output dimension is off a multiple of 16 bytes (a vocabulary of 50257) padded to multiples of 64 elements",
    parse};

}  // namespace bneck
