// --grad-compress bf16|fp16. Model card: gradient all-reduces in 16 bits (DDP's
//   bf16_compress_hook / fp16_compress_hook): each fp32 gradient bucket is cast to the 16-bit type,
//   all-reduced at half the bytes, and cast back (and divided by the world size) into the fp32
//   bucket. Each fp32 all-reduce of the trace (its NCCL kernels named `_f32`) takes the collective
//   model's time for half its bytes over that for its bytes, plus the two casts on its path
//   (elements x (4 + 2) bytes each way at the streaming rate, plus the kernel tail each); a data-
//   parallel forecast after it (`--grad-compress bf16 --data-parallel 2`) synthesizes its fp32
//   bucket all-reduces (dtype Float) the same way. Buckets already in 16 bits keep their time.
//   Trade-off: gradients summed in 16 bits (bf16: 8 mantissa bits); not checked on measurements
//   (the interval is the widest family's, said so).
#include <cmath>

#include "models/collective.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {

TimeNs grad_compress_casts(const GpuSpec& g, Bytes fp32_bytes) {
  const double elems = static_cast<double>(fp32_bytes) / 4;
  const double moved = 2 * elems * (4 + 2);  // down before, up after: read one, write the other
  return static_cast<TimeNs>(std::llround(moved / (g.memory_bandwidth * g.streaming_efficiency_for(16)) * 1e9)) + 2 * g.kernel_tail;
}

namespace {

class GradCompress : public TransformStep {
 public:
  explicit GradCompress(std::string dtype) : dtype_(std::move(dtype)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    c.grad_compress = true;
    std::size_t n = 0, kept = 0;
    TimeNs before = 0, after = 0;
    for (const Collective& col : t.collectives) {
      if (col.kind != CollKind::AllReduce || col.members.empty() || col.bytes <= 0) continue;
      if (t.name(t.ops[col.members[0]]).find("_f32") == std::string::npos) {
        ++kept;
        continue;
      }
      const TimeNs full = collective_time(c.spec, col.kind, col.bytes, col.ranks()).time_ns,
                   half = collective_time(c.spec, col.kind, col.bytes / 2, col.ranks()).time_ns;
      const double ratio = full > 0 ? static_cast<double>(half) / static_cast<double>(full) : 1;
      const TimeNs casts = grad_compress_casts(c.spec.gpu, col.bytes);
      for (OpId m : col.members) {
        before += c.durations[m];
        c.durations[m] = static_cast<TimeNs>(std::llround(static_cast<double>(c.durations[m]) * ratio)) + casts;
        after += c.durations[m];
      }
      ++n;
    }
    c.log.push_back(text + ": " + std::to_string(n) + " fp32 all-reduces in " + dtype_ + ", half the bytes, cast down and up (" +
                    format_duration(before) + " -> " + format_duration(after) + ")" +
                    (kept ? "; " + std::to_string(kept) + " others kept" : "") + "; a later --data-parallel compresses its buckets");
  }

 private:
  std::string dtype_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  if (arg != "bf16" && arg != "fp16") throw InputError("--grad-compress " + arg + ": expected bf16 or fp16");
  return std::make_unique<GradCompress>(arg);
}

}  // namespace

extern const TransformDef kGradCompressTransform{
    "grad-compress", "bf16|fp16", TransformDef::Arg::Required,
    "fp32 gradient all-reduces in 16 bits (DDP's compression hook): half the bytes, a cast down and up around each", parse};

}  // namespace bneck
