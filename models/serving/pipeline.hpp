// The serving pipeline: read (the model, the GPU, the requests), calibrate (from a trace of the
// real engine), simulate, sweep. `bneck serve` (tools/views/serve_view.cpp) and the Python module
// call it with typed arguments and format what it returns.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "hw/spec.hpp"
#include "models/serving/calibrate.hpp"
#include "models/serving/error_bars.hpp"
#include "models/serving/serve.hpp"

namespace bneck::serve {

struct ServeJob {
  std::string model_path, hw;  // a Hugging Face config.json; a preset or a spec file
  // The requests: a log, or generated from `workload` when `requests_path` is empty.
  std::string requests_path;
  WorkloadSpec workload;
  // The engine. num_blocks 0: from kv_memory, or (kv_memory 0) the GPU's memory left by default.
  EngineConfig engine;
  Bytes kv_memory = 0;
  std::string warmup_path;  // requests the engine served before (its warm-up)
  // Calibration: a trace of the real engine; the traced run's request log (a plain profile's
  // batches; default: calibrate_log); a log whose inter-token latency sets the host's speed.
  std::string calibrate_trace, trace_log, calibrate_log;
  std::int64_t trace_max_seqs = 0;  // the traced engine's sequences per step (0: the forecast's)
  Slo slo;
  std::vector<double> rates;  // a rate sweep (requests/s), empty: none
  bool keep_steps = false;    // ServeOutcome::result.steps (a chrome trace)
};

struct ServeOutcome {
  LlmConfig llm;
  HwSpec hw;
  EngineConfig engine;  // as simulated: blocks filled in, the warm-up read
  Bytes kv_bytes = 0;
  bool generated = false;
  std::vector<Request> requests;
  StepCostModel model;
  CalibrationReport calibration;
  ServeResult result;
  Metrics simulated, measured;
  bool has_measured = false;  // the log has measured times
  struct SweepRow {
    double rate = 0;
    Metrics m;
  };
  std::vector<SweepRow> sweep;  // by rate
  double knee_rate = 0;         // the first rate whose completions fall below 90 % of its arrivals (0: none)
  double best_rate = 0;         // the goodput-maximizing rate (throughput without SLOs)
  double simulation_s = 0, sweep_s = 0, total_s = 0;
  std::vector<std::string> notes;                  // what the engine's settings left out or assumed (shared prefixes)
  Policy calibration_policy = Policy::Continuous;  // of the calibration's engine
  double calibration_load = 0;                     // the calibration log's mean requests in flight (0: none measured)
  ServeBars bars;                                  // the 80 % intervals of the medians and the duration
};

// Runs it. Bad input is an InputError naming the file (and line) or the option.
ServeOutcome run_serving(const ServeJob& job);

// "1,2,4": request rates (requests/s), each positive, 1 to 1000 of them; errors name `what`.
std::vector<double> parse_rates(const std::string& text, const std::string& what);

// The log's requests at another rate: inter-arrival gaps scaled by (the log's rate / rate).
std::vector<Request> at_rate(const std::vector<Request>& reqs, double rate);

}  // namespace bneck::serve
