// --remove SEL: the selected ops disappear: each becomes a zero-time pass-through node (the ops
// around it keep their order through it) and leaves the spans, overlap and paths.
#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

class Remove : public TransformStep {
 public:
  explicit Remove(std::string sel) : sel_(std::move(sel)) {}
  bool needs_gpu_rates() const override { return false; }
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    auto hit = ctx.select(sel_, false);
    const TimeNs before = remove_ops(c, hit, text);
    c.log.push_back(text + ": " + std::to_string(count_selected(hit)) + " ops removed (" + format_duration(before) + ")");
  }

 private:
  std::string sel_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  std::string sel = checked_selector(arg);
  if (sel.empty()) throw InputError("--remove needs a selector");
  return std::make_unique<Remove>(sel);
}

}  // namespace

TimeNs remove_ops(WhatIfCase& c, const std::vector<bool>& hit, const std::string& transform) {
  TimeNs before = 0;
  GraphEditor ed(c.edit_graph(), transform);
  for (OpId i = 0; i < hit.size(); ++i)
    if (hit[i]) {
      before += c.durations[i];
      c.durations[i] = 0;
      ed.remove(i);
    }
  return before;
}

extern const TransformDef kRemoveTransform{"remove", "SEL", TransformDef::Arg::Required,
                                           "selected ops are removed (their dependencies still order the rest)", parse};

}  // namespace bneck
