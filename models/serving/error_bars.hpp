// The 80 % intervals of a serving forecast: median TTFT, TPOT, E2E latency and the duration.
// Model card:
//   Each metric keeps the signed errors (forecast / measured - 1) of the fit runs of
//   docs/serving.md (runs 1 and 2, each calibrated on its own machine's calibration run, forecast
//   at other loads, offline and with CUDA graphs); their bias and prediction half-width
//   (models/whatif/error_bar.hpp) give the interval of a calibrated forecast, widened in
//   quadrature by:
//   - the host's run-to-run pace where the engine is host-bound (the simulated GPU time under
//     60 % of the steps' time): the prediction half-width of the deviations of repeated runs of one
//     program on one machine from their mean, TTFT, TPOT and E2E each its own, the duration E2E's
//     (validate/reference/h200/serving/plain/repeats: TPOT 69.0 / 59.4 / 70.5, 64.7 / 59.6 / 79.1,
//     60.4 / 67.1 / 62.0 ms; TTFT 114.7 / 91.5 / 142.6, 106.6 / 94.3 / 142.4, 123.6 / 108.1 / 126.8
//     ms, about 1.7 times TPOT's spread: a first token waits for the step in flight and its own
//     prompt step, both at the pace of the moment); or, where the calibration run's own pace moved
//     farther (its steps against the step model fitted on them, medians over stretches of 15
//     steps: 10th and 90th percentiles against the run's median; validate/reference/h200/serving/
//     loads4 and loads5, H100 machines whose host switched between two paces for seconds at a
//     time), that move, each metric's in the repeats' proportion to TPOT's: a new run may hold
//     either pace throughout;
//   - a load beyond the calibration's (requests in flight, mean, r times the calibration log's,
//     r > 1.5): w x log2(r) more, the host's per-sequence work not being measured there;
//   - CUDA graphs forecast from an eager calibration at a load beyond the calibration's (as above):
//     the graphs' gain was validated near the calibration's load (the fit runs' CUDA-graph rows)
//     and beyond it on one run (validate/reference/h200/serving/loads: 64 requests at once, TTFT /
//     TPOT / E2E +11.1 / +10.0 / +9.8 %): that run's errors as a family of one (1.645 x RMS);
//   - static batching forecast from a continuous engine's calibration: the makespan errors of
//     static forecasts from another engine's or another machine's calibration (docs/serving.md:
//     from the continuous engine on its machine, its per-sequence terms dropped, +6.7 and -9.4 %, runs 2 and 3; from model.generate
//     calibrated on another machine +47 and +34 %): the engine's host and the machine's both
//     unmeasured for the run forecast;
//   - no calibration: the hardware model alone, without the engine's host work: its GPU time is a
//     floor (the lower end, less the fit's half-width); the upper end is the gap measured between
//     the model and a Python engine (docs/serving.md: 55 ms a step where the model says 1.2 ms).
#pragma once
#include <array>
#include <string>
#include <vector>

namespace bneck::serve {

struct ServeBars {
  bool valid = false;
  std::array<double, 2> ttft_ms{}, tpot_ms{}, e2el_ms{}, duration_s{};  // [low, high]
  std::vector<std::string> basis;                                       // the sources, the largest first
};

struct ServeBarInputs {
  bool calibrated = false;
  bool static_from_continuous = false;  // forecast static batching, calibrated on a continuous engine
  double gpu_fraction = 1;              // simulated GPU time over the steps' time
  double load_ratio = 1;                // requests in flight, forecast over the calibration log's
  double calibration_pace = 0;          // how far the calibration run's own host pace moved (HostStepFit, larger side)
  bool graphs_from_eager = false;
  double ttft = 0, tpot = 0, e2el = 0, duration = 0;  // the forecast's medians and duration
};

// Loads beyond this many times the calibration's widen the interval (CUDA graphs there more).
constexpr double kLoadBeyondCalibration = 1.5;

ServeBars serve_error_bars(const ServeBarInputs& in);

}  // namespace bneck::serve
