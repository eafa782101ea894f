#include "models/serving/pipeline.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <sstream>

#include "sim/base/error.hpp"
#include "sim/base/stats.hpp"
#include "traces/importer.hpp"

namespace bneck::serve {

namespace {

// The host time a step's forward spends per sequence in transformers' continuous-batching engine,
// where a calibration does not measure it (calibrate, below): chosen on the held-out runs of the
// plain, loads and loads2 captures (validate/reference/h200/serving, 19 runs; TPOT and E2E rms
// error 8.89 % at 0, 8.72 % at 100 us, 8.92 at 150, 8.81 at 200, 9.10 at 300) and checked on
// loads3's three held-out runs, which it was not chosen on (13.1 -> 11.5 %). The marked runs' step
// logs put the forward's growth at a median of 0.07 ms a sequence over 17 logs (-0.15 .. 1.2).
constexpr double kForwardHostPerSeq = 100e3;  // ns

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void check_engine(const EngineConfig& e) {
  if (e.block_size < 1 || e.block_size > (1 << 20)) throw InputError("--block-size must be 1 to 2^20");
  if (e.max_batch_tokens < 1 || e.max_seqs < 1 || e.chunked_prefill < 0 || e.padding.q_interval < 0 || e.padding.kv_interval < 0)
    throw InputError("--max-batch-tokens, --max-seqs: positive; pads, --chunked-prefill: >= 0");
  if (!(e.watermark >= 0 && e.watermark < 1)) throw InputError("--kv-watermark must be in [0, 1)");
  if (e.wake < 0 || e.wake > 3600 * kNsPerS) throw InputError("--engine-wake: must be between 0 and 1 hour");
  if (e.prefix_hash_block < 1 || e.prefix_hash_block > (1 << 24)) throw InputError("--prefix-hash-block must be 1 to 2^24");
}

// What the requests' shared prefixes mean for this engine.
void note_prefixes(const ServeOutcome& out, std::vector<std::string>& notes) {
  std::size_t with = 0;
  for (const auto& r : out.requests) with += r.hash_ids.empty() ? 0 : 1;
  const EngineConfig& e = out.engine;
  if (!e.prefix_caching) {
    if (with)
      notes.push_back(std::to_string(with) + " requests carry hash_ids (shared prefixes); no prefix cache simulated (--prefix-caching)");
  } else if (e.policy == Policy::Static) {
    notes.push_back("--prefix-caching: the static policy has no prefix cache; ignored");
  } else if (!with) {
    notes.push_back("--prefix-caching: no request carries hash_ids, so none shares a prefix");
  } else {
    notes.push_back("prefix caching: " + std::to_string(with) + " requests with hash_ids, one per " + std::to_string(e.prefix_hash_block) +
                    " prompt tokens; KV blocks of " + std::to_string(e.block_size));
  }
}

// The KV cache: the blocks given, else those `kv_memory` holds, else what the GPU leaves.
void size_kv_cache(const ServeJob& job, ServeOutcome& out) {
  EngineConfig& eng = out.engine;
  if (eng.num_blocks > 0) {
    out.kv_bytes = static_cast<Bytes>(eng.num_blocks) * static_cast<Bytes>(eng.block_size) * out.llm.kv_bytes_per_token();
    return;
  }
  out.kv_bytes = job.kv_memory > 0 ? job.kv_memory : default_kv_memory(out.hw, out.llm, eng);
  eng.num_blocks = blocks_for_memory(out.kv_bytes, out.llm, eng.block_size);
  if (eng.num_blocks < 1)
    throw InputError(job.model_path,
                     "the weights (" + format_bytes(out.llm.weight_bytes()) + ") leave no memory for a KV cache on " + out.hw.name);
}

// Mean requests in flight: their latencies summed over first arrival to last finish; `end(i)` is
// request i's finish (< 0: none). 0 when nothing finished.
template <class End>
double in_flight(const std::vector<Request>& reqs, End end) {
  TimeNs first = -1, last = -1;
  double sum = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const TimeNs e = end(i);
    if (e < 0) continue;
    sum += static_cast<double>(e - reqs[i].arrival);
    first = first < 0 ? reqs[i].arrival : std::min(first, reqs[i].arrival);
    last = std::max(last, e);
  }
  return last > first && first >= 0 ? sum / static_cast<double>(last - first) : 0;
}
// A measured log's.
double measured_in_flight(const std::vector<Request>& log) {
  return in_flight(log, [&](std::size_t i) { return !log[i].token_times.empty() ? log[i].token_times.back() : log[i].measured_finish; });
}

std::string fmt_scale(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", s);
  return b;
}

// Calibration from a trace of the engine: its settings are the ones given, without CUDA graphs (a
// calibration trace of eager steps), continuous; static batching when the traced run's log is a
// static engine's (finish times alone, shared by each batch), its batch size the largest batch.
void calibrate(const ServeJob& job, ServeOutcome& out) {
  if (job.calibrate_trace.empty()) {
    if (!job.calibrate_log.empty() || !job.trace_log.empty()) throw InputError("--calibrate-log and --trace-log need --calibrate TRACE");
    return;
  }
  const Trace t = load_trace(job.calibrate_trace);
  EngineConfig ce = out.engine;
  if (job.trace_max_seqs > 0) ce.max_seqs = job.trace_max_seqs;  // the traced engine's, where the forecast's differs
  ce.policy = Policy::Continuous;
  ce.cuda_graph = false;
  ce.warmup.clear();
  const std::string traced_path = job.trace_log.empty() ? job.calibrate_log : job.trace_log;
  std::vector<Request> traced;
  if (!traced_path.empty()) traced = load_request_log(traced_path);
  if (static_log(traced)) {
    ce.policy = Policy::Static;
    out.calibration_policy = Policy::Static;
    std::size_t most = 1;
    for (const auto& g : static_batches(traced)) most = std::max(most, g.size());
    ce.max_seqs = static_cast<std::int64_t>(most);
  }
  // The traced run's cache: the blocks given (the engine as it ran), else one the replay cannot
  // exhaust (the default is sized for the target GPU, not the traced one).
  if (job.engine.num_blocks <= 0) {
    std::int64_t most = 1;
    for (const auto& r : traced) most = std::max(most, (r.prompt + r.output + ce.block_size - 1) / ce.block_size);
    ce.num_blocks = std::max(ce.num_blocks, most * ce.max_seqs);
  }
  out.calibration_load = measured_in_flight(traced);
  const TraceLog tl{&traced, traced_path, ce};
  out.calibration = calibrate_step_model(t, out.model, traced_path.empty() ? nullptr : &tl);
  if (traced_path.empty()) return;
  // The forward's host work per sequence (what a Python engine does for each sequence inside its
  // forward; a CUDA graph's replay skips it, its captures pay it), which neither the trace's launch
  // pauses nor a light load's few sequences a step measure: assumed, then scaled with every host
  // term to the log below. Not for a static forecast (model.generate batches its sequences in
  // tensors: no such work).
  if (ce.policy == Policy::Continuous && out.engine.policy == Policy::Continuous && out.model.launch[1] == 0) {
    out.model.launch[1] = kForwardHostPerSeq;
    out.model.notes.push_back("forward host " + fmt_scale(kForwardHostPerSeq / 1e3) +
                              " us/seq: assumed (not measured by the calibration; chosen on this engine's held-out runs of three captures, "
                              "docs/serving.md), before the host scale");
  }
  const std::string scale_paths = job.calibrate_log.empty() ? traced_path : job.calibrate_log;
  // Several runs of the calibration requests (comma-separated): the host's speed varies from one
  // run to the next; the median of their scales.
  std::vector<double> scales;
  std::string list;
  StepCostModel fitted = out.model;
  CalibrationReport rep = out.calibration;
  for (std::size_t a = 0; a <= scale_paths.size();) {
    std::size_t b = scale_paths.find(',', a);
    if (b == std::string::npos) b = scale_paths.size();
    const std::string path = scale_paths.substr(a, b - a);
    a = b + 1;
    if (path.empty()) continue;
    StepCostModel m = out.model;
    CalibrationReport r = out.calibration;
    fit_host_scale(path == traced_path ? traced : load_request_log(path), ce, m, r, path);
    scales.push_back(m.host_scale);
    list += (list.empty() ? "" : ", ") + fmt_scale(m.host_scale);
    if (scales.size() == 1) fitted = m, rep = r;  // the first run's notes and figures
  }
  if (scales.size() > 1) {
    fitted.host_scale = quantile(scales, 0.5);
    fitted.notes.push_back("host terms x " + fmt_scale(fitted.host_scale) + ": the median over " + std::to_string(scales.size()) +
                           " runs of the calibration requests (" + list + ")");
  }
  out.model = std::move(fitted);
  out.calibration = rep;
  // A static forecast from the continuous engine's calibration: that engine's preparation and
  // update grow with its batch's sequences, tokens and KV tokens (the scheduler's per-sequence
  // Python, the paged cache's block tables); model.generate's batch is tensors (a contiguous cache,
  // a padded batch), so its host work per step does not: those terms go, the constant ones and the
  // forward's stay (fitted to the log above with the continuous engine they describe).
  if (ce.policy == Policy::Continuous && out.engine.policy == Policy::Static) {
    const StepCostModel& m = out.model;
    char b[320];
    std::snprintf(b, sizeof b,
                  "static batching: the continuous engine's preparation per sequence, token and KV token (%.3g, %.3g, %.3g us) and update "
                  "per sequence (%.3g us) dropped (model.generate's batch is tensors)",
                  m.prepare[1] / 1e3, m.prepare[2] / 1e3, m.prepare[3] / 1e3, m.update[1] / 1e3);
    out.model.prepare[1] = out.model.prepare[2] = out.model.prepare[3] = 0;
    out.model.update[1] = 0;
    out.model.notes.push_back(b);
  }
}

// The intervals of the forecast (error_bars.hpp).
void attach_bars(const ServeJob& job, ServeOutcome& out) {
  ServeBarInputs in;
  in.calibrated = !job.calibrate_trace.empty();
  in.static_from_continuous = in.calibrated && out.engine.policy == Policy::Static && out.calibration_policy == Policy::Continuous;
  in.gpu_fraction = out.result.busy > 0 ? static_cast<double>(out.result.gpu_busy) / static_cast<double>(out.result.busy) : 1;
  const Metrics& m = out.simulated;
  // The same measure as the calibration log's, on the simulated run.
  const double load = in_flight(out.requests, [&](std::size_t i) { return out.result.requests[i].finish; });
  in.load_ratio = out.calibration_load > 0 && load > 0 ? load / out.calibration_load : 1;
  in.ttft = m.ttft.median, in.tpot = m.tpot.median, in.e2el = m.e2el.median, in.duration = m.duration_s;
  in.graphs_from_eager = in.calibrated && out.engine.cuda_graph;
  // As a forecast's error (forecast / measured - 1): a stretch whose steps took a fraction f more
  // time than the run's median is a forecast -f / (1 + f) off there.
  if (const auto& fit = out.calibration.host_fit)
    in.calibration_pace = std::max(-fit->pace_lo / (1 + fit->pace_lo), fit->pace_hi / (1 + fit->pace_hi));
  out.bars = serve_error_bars(in);
}

void sweep(const ServeJob& job, ServeOutcome& out) {
  if (job.rates.empty()) return;
  const auto t0 = Clock::now();
  if (job.rates.size() > 1000) throw InputError("--rates: 1 to 1000 rates");
  for (double r : job.rates) {
    if (!(r >= 1e-6 && r <= 1e9)) throw InputError("--rates: expected requests/s from 1e-6 to 1e9");
    std::vector<Request> rq;
    if (out.generated) {
      WorkloadSpec w = job.workload;
      w.rate = r;
      rq = generate_requests(w);
    } else {
      rq = at_rate(out.requests, r);
    }
    const ServeResult sr = simulate(rq, out.engine, out.model, false);
    out.sweep.push_back({r, summarize(rq, sr.requests, job.slo)});
  }
  std::sort(out.sweep.begin(), out.sweep.end(), [](const auto& x, const auto& y) { return x.rate < y.rate; });
  double best = -1;
  const bool slo = job.slo.ttft > 0 || job.slo.tpot > 0;
  for (const auto& row : out.sweep) {
    // Saturation: the engine completes requests more slowly than they arrive (below 90 %).
    if (out.knee_rate == 0 && row.m.request_throughput < 0.9 * row.rate) out.knee_rate = row.rate;
    const double g = slo ? row.m.request_goodput : row.m.request_throughput;
    if (g > best) best = g, out.best_rate = row.rate;
  }
  out.sweep_s = seconds_since(t0);
}

}  // namespace

