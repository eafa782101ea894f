// Diffusion what-ifs (latency = K x T_denoiser + T_fixed): the denoiser steps are the NVTX ranges
// `--step-range` matches (given once, before or after the transforms), grouped by the range that
// encloses them (a generation's denoising loop).
// --steps K: K steps per loop instead of the trace's K0: a middle step's work (its host calls on its
//   thread and the device ops they launched) is cloned K - K0 times with its launches, stream
//   order and synchronizations (GraphEditor::repeat), or K0 - K steps after the first are removed.
// --cfg off|on: classifier-free guidance runs the denoiser on the conditional and unconditional
//   halves of one batch; off re-times every kernel of the steps at half its work (measured x
//   model(work / 2) / model(work), the cost models on shapes or launch geometry) and removes the
//   guidance arithmetic (`--guidance SEL`, default the ops in ranges named guidance/cfg); on
//   doubles the work (the arithmetic is not synthesized).
// --resolution F / --frames F: the latent tokens scale by F^2 / F. In the steps self-attention
//   kernels take F^4 / F^2 the FLOPs (quadratic in tokens; cross-attention to a fixed text, whose
//   keys are fewer than half the longest attention's, linear) and everything else (GEMMs,
//   convolutions, elementwise) scales linearly in tokens; the decoder's ranges (`--decoder REGEX`,
//   default vae|decode) scale linearly in pixels; the text encoder does not change.
#include <algorithm>
#include <cmath>
#include <map>

#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

const char* const kStepCompanion =
    "step-range=REGEX: the denoiser steps' ranges (default: the structure's loop, @iteration or @layer; may come before the transforms)";

// The step ranges in time order, grouped by their enclosing range. Without a regex, the steps are
// the structure's denoising loop (default_loop_ranges: bneck structure).
std::vector<std::vector<std::size_t>> step_groups(const Trace& t, const RangeIndex& idx, const std::string& given,
                                                  const std::string& text) {
  std::string regex = given;
  if (regex.empty()) {
    regex = default_loop_ranges(t).second;
    if (regex.empty())
      throw InputError(text + ": needs --step-range REGEX (the denoiser steps' ranges): " + t.source + " shows no repeating loop");
  }
  std::vector<std::size_t> steps = idx.match(range_regex(regex));
  if (steps.empty()) throw InputError(text + ": --step-range '" + regex + "' matches no NVTX range of " + t.source);

  std::map<std::uint32_t, std::vector<std::size_t>> by_parent;
  for (std::size_t r : steps) by_parent[t.ranges[r].parent].push_back(r);
  std::vector<std::vector<std::size_t>> out;
  for (auto& [p, v] : by_parent) out.push_back(std::move(v));
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return t.ranges[a[0]].start < t.ranges[b[0]].start; });
  return out;
}

// Says which ranges the steps are when the structure chose them.
void note_default_steps(const Trace& t, const std::string& given, const std::string& text, WhatIfCase& c) {
  if (given.empty())
    c.log.push_back(text + ": the denoiser steps are the structure's " + default_loop_ranges(t).second +
                    " (no --step-range; bneck structure)");
}

// The --step-range given, or "" for the structure's loop (resolved on the trace).
std::string step_range(const CompanionArgs& a) {
  const std::string* s = a.find("step-range");
  if (!s) return "";
  (void)range_regex(*s);
  return *s;
}

class Steps : public TransformStep {
 public:
  Steps(std::uint32_t k, std::string steps) : k_(k), steps_(std::move(steps)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    RangeIndex idx(t);
    GraphEditor ed(c.edit_graph(), text);
    std::size_t loops = 0, k0_total = 0, nodes = 0;
    if (c.scaled.size() != t.ops.size()) c.scaled.assign(t.ops.size(), false);
    note_default_steps(t, steps_, text, c);
    for (const auto& g : step_groups(t, idx, steps_, text)) {
      ++loops;
      for (std::size_t r : g)  // Amdahl: the steps' share of the busy time scales by K / K0
        for (OpId i : idx.device_ops(r)) c.scaled[i] = true;
      const std::uint32_t k0 = static_cast<std::uint32_t>(g.size());
      k0_total += k0;
      if (k_ > k0) {
        std::vector<OpId> set;
        idx.work(g[k0 / 2], set);
        ed.repeat(set, k_ - k0);
        nodes += set.size() * (k_ - k0);
      } else if (k_ < k0) {
        // Keep the first step (and the last while any other remains), drop from the second on.
        const std::uint32_t drop = k0 - k_;
        std::vector<OpId> set;
        for (std::uint32_t j = 0; j < drop; ++j) {
          const std::size_t pos = k_ == 0 ? j : 1 + j;
          idx.work(g[std::min<std::size_t>(pos, k0 - 1)], set);
          for (OpId n : set) ed.remove_with_gaps(n);
        }
      }
    }
    ed.commit();
    if (c.scale_factor == 0 && k0_total > 0)
      c.scale_factor = static_cast<double>(k0_total) / (static_cast<double>(k_) * static_cast<double>(loops));
    c.log.push_back(text + ": " + std::to_string(loops) + " denoising loop(s) of " + std::to_string(loops ? k0_total / loops : 0) +
                    " steps run " + std::to_string(k_) +
                    (k_ * loops > k0_total ? " (" + std::to_string(nodes) + " synthetic nodes cloned from a middle step)"
                                           : " (steps removed after the first)"));
  }

