// Error bars of forecasts: an 80 % interval around each forecast, from the errors its transforms'
// families measured on held-out cases (docs/fidelity.md), widened where the forecast leaves what
// was validated. Model card:
//   Each family keeps the signed errors (forecast / measured - 1) of the cases it was fitted on:
//   their mean b and standard deviation s give the interval of the error e of a new forecast,
//   e in [b - w, b + w], w = t(0.9, n - 1) x s x sqrt(1 + 1/n) (a prediction interval of a normal
//   sample of n; n < 3: 1.645 x the errors' RMS). Several transforms add their b and their w in
//   quadrature, each first multiplied, in a combination, by r = F_i / F x |F_-i - F| / |B - F_i|
//   where that is 1.05 or more (F_i: its forecast alone, F_-i: the others' without it, F: all, B:
//   none; a family's error is a fraction of F_i, and what a transform misjudges goes with the time
//   it changes, |B - F_i| alone and |F_-i - F| combined): --fuse auto after --precision tf32 on
//   the transformers of validate/reference/h100/tf32_compile, r 3.6-4.5, where the intervals held
//   3 of 5 without it and 5 of 5 with it (the rule was chosen on them). A carried error is one of
//   the time the transform changes: it widens the interval as a time (below, as the profiler's
//   cost), not as a ratio (whose upper end passed 6x the forecast where carried half-widths
//   reached 60 %). A transform that changes nothing (r 0) adds none. A combination measured as
//   such takes its own family instead (bf16 autocast then --fuse auto: "autocast+fuse", fitted on
//   validate/reference/h100/autocast_compile run1 and run2, held out on run3). A target GPU's error, which
//   every kernel carries, is never scaled; the other forecasts here run on that GPU. The
//   widenings add in quadrature too:
//   - host-bound after the change (the forecast's GPU busy under 60 % of its span) where the
//     change moved the GPU's or the host's work: the host model's measured errors on host-bound
//     cases (the profiler's cost taken out too much or too little, the host's run-to-run pace);
//   - the profiler's cost taken out (--unprofile) where the forecast is host-bound: that cost's
//     per-event spread over the programs it was measured on (its coefficient of variation, x 1.282)
//     times the removed time T: an error in time, not in ratio, so the measured time is the
//     interval of the other terms widened on each side by that time in quadrature around its
//     center c (c -+ sqrt((c - edge)^2 + (1.282 cv T)^2)), and never under the GPU-busy share of
//     the other terms' low end (a host freed of more profiler cost leaves the GPU's time). As a
//     ratio, a step whose removed cost was 4x its forecast gave [0.40, 20]x the forecast.
//   - the trace's own spread: the coefficient of variation of its repeated ranges' measured spans,
//     or of their forecasts where that is larger (a change that moves the steps onto the host
//     brings out the host's pace per traced step, which a GPU-bound measured span hides);
//   - TF32 where measured shape surfaces priced under half the math it changed (a GPU with no
//     TF32 surface and no sibling of the same compute that has one, or convolutions, which no
//     surface prices): the family of TF32 priced by one efficiency (the H200's four workloads
//     before its surfaces); where a sibling's fp32/TF32 ratio priced it, that family (the H100's);
//   - a target GPU (--hw): the held-out median |error| of its kernel classes (the spec's
//     held_out_error, time-weighted), as a normal's s = median / 0.674; none: unvalidated;
//   - rates built from the trace's device properties (a GPU with no preset) where a transform
//     prices work on them: the widest family's w, said so;
//   - ranks: a step on N ranks waits for its slowest host. A multi-rank trace: the largest share of
//     its span one rank spent waiting for the others at collectives (measured) x 1.282; a layout
//     forecast of N ranks from fewer, host-bound after the change: the forecast's host runs at the
//     expected slowest of N processes' paces (host_speed.cpp); the 10th to 90th percentiles of
//     that slowest pace over its mean give w = (p90 - p10) / 2 (HostSpread::slowest_spread: 2
//     ranks 0.79 .. 1.36, +-29 %);
//   - more GPUs than validated (2): w x (1 + log2(N / 2) / 2);
//   - a transform no measurement checked: the widest family's w, said so.
//   The measured time then lies in [forecast / (1 + b + w), forecast / (1 + b - w)] (widened by the
//   profiler's term, above).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "models/whatif/transform.hpp"
#include "sim/base/units.hpp"

