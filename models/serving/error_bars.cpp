// Serving forecasts' intervals (error_bars.hpp has the model card).
#include "models/serving/error_bars.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "models/whatif/error_bar.hpp"

namespace bneck::serve {
namespace {

// Forecast / measured - 1 of the fit runs (docs/serving.md, runs 1 and 2, calibrated from their
// annotated traces as `serve` does, the forward's assumed per-sequence host work included):
// Poisson 3/s, 10/s, CUDA graphs 6/s, offline; run 1 first.
const std::vector<double> kTtft = {-0.003, 0.054, 0.002, 0.136, -0.176, 0.022, 0.031, 0.044};
const std::vector<double> kTpot = {0.023, 0.089, -0.043, 0.117, -0.035, 0.056, 0.004, 0.007};
const std::vector<double> kE2el = {0.047, 0.064, -0.038, 0.134, -0.039, 0.052, 0.007, 0.012};
// CUDA graphs forecast from an eager calibration at a load beyond the calibration's:
// validate/reference/h200/serving/loads' 64 requests at once with CUDA graphs (3.2x the
// calibration's load), calibrated on the plain capture's eager trace: TTFT, TPOT, E2E.
const std::vector<double> kGraphsTtft = {0.111}, kGraphsTpot = {0.100}, kGraphsE2el = {0.098};
// Static batching forecast from another engine's calibration (the continuous engine's, runs 2
// and 3, its per-sequence, per-token and per-KV-token terms dropped) or another machine's
// (model.generate's own, for runs 2 and 3), makespan (docs/serving.md).
const std::vector<double> kStatic = {0.067, -0.094, 0.47, 0.34};

// The uncalibrated model's step against the engine's measured (docs/serving.md: 1.2 ms against 55-65 ms).
constexpr double kUncalibratedGap = 55.0 / 1.2;

// Repeated runs of one program on one machine (validate/reference/h200/serving/plain and its
// repeats/: Poisson 4/s, 8/s and the calibration requests at 6/s, three processes each), medians in
// ms: each run's deviation from its group's mean, the sample a new run's pace is drawn from. TTFT
// moves more than TPOT between runs (a first token waits for the step in flight and its own
// prompt step, both at the pace of the moment): its own sample.
std::vector<double> deviations(const std::vector<std::vector<double>>& runs) {
  std::vector<double> d;
  for (const auto& r : runs) {
    double m = 0;
    for (double x : r) m += x;
    m /= static_cast<double>(r.size());
    for (double x : r) d.push_back(x / m - 1);
  }
  return d;
}
const std::vector<std::vector<double>> kPaceTtft = {{114.7, 91.5, 142.6}, {106.6, 94.3, 142.4}, {123.6, 108.1, 126.8}};
const std::vector<std::vector<double>> kPaceTpot = {{69.0, 59.4, 70.5}, {64.7, 59.6, 79.1}, {60.4, 67.1, 62.0}};
const std::vector<std::vector<double>> kPaceE2el = {{4780.8, 4197.9, 5132.8}, {4606.1, 4240.8, 5448.5}, {4117.2, 4499.7, 4297.3}};

}  // namespace

ServeBars serve_error_bars(const ServeBarInputs& in) {
  ServeBars out;
  out.valid = true;
  std::vector<std::pair<double, std::string>> parts;
  struct Metric {
    const std::vector<double>* errors;
    const std::vector<std::vector<double>>* repeats;
    const std::vector<double>* graphs;
    double forecast;
    std::array<double, 2>* bar;
  };
  const Metric metrics[] = {{&kTtft, &kPaceTtft, &kGraphsTtft, in.ttft, &out.ttft_ms},
                            {&kTpot, &kPaceTpot, &kGraphsTpot, in.tpot, &out.tpot_ms},
                            {&kE2el, &kPaceE2el, &kGraphsE2el, in.e2el, &out.e2el_ms},
                            {&kE2el, &kPaceE2el, &kGraphsE2el, in.duration, &out.duration_s}};
  const bool host_bound = in.gpu_fraction < 0.6;
  const double r = in.load_ratio > kLoadBeyondCalibration ? std::log2(in.load_ratio) : 0;
  const ErrorFamily st = family_stats("static", kStatic);
  double ttft_pace = 0;  // TTFT's (the first metric's), for the basis line
  const double tpot_repeats = family_stats("host pace", deviations(kPaceTpot)).half_width;
  const bool calibration_paced = in.calibration_pace > tpot_repeats;
  for (std::size_t k = 0; k < 4; ++k) {
    const Metric& m = metrics[k];
    const ErrorFamily f = family_stats("serve", *m.errors);
    if (!in.calibrated) {  // the hardware model alone: its GPU time is a floor; the host's work it lacks
      *m.bar = {m.forecast / (1 + f.half_width), m.forecast * kUncalibratedGap};
      continue;
    }
    const double repeats_pace = family_stats("host pace", deviations(*m.repeats)).half_width;
    const double pace = std::max(repeats_pace, in.calibration_pace * repeats_pace / tpot_repeats);
    if (k == 0) ttft_pace = pace;
    double bias = f.bias, var = f.half_width * f.half_width;
    if (host_bound) var += pace * pace;
    if (r > 0) var += (f.half_width * r) * (f.half_width * r);
    if (in.static_from_continuous) bias += st.bias, var += st.half_width * st.half_width;
    const double graphs = family_stats("graphs beyond the load", *m.graphs).half_width;
    if (in.graphs_from_eager && r > 0) var += graphs * graphs;
    auto [lo, hi] = measured_interval(m.forecast, bias, std::sqrt(var));
    *m.bar = {lo, hi};
    if (k == 1) {  // the basis, in TPOT's terms
      parts.emplace_back(f.half_width, "the calibrated engine's held-out TPOT error " + plus_minus(f.half_width) + " (" +
                                           std::to_string(f.n) + " runs at other loads, offline, CUDA graphs)");
      if (host_bound)
        parts.emplace_back(pace,
                           "host-bound engine (GPU " + std::to_string(static_cast<int>(std::lround(100 * in.gpu_fraction))) +
                               " % of the step): the host's run-to-run pace " + plus_minus(pace) + " (TTFT " + plus_minus(ttft_pace) +
                               (calibration_paced ? "; as far as the calibration run's own pace moved over stretches of its steps)" : ")"));
      if (r > 0) {
        char b[64];
        std::snprintf(b, sizeof b, "%.1fx", in.load_ratio);
        parts.emplace_back(f.half_width * r, std::string("load ") + b + " the calibration's (requests in flight): " +
                                                 plus_minus(f.half_width * r) + " more, per-sequence host work not measured there");
      }
      if (in.static_from_continuous)
        parts.emplace_back(st.half_width, "static batching from a continuous engine's calibration " + plus_minus(st.half_width));
      if (in.graphs_from_eager && r > 0)
        parts.emplace_back(graphs, "CUDA graphs from an eager calibration beyond its load: measured error " + plus_minus(graphs) +
                                       " (1 run: 64 requests at once, 3.2x the calibration's load)");
    }
  }
  if (!in.calibrated)
    parts.emplace_back(1.0,
                       "uncalibrated: the hardware model alone, without the engine's host work (a Python engine's step measured 46x "
                       "the model's); calibrate with --calibrate TRACE");
  std::sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& p : parts) out.basis.push_back(std::move(p.second));
  return out;
}

}  // namespace bneck::serve