 private:
  std::uint32_t k_;
  std::string steps_;
};

// Re-times the device ops of the step ranges (and of the decoder ranges) by a work factor per op.
template <typename Factor>
std::pair<TimeNs, TimeNs> retime_ops(const WhatIfContext& ctx, WhatIfCase& c, const std::vector<OpId>& ops, std::vector<bool>& done,
                                     Factor f) {
  TimeNs before = 0, after = 0;
  for (OpId i : ops) {
    if (done[i] || ctx.trace.ops[i].kind == OpKind::Api) continue;
    done[i] = true;
    auto [flops, bytes, grid] = f(i);
    const TimeNs d = c.durations[i];
    const TimeNs nd = ctx.trace.ops[i].kind == OpKind::Kernel ? retime_by_work(ctx.trace, i, ctx.work[i], d, c.spec, flops, bytes, grid)
                                                              : static_cast<TimeNs>(std::llround(static_cast<double>(d) * bytes));
    before += d;
    after += nd;
    c.durations[i] = nd;
    c.scaled[i] = true;
  }
  return {before, after};
}

class Cfg : public TransformStep {
 public:
  Cfg(bool on, std::string steps, std::string guidance) : on_(on), steps_(std::move(steps)), guidance_(std::move(guidance)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    RangeIndex idx(t);
    std::vector<bool> guidance = ctx.select(guidance_, true);
    std::vector<bool> done(t.ops.size(), false);
    if (c.scaled.size() != t.ops.size()) c.scaled.assign(t.ops.size(), false);
    const double f = on_ ? 2.0 : 0.5;
    std::vector<OpId> ops, removed;
    note_default_steps(t, steps_, text, c);
    for (const auto& g : step_groups(t, idx, steps_, text))
      for (std::size_t r : g)
        for (OpId i : idx.device_ops(r)) (guidance[i] && !on_ ? removed : ops).push_back(i);
    auto [before, after] = retime_ops(ctx, c, ops, done, [&](OpId) { return std::make_tuple(f, f, f); });
    GraphEditor ed(c.edit_graph(), text);
    TimeNs gone = 0;
    for (OpId i : removed) {
      gone += c.durations[i];
      ed.remove(i);
    }
    ed.commit();
    if (c.scale_factor == 0) c.scale_factor = 1 / f;
    c.log.push_back(
        text + ": " + std::to_string(ops.size()) + " device ops of the steps at " + (on_ ? "twice" : "half") + " their work (" +
        format_duration(before) + " -> " + format_duration(after) + ")" +
        (on_ ? std::string("; the guidance arithmetic is not synthesized")
             : "; " + std::to_string(removed.size()) + " ops of the guidance arithmetic removed (" + format_duration(gone) + ")"));
  }

 private:
  bool on_;
  std::string steps_, guidance_;
};

class Tokens : public TransformStep {
 public:
  Tokens(double f, bool frames, std::string steps, std::string decoder)
      : f_(f), frames_(frames), steps_(std::move(steps)), decoder_(std::move(decoder)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    RangeIndex idx(t);
    const double tok = frames_ ? f_ : f_ * f_;
    std::vector<bool> done(t.ops.size(), false);
    if (c.scaled.size() != t.ops.size()) c.scaled.assign(t.ops.size(), false);
    std::vector<OpId> ops;
    note_default_steps(t, steps_, text, c);
    for (const auto& g : step_groups(t, idx, steps_, text))
      for (std::size_t r : g)
        for (OpId i : idx.device_ops(r)) ops.push_back(i);
    // Keys per query of each attention kernel (FLOPs = 4 x out elements x keys): the longest is
    // self-attention over the latent tokens; fewer than half of it is cross-attention to the text.
    double longest = 0;
    auto keys = [&](OpId i) {
      const KernelWork& w = ctx.work[i];
      return w.cls == KernelClass::Attention && w.out_elems > 0 ? w.flops / (4 * w.out_elems) : 0.0;
    };
    for (OpId i : ops) longest = std::max(longest, keys(i));
    std::size_t self = 0, cross = 0;
    auto [b1, a1] = retime_ops(ctx, c, ops, done, [&](OpId i) {
      if (ctx.work[i].cls != KernelClass::Attention) return std::make_tuple(tok, tok, tok);
      const double k = keys(i);
      if (k > 0 && k < 0.5 * longest) {
        ++cross;
        return std::make_tuple(tok, tok, tok);
      }
      ++self;
      return std::make_tuple(tok * tok, tok, tok);
    });
    std::vector<OpId> dec;
    if (!decoder_.empty())
      for (std::size_t r : idx.match(range_regex(decoder_)))
        for (OpId i : idx.device_ops(r)) dec.push_back(i);
    auto [b2, a2] = retime_ops(ctx, c, dec, done, [&](OpId) { return std::make_tuple(tok, tok, tok); });
    if (c.scale_factor == 0) c.scale_factor = 1 / tok;
    c.log.push_back(text + ": latent tokens x " + fmt_num("%.3g", tok) + ": " + std::to_string(ops.size()) + " device ops of the steps (" +
                    std::to_string(self) + " self-attention x " + fmt_num("%.3g", tok * tok) + " FLOPs, " + std::to_string(cross) +
                    " cross-attention linear) " + format_duration(b1) + " -> " + format_duration(a1) + "; " + std::to_string(dec.size()) +
                    " decoder ops " + format_duration(b2) + " -> " + format_duration(a2));
  }