std::vector<double> parse_rates(const std::string& s, const std::string& what) {
  std::vector<double> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) {
    std::size_t used = 0;
    double v = -1;
    try {
      v = std::stod(x, &used);
    } catch (...) { used = 0; }
    if (used != x.size() || !(v > 0) || !std::isfinite(v))
      throw InputError(what + " '" + s + "': expected positive requests/s, comma-separated");
    out.push_back(v);
  }
  if (out.empty() || out.size() > 1000) throw InputError(what + ": 1 to 1000 rates");
  return out;
}

std::vector<Request> at_rate(const std::vector<Request>& reqs, double rate) {
  std::vector<Request> out = reqs;
  const TimeNs span = reqs.empty() ? 0 : reqs.back().arrival - reqs.front().arrival;
  if (reqs.size() < 2 || span <= 0) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i].arrival = static_cast<TimeNs>(static_cast<double>(i) / rate * 1e9);
  } else {
    const double own = static_cast<double>(reqs.size() - 1) / (static_cast<double>(span) / 1e9);
    for (auto& r : out)
      r.arrival = reqs.front().arrival + static_cast<TimeNs>(static_cast<double>(r.arrival - reqs.front().arrival) * own / rate);
  }
  for (auto& r : out) r.token_times.clear();
  return out;
}