namespace bneck {

struct ErrorBar {
  TimeNs low_ns = 0, high_ns = 0;   // where the measured time lies, 4 times in 5
  double bias = 0, half_width = 0;  // of the relative error forecast / measured - 1
  // The errors in time, not in ratio (the profiler's cost taken out, a family's error carried into
  // a combination: the measured time is the forecast +- that time), in quadrature, as a fraction of
  // the forecast; and the least the measured time can be where the profiler's cost was taken out,
  // as a fraction of the other terms' low end (the forecast's GPU-busy share: a host that took
  // less profiler cost leaves the GPU's time; 0: none).
  double additive = 0, floor = 0;
  std::vector<std::string> basis;  // each source in words, the largest first
  bool valid() const { return high_ns > 0; }
};

// What the interval of one forecast depends on, beside its transforms.
struct ErrorContext {
  double gpu_busy_after = 1;       // the forecast's GPU busy fraction of its span
  double spread = 0;               // coefficient of variation of the trace's repeated measured spans
  double spread_predicted = 0;     // and of their forecasts (where the change moves steps onto their hosts' paces)
  const HwSpec* target = nullptr;  // the spec after the transforms (its held_out_error for --hw); set by run_whatif
  // The profiler's host cost taken out of a range (its measured span less its baseline's), over
  // its forecast, the largest of the ranges; its per-event cost's coefficient of variation over
  // programs (--unprofile); the host's share of the forecast's critical path.
  double profiler_share = 0, profiler_cv = 0, host_on_path = 0;
  bool rates_guessed = false;   // a transform prices work on rates built from the trace's device properties
  double rank_wait = 0;         // a multi-rank trace: the largest share of its span a rank waited at collectives
  double host_ranks = 0;        // a layout's ranks whose slowest host the forecast runs at (0: none)
  double fused_host_share = 0;  // host time --fuse took out, over the baseline span (capped at 1)
  double gpu_busy_before = 1;   // the baseline's GPU busy fraction of its span
  double surface_share = 1;     // of the math a --precision changed, the share measured GEMM surfaces priced
  double conv_share = 0;        // --fuse auto: the convolutions' share of the kernels' time (a convolutional network)
  // Per transform (as passed to error_bar; empty: all 1): how far its family's error carries into
  // a combined forecast, r_i = F_i / F x |F_-i - F| / |B - F_i| (run.cpp: F_i its forecast alone,
  // F_-i the others' without it, F all, B none). A family's errors were measured with its
  // transform alone, a fraction of F_i; what it misjudges goes with the time it changes. From 1.05
  // its bias and half-width are multiplied by it; a target GPU's (--hw) never are. Never past the
  // time it changes there, |F_-i - F| / F (combined_share): its half-width then stays at most that
  // (or its family's own, if wider). 0: the transform changes nothing here (its forecast alone is
  // the baseline's, and the combination's without it the combination's): its family's error is
  // not added.
  std::vector<double> carry_ratio, combined_share;
};

ErrorBar error_bar(const std::vector<Transform>& transforms, const ErrorContext& ctx, TimeNs predicted_ns);
// The same relative interval around another forecast of the case (a range's).
ErrorBar scaled_bar(const ErrorBar& bar, TimeNs predicted_ns);
// "12.3 ms .. 14.1 ms"
std::string bar_text(const ErrorBar& bar);
// A relative half-width in words: 0.134 -> "+-13 %".
std::string plus_minus(double half_width);

// One family's measured errors, for docs and tests: name, n, bias, half-width.
struct ErrorFamily {
  std::string name;
  std::size_t n = 0;
  double bias = 0, half_width = 0;
};
std::vector<ErrorFamily> error_families();
// The bias and the 80 % prediction half-width of a family's signed errors (the model card's rule).
ErrorFamily family_stats(const std::string& name, const std::vector<double>& errors);
// [forecast / (1 + bias + w), forecast / (1 + bias - w)]: where the measured value lies.
std::pair<double, double> measured_interval(double forecast, double bias, double half_width);

}  // namespace bneck