 private:
  double f_;
  bool frames_;
  std::string steps_, decoder_;
};

std::unique_ptr<TransformStep> parse_steps(const std::string& arg) {
  CompanionArgs a = split_companions(arg);
  const std::uint32_t k = a.main == "0" ? 0 : parse_count(a.main, "--steps", 100000, "denoiser steps");
  return std::make_unique<Steps>(k, step_range(a));
}

std::unique_ptr<TransformStep> parse_cfg(const std::string& arg) {
  CompanionArgs a = split_companions(arg);
  if (a.main != "on" && a.main != "off") throw InputError("--cfg " + a.main + ": expected on or off");
  std::string g = a.find("guidance") ? *a.find("guidance") : "range~(guidance|cfg|Guidance|CFG).*";
  return std::make_unique<Cfg>(a.main == "on", step_range(a), checked_selector(g));
}

double parse_factor(const std::string& s, const char* option) {
  double f = 0;
  try {
    std::size_t pos = 0;
    f = std::stod(s, &pos);
    if (pos != s.size()) f = 0;
  } catch (const std::exception&) { f = 0; }
  if (!(f > 0) || f > 64) throw InputError(std::string(option) + " " + s + ": expected a factor in (0, 64]");
  return f;
}

std::unique_ptr<TransformStep> make_tokens(const std::string& arg, bool frames) {
  const char* opt = frames ? "--frames" : "--resolution";
  CompanionArgs a = split_companions(arg);
  std::string dec = a.find("decoder") ? *a.find("decoder") : "vae.*|.*decode.*|.*Decode.*|VAE.*";
  if (!dec.empty()) (void)range_regex(dec);
  return std::make_unique<Tokens>(parse_factor(a.main, opt), frames, step_range(a), dec);
}

std::unique_ptr<TransformStep> parse_resolution(const std::string& arg) { return make_tokens(arg, false); }
std::unique_ptr<TransformStep> parse_frames(const std::string& arg) { return make_tokens(arg, true); }

const char* const kStepsCompanions[] = {kStepCompanion, nullptr};
const char* const kCfgCompanions[] = {
    kStepCompanion, "guidance=SEL: the guidance arithmetic removed with --cfg off (default: range~guidance|cfg)", nullptr};
const char* const kTokenCompanions[] = {kStepCompanion,
                                        "decoder=REGEX: ranges after the steps that scale with the pixels (default: vae|decode)", nullptr};

}  // namespace

extern const TransformDef kStepsTransform{
    "steps",
    "K",
    TransformDef::Arg::Required,
    "diffusion: K denoiser steps per loop (--step-range REGEX): a middle step cloned, or steps removed",
    parse_steps,
    kStepsCompanions};
extern const TransformDef kCfgTransform{
    "cfg",
    "on|off",
    TransformDef::Arg::Required,
    "diffusion: classifier-free guidance off (the steps' kernels at half their work, the guidance arithmetic removed) or on",
    parse_cfg,
    kCfgCompanions};
extern const TransformDef kResolutionTransform{
    "resolution",
    "FACTOR",
    TransformDef::Arg::Required,
    "diffusion: image side x FACTOR: latent tokens x FACTOR^2 (self-attention FLOPs x FACTOR^4), the decoder x FACTOR^2",
    parse_resolution,
    kTokenCompanions};
extern const TransformDef kFramesTransform{
    "frames",
    "FACTOR",
    TransformDef::Arg::Required,
    "diffusion: frames x FACTOR: latent tokens x FACTOR (self-attention FLOPs x FACTOR^2), the decoder x FACTOR",
    parse_frames,
    kTokenCompanions};

}  // namespace bneck