ServeOutcome run_serving(const ServeJob& job) {
  const auto t0 = Clock::now();
  ServeOutcome out;
  out.llm = load_llm_config(job.model_path);
  out.hw = load_target_hw(job.hw);
  out.engine = job.engine;
  check_engine(out.engine);
  size_kv_cache(job, out);
  out.generated = job.requests_path.empty();
  if (out.generated) {
    if (job.workload.num <= 0) throw InputError("give --requests LOG.jsonl or generate them with --num N [--rate R ...]");
    out.requests = generate_requests(job.workload);
  } else {
    out.requests = load_request_log(job.requests_path);
  }
  out.model = hardware_step_model(out.llm, out.hw);
  calibrate(job, out);
  if (!job.warmup_path.empty()) out.engine.warmup = load_request_log(job.warmup_path);
  const auto t_sim = Clock::now();
  try {
    out.result = simulate(out.requests, out.engine, out.model, job.keep_steps);
  } catch (const InputError& e) {
    throw InputError(out.generated ? std::string("generated requests: ") + e.what()
                                   : job.requests_path + (std::isdigit(static_cast<unsigned char>(e.what()[0])) ? ":" : ": ") + e.what());
  }
  out.simulation_s = seconds_since(t_sim);
  note_prefixes(out, out.notes);
  out.simulated = summarize(out.requests, out.result.requests, job.slo);
  for (const auto& r : out.requests) out.has_measured = out.has_measured || r.measured();
  if (out.has_measured) out.measured = summarize_measured(out.requests, job.slo);
  attach_bars(job, out);
  sweep(job, out);
  out.total_s = seconds_since(t0);
  return out;
}

}  // namespace bneck::serve
