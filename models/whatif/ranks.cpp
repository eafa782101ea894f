// --ranks N. Model card: data-parallel scaling. The same per-rank work on N ranks (weak scaling,
//   as DDP with a fixed per-GPU batch): every collective's part after its last member arrived is
//   scaled by the collective model's time for N ranks over its time for the group it had (same
//   kind and message size, on the case's current GPU spec: node links within a node, the NIC
//   beyond). Stragglers and arrival skew stay as traced.
#include <algorithm>
#include <cmath>
#include <optional>

#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"
#include "models/collective.hpp"

namespace bneck {
namespace {

class Ranks : public TransformStep {
 public:
  explicit Ranks(std::uint32_t ranks) : ranks_(ranks) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    c.layout_ranks = ranks_;
    RetimedCollectives r = retime_collectives(ctx.trace, c, ranks_);
    c.log.push_back(text + ": " + std::to_string(ctx.trace.collectives.size()) + " collectives (" + std::to_string(r.kernels) +
                    " kernels) re-timed for " + std::to_string(ranks_) + " ranks on " + c.spec.name + ": communication " +
                    format_duration(r.before) + " -> " + format_duration(r.after));
  }

 private:
  std::uint32_t ranks_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  try {
    std::size_t pos = 0;
    long v = std::stol(arg, &pos);
    if (pos != arg.size() || v < 1 || v > 1'000'000) throw std::invalid_argument(arg);
    return std::make_unique<Ranks>(static_cast<std::uint32_t>(v));
  } catch (const std::exception&) { throw InputError("--ranks " + arg + ": expected a number of ranks (1 .. 1000000)"); }
}

}  // namespace

RetimedCollectives retime_collectives(const Trace& t, WhatIfCase& c, std::uint32_t ranks) {
  RetimedCollectives r;
  for (const Collective& col : t.collectives) {
    TimeNs a = collective_time(c.spec, col.kind, col.bytes, col.ranks()).time_ns,
           b = collective_time(c.spec, col.kind, col.bytes, ranks).time_ns;
    double ratio = a > 0 ? static_cast<double>(b) / static_cast<double>(a) : 1.0;
    for (OpId m : col.members) {
      r.before += c.durations[m];
      c.durations[m] = static_cast<TimeNs>(std::llround(static_cast<double>(c.durations[m]) * ratio));
      r.after += c.durations[m];
      ++r.kernels;
    }
  }
  return r;
}

extern const TransformDef kRanksTransform{"ranks", "N", TransformDef::Arg::Required,
                                          "the trace's collectives re-timed for N ranks by the collective model", parse};

}  // namespace bneck
