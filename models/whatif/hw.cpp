// --hw SPEC: retarget to other hardware (models/retarget.hpp: each device op's time x model(target)
// / model(source), collectives by the collective model); later transforms use the target spec.
#include <algorithm>
#include <cmath>
#include <optional>

#include "models/whatif/fp8.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "models/retarget.hpp"
#include "models/sharing.hpp"

#include <nlohmann/json.hpp>

namespace bneck {
namespace {

// A spec given inline as a JSON object (what `sweep --vary` derives) or by preset name or path.
HwSpec load_spec(const std::string& spec) {
  if (!spec.empty() && spec.front() == '{') {
    nlohmann::json j = nlohmann::json::parse(spec, nullptr, false);
    if (!j.is_object()) throw InputError("--hw " + spec.substr(0, 60) + ": not a JSON object");
    return load_hw_json(j, j.value("name", std::string("inline spec")));
  }
  return load_target_hw(spec);
}

// What the trace says of its memory: the forward's GEMM weights (their second operands in the
// first top-level range), and in a training trace (a backward thread) their gradients and, where an
// optimizer's multi_tensor_apply kernels ran, Adam's two states per parameter (in the parameters'
// precision, as torch.optim keeps them). A lower bound
// (activations, workspaces and the allocator's cache are not in a trace without profile_memory),
// set against the target's memory.
std::string memory_check(const WhatIfContext& ctx, const HwSpec& target) {
  const Trace& t = ctx.trace;
  const LaneId main = forward_lane(t);
  const bool training = has_backward(t);
  bool optimizer = false;
  for (const Op& o : t.ops)
    optimizer = optimizer || (o.kind == OpKind::Kernel && t.name(o).find("multi_tensor_apply") != std::string::npos);
  const double weights = step_gemm_weights(ctx, [&](OpId o) {
    const bool fwd = t.ops[o].link != kNone && t.ops[o].link < t.ops.size() && t.ops[t.ops[o].link].lane == main;
    return fwd;
  });
  if (weights <= 0 || target.gpu.memory_bytes == 0) return "";
  const double states = training ? weights * (optimizer ? 3 : 1) : 0;
  const double need = weights + states;
  const auto cap = static_cast<double>(target.gpu.memory_bytes);
  auto gib = [](double b) { return fmt_num("%.1f GiB", b / static_cast<double>(1ull << 30)); };
  std::string line = "memory: at least " + gib(need) + " (weights " + gib(weights);
  if (training) line += std::string(", gradients") + (optimizer ? " and Adam's two states " : " ") + gib(states);
  line += "; activations not in the trace) of " + gib(cap) + ": ";
  if (need > cap) return line + "does not fit: the run as traced cannot run on " + target.name;
  return line + "leaves " + gib(cap - need) + " for activations and workspaces";
}

class Hw : public TransformStep {
 public:
  explicit Hw(std::string spec) : spec_(std::move(spec)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    HwSpec target = load_spec(spec_);
    // The trace's kernel work depends on the GPU it is read against: the engine's, unless an
    // earlier --hw changed it.
    // (The engine's work is borrowed, not copied: the model lives within this step.)
    RetargetCostModel m = c.spec.name == ctx.source.name && ctx.work.size() == ctx.trace.ops.size()
                              ? RetargetCostModel(ctx.trace, c.spec, target, DurationMode::Hybrid,
                                                  std::shared_ptr<const WorkTable>(std::shared_ptr<void>(), &ctx.work))
                              : RetargetCostModel(ctx.trace, c.spec, target, DurationMode::Hybrid);
    TimeNs before = 0, after = 0;
    for (OpId i = 0; i < ctx.trace.ops.size(); ++i) {
      const Op& o = ctx.trace.ops[i];
      if (!is_device_op(o.kind) || o.duration() == 0) continue;
      double ratio = static_cast<double>(m.device_time(i)) / static_cast<double>(o.duration());
      before += c.durations[i];
      c.durations[i] = static_cast<TimeNs>(std::llround(static_cast<double>(c.durations[i]) * ratio));
      after += c.durations[i];
    }
    c.log.push_back(text + ": " + c.spec.name + " -> " + target.name + ", device time " + format_duration(before) + " -> " +
                    format_duration(after));
    for (const auto& a : m.assumptions()) c.log.push_back(text + ": assumed: " + a);
    if (std::string mem = memory_check(ctx, target); !mem.empty()) c.log.push_back(text + ": " + mem);
    if (c.graph->sharing) c.edit_graph().sharing = std::make_shared<GpuShareModel>(ctx.trace, target);
    c.spec = std::move(target);
  }

 private:
  std::string spec_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  (void)load_spec(arg);  // fails early with the preset list
  return std::make_unique<Hw>(arg);
}

}  // namespace

extern const TransformDef kHwTransform{"hw", "SPEC", TransformDef::Arg::Required,
                                       "retarget to a preset or spec file (later transforms use it)", parse};

}  // namespace bneck
