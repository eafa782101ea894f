// --scale FACTOR:SEL: the selected ops take 1/FACTOR of their time (the first --scale also gives
// the report its Amdahl comparison).
#include <cmath>

#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

class Scale : public TransformStep {
 public:
  Scale(double factor, std::string sel) : factor_(factor), sel_(std::move(sel)) {}
  bool needs_gpu_rates() const override { return false; }
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    auto hit = ctx.select(sel_, false);
    TimeNs before = 0, after = 0;
    for (OpId i = 0; i < hit.size(); ++i) {
      if (!hit[i]) continue;
      before += c.durations[i];
      c.durations[i] = static_cast<TimeNs>(std::llround(static_cast<double>(c.durations[i]) / factor_));
      after += c.durations[i];
    }
    if (c.scale_factor == 0) {
      c.scale_factor = factor_;
      c.scaled = hit;
    }
    c.log.push_back(text + ": " + std::to_string(count_selected(hit)) + " ops, " + format_duration(before) + " -> " +
                    format_duration(after));
  }

 private:
  double factor_;
  std::string sel_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  auto c = arg.find(':');
  if (c == std::string::npos) throw InputError("--scale " + arg + ": expected FACTOR:SELECTOR, e.g. 2:name~gemm");
  double factor = 0;
  try {
    std::size_t pos = 0;
    factor = std::stod(arg.substr(0, c), &pos);
    if (pos != c || !(factor > 0) || !std::isfinite(factor)) throw std::invalid_argument("factor");
  } catch (const std::exception&) { throw InputError("--scale " + arg + ": the factor must be a positive number"); }
  std::string sel = checked_selector(arg.substr(c + 1));
  if (sel.empty()) throw InputError("--scale " + arg + ": needs a selector after ':'");
  return std::make_unique<Scale>(factor, sel);
}

}  // namespace

extern const TransformDef kScaleTransform{"scale", "FACTOR:SEL", TransformDef::Arg::Required,
                                          "selected ops take 1/FACTOR of their time (compared with Amdahl's law)", parse};

}  // namespace bneck
