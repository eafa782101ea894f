// bneck serve end to end: the calibrated forecasts against transformers' continuous-batching engine
// and model.generate measured on an H200 (validate/reference/h200/serving, made by
// validate/reference/h200/serving/run_serving.sh and the capture scripts beside it).
#include <catch2/catch.hpp>
#include <optional>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "helpers.hpp"
#include "serve_helpers.hpp"
#include "models/serving/calibrate.hpp"
#include "models/serving/calibrate_steps.hpp"
#include "models/serving/pipeline.hpp"
#include "sim/base/error.hpp"
#include "traces/importer.hpp"

using namespace bneck;
using namespace bneck::serve;
using namespace bneck::test;
namespace fs = std::filesystem;

// Ground truth: transformers 5.17's continuous-batching engine (paged|sdpa, FIFO, sync) serving a
// 1.14 B Llama-style model on an H200 (validate/reference/h200/serving/run_serving.sh), three runs on three machines
// (2026-11-30), each calibrated on its own calibration run (40 requests at 6/s under Nsight Systems:
// the trace; the same requests unprofiled: cal_unprof.jsonl), every other run held out. Each engine
// served 8 warm-up requests first (*_warmup.jsonl); an idle engine woke 0.16 / 0.34 / 0.23 ms after
// an arrival (each calibration run's step log). Forecast vs measured, median, at this commit:
//   run 1: rate 3/s TTFT -2.0 % TPOT +3.0 % E2E +5.5 %; rate 10/s +1.8 / +5.9 / +3.9;
//          CUDA graphs 6/s +2.1 / -4.5 / -4.4; offline +12.2 / +7.9 / +9.6 %
//   run 2: rate 3/s (60) -8.2 / -2.0 / -1.5; rate 10/s -0.3 / +1.8 / +3.1; CUDA graphs -1.1 / +0.3 /
//          +0.2; offline +2.8 / -3.9 / -3.3 %
//   run 3 (its calibration engine served the warm-up twice: 130 steps on repeated shapes, so the
//          steps with prompt tokens get a plan build of their own, 48.5 against 42.0 ms):
//          offline +11.0 / -1.9 / 0.0 % (+1.4 / -6.8 / -6.2 % with one build for every step)
//   static (model.generate, batches of 32) / continuous offline output throughput, forecast over
//   measured: run 3 0.977 (-2.3 %; -5.4 % with one build); run 2 0.873 (-12.7 %: its trace has no repeated shape, so a
//   step on a known shape is taken as a first-time step less its build pause, 21 ms, where the
//   repeated steps of run 3 show 17.5 ms profiled); run 1's static run (29.9 s) is not compared:
//   four later static runs of the same requests took 16.9-20.7 s, their later batches reusing the
//   earlier batches' shapes (13-14 ms steps), run 1's not (its environment is gone).
// Checked: the bounds (TPOT and E2E 10 %, TTFT 20 %, the static/continuous ratio 10 %), the
// ratio of run 2 within 15 %.
namespace {
struct ServeRun {
  std::string dir, trace;
  double wake_us;
  double build_ms;   // the fitted plan build under the profiler
  double log_steps;  // engine steps of the calibration log's requests (its step log's lines)
};

std::vector<ServeRun> serving_runs() {
  return {{kServe, BNECK_SERVING_TRACE, 162, 52.9, 196},
          {kServe + "run2/", serving_trace("run2"), 336, 39.9, 220},
          {kServe + "run3/", serving_trace("run3"), 234, 42.4, 226}};
}

// Calibrates on `run` (from its annotated trace, or `plain`: the same trace with every range
// removed and the traced run's request log) and checks its held-out forecasts.
void check_serving_run(const ServeRun& run, bool plain) {
  INFO(run.dir << (plain ? " (plain profile + log)" : " (annotated)"));
  const LlmConfig llm = load_llm_config(run.dir + "config.json");
  const HwSpec hw = load_target_hw("h200-sxm");
  EngineConfig e = captured_engine();
  StepCostModel m = hardware_step_model(llm, hw);
  Trace t = load_trace(run.trace);
  CalibrationReport rep;
  if (plain) {
    t.ranges.clear();
    const auto traced = load_request_log(run.dir + "cal.jsonl");
    const TraceLog tl{&traced, "cal.jsonl", e};
    rep = calibrate_step_model(t, m, &tl);
    INFO(rep.alignment);
    // Every step of the log's requests found, and (nearly) every token on its replayed step.
    CHECK(static_cast<double>(rep.steps_in_log) == Approx(run.log_steps).margin(1));
    CHECK(static_cast<double>(rep.tokens_agreeing) > 0.98 * static_cast<double>(rep.tokens));
  } else {
    rep = calibrate_step_model(t, m);
  }
  for (const auto& n : m.notes) UNSCOPED_INFO(n);
  CHECK(rep.steps > (plain ? 180 : 300));
  CHECK(m.kernels_per_step ==
        Approx(plain ? 800 : 792)
            .margin(plain ? 40 : 20));  // (the attention form fitted best differs: per sequence in runs 1-2, packed in 3)
  // cuDNN's SDPA plan per new (q, kv) shape, under the profiler.
  CHECK(static_cast<double>(m.shape_build) / 1e6 == Approx(run.build_ms).margin(plain ? 4 : 2));
  fit_host_scale(load_request_log(run.dir + "cal_unprof.jsonl"), e, m, rep, "cal_unprof.jsonl");
  CHECK((m.host_scale > 0.6 && m.host_scale < 1.0));  // the profiler's overhead on the host's work
  e.wake = static_cast<TimeNs>(run.wake_us * 1e3);
  double continuous_offline = 0;
  for (const char* log : {"rate3", "rate10", "graph6", "offline"}) {
    if (!fs::exists(run.dir + log + ".jsonl")) continue;
    auto rs = load_request_log(run.dir + log + ".jsonl");
    EngineConfig ec = e;
    ec.cuda_graph = std::string(log) == "graph6";
    ec.warmup = load_request_log(run.dir + log + "_warmup.jsonl");
    ServeResult r = simulate(rs, ec, m, false);
    Metrics sim = summarize(rs, r.requests, {}), meas = summarize_measured(rs, {});
    INFO(log << ": TTFT " << sim.ttft.median << " / " << meas.ttft.median << ", TPOT " << sim.tpot.median << " / " << meas.tpot.median
             << ", E2E " << sim.e2el.median << " / " << meas.e2el.median);
    // From a plain profile (the batch's preparation separated from the forward by the longest early
    // launch pause): 8 of 9 rows within 10 %; run 1's offline run +11.0 % (E2E): 12 % checked.
    const double bound = plain ? 0.12 : 0.10;
    CHECK(std::abs(sim.tpot.median / meas.tpot.median - 1) < bound);
    CHECK(std::abs(sim.e2el.median / meas.e2el.median - 1) < bound);
    CHECK(std::abs(sim.ttft.median / meas.ttft.median - 1) < 0.20);
    if (std::string(log) == "offline") continuous_offline = sim.output_throughput / meas.output_throughput;
  }
  if (run.dir == kServe) return;  // run 1's static run: see above
  // Static batching (model.generate, batches of 32) on the offline requests: the throughput ratio.
  auto rs = load_request_log(run.dir + "static.jsonl");
  EngineConfig es = e;
  es.policy = Policy::Static;
  es.max_seqs = 32;
  ServeResult r = simulate(rs, es, m, false);
  const double static_ratio = summarize(rs, r.requests, {}).output_throughput / summarize_measured(rs, {}).output_throughput;
  INFO("static throughput sim/measured " << static_ratio << ", continuous " << continuous_offline);
  CHECK(std::abs(static_ratio / continuous_offline - 1) < (run.dir == kServe + "run3/" ? 0.10 : 0.15));
}

}  // namespace

TEST_CASE("serve forecasts transformers' engine on an H200 from one calibration run", "[serve][e2e]") {
  for (const auto& run : serving_runs()) check_serving_run(run, false);
}

TEST_CASE("serve calibrates from a plain profile and the traced run's request log, no annotations", "[serve][e2e]") {
  for (const auto& run : serving_runs()) check_serving_run(run, true);
}

// A capture with no annotation at all (validate/reference/h200/serving/plain/run_serving_plain.sh: the engine as shipped, Nsight
// Systems tracing CUDA only), its log and the same requests unprofiled; held-out runs at other loads
// on the same machine, never looked at while the calibration was written: Poisson 4/s and 8/s, CUDA
// graphs at 6/s. First forecasts (TTFT / TPOT / E2E, forecast vs measured medians): 4/s -20.2 / -15.2
// / -12.6 %, 8/s -15.5 / -8.1 / -7.9 %, CUDA graphs +4.5 / +2.0 / +2.5 %. The 4/s run's measured TPOT
// (69.0 ms) is above the 6/s calibration run's unprofiled one (60.4 ms), which a lighter load cannot
// cause in this engine: the host ran 14 % slower in that run (the same script on another machine of
// the kind measured 54.7 ms at 4/s and 90.4 ms at 8/s). Since the steps with prompt tokens have a
// plan build of their own (62.8 against 38.8 ms for decode-only steps, fitted on this trace's
// first-time steps against its repeated ones): 4/s +4.8 / -7.3 / -2.4 %, 8/s +20.8 / +10.3 / +8.1 %,
// CUDA graphs +7.5 / +2.3 / +3.0 %. Checked: the bounds met, 16 % TPOT and E2E, 25 % TTFT.
TEST_CASE("serve forecasts held-out loads from a capture with no annotation at all", "[serve][e2e]") {
  const std::string dir = kServe + "plain/";
  const LlmConfig llm = load_llm_config(dir + "config.json");
  EngineConfig e = captured_engine();
  StepCostModel m = hardware_step_model(llm, load_target_hw("h200-sxm"));
  const Trace t = load_trace(serving_trace("plain"));
  REQUIRE(t.ranges.empty());
  const auto traced = load_request_log(dir + "cal_plain.jsonl");
  const TraceLog tl{&traced, "cal_plain.jsonl", e};
  CalibrationReport rep = calibrate_step_model(t, m, &tl);
  INFO(rep.alignment);
  CHECK(static_cast<double>(rep.tokens_agreeing) > 0.98 * static_cast<double>(rep.tokens));
  fit_host_scale(load_request_log(dir + "cal_plain_unprof.jsonl"), e, m, rep, "cal_plain_unprof.jsonl");
  for (const auto& n : m.notes) UNSCOPED_INFO(n);
  for (const char* log : {"rate4", "rate8", "graph6"}) {
    auto rs = load_request_log(dir + log + ".jsonl");
    EngineConfig ec = e;
    ec.cuda_graph = std::string(log) == "graph6";
    ec.warmup = load_request_log(dir + log + "_warmup.jsonl");
    ServeResult r = simulate(rs, ec, m, false);
    Metrics sim = summarize(rs, r.requests, {}), meas = summarize_measured(rs, {});
    INFO(log << ": TTFT " << sim.ttft.median << " / " << meas.ttft.median << ", TPOT " << sim.tpot.median << " / " << meas.tpot.median
             << ", E2E " << sim.e2el.median << " / " << meas.e2el.median);
    CHECK(std::abs(sim.tpot.median / meas.tpot.median - 1) < 0.16);
    CHECK(std::abs(sim.e2el.median / meas.e2el.median - 1) < 0.16);
    CHECK(std::abs(sim.ttft.median / meas.ttft.median - 1) < 0.25);
  }
}

// Static batching calibrated from its own engine (validate/reference/h200/serving/static/run_static.sh):
// transformers' model.generate traced by Nsight Systems (CUDA only, nothing annotated) serving 64
// requests in batches of 32, its request log (finish times alone: a batch returns together), the
// same requests unprofiled; held out, on the same machine: 64 other requests in batches of 16, 128
// in batches of 64. The steps end at device-to-host copies, two a step (the sampled tokens, then
// the stopping criteria's flag: a segment of 8 ops joined to its step): 360 found, the last 246
// the log's 2 batches (123 + 123, a prefill each). Forecast vs measured, makespan and median E2E:
// batches of 16: 21.97 / 23.60 s (-6.9 %), 16.77 / 18.32 s (-8.5 %); batches of 64: 14.47 / 15.58 s
// (-7.1 %), 12.70 / 13.92 s (-8.8 %). (Calibrated on the continuous engine instead, run 2's static
// forecast was +14.8 % in makespan, +6.7 % since its per-sequence, per-token and per-KV-token
// preparation, which model.generate does not have, is dropped from static forecasts.)
TEST_CASE("serve calibrates static batching from a plain profile of model.generate and its log", "[serve][e2e]") {
  const std::string dir = kServe + "static/";
  const LlmConfig llm = load_llm_config(dir + "config.json");
  const auto traced = load_request_log(dir + "cal_static.jsonl");
  REQUIRE(static_log(traced));
  REQUIRE(static_batches(traced).size() == 2);
  EngineConfig e;
  e.policy = Policy::Static;
  e.max_seqs = 32;
  e.block_size = 64;
  e.num_blocks = 1024;
  StepCostModel m = hardware_step_model(llm, load_target_hw("h200-sxm"));
  const Trace t = load_trace(serving_trace("static"));
  REQUIRE(t.ranges.empty());
  const TraceLog tl{&traced, "cal_static.jsonl", e};
  CalibrationReport rep = calibrate_step_model(t, m, &tl);
  INFO(rep.alignment);
  CHECK(rep.steps_scheduled == 246);
  CHECK(rep.steps_found == 360);
  CHECK(rep.steps_in_log == 246);
  CHECK(rep.tokens_agreeing == rep.tokens);
  // The same requests' unprofiled log as if it were the traced run's: its batches took 10.65 and
  // 7.20 s, the traced ones 13.45 and 8.56 s, so neither agrees.
  const auto other = load_request_log(dir + "cal_static_unprof.jsonl");
  const TraceLog wrong{&other, "cal_static_unprof.jsonl", e};
  StepCostModel m2 = hardware_step_model(llm, load_target_hw("h200-sxm"));
  CHECK_THROWS_WITH(calibrate_step_model(t, m2, &wrong), Catch::Contains("cal_static_unprof.jsonl: disagrees") &&
                                                             Catch::Contains("imply 246 steps, 360 found") &&
                                                             Catch::Contains("0 of 2 batches agree"));
  // Its first batch alone: 123 steps as the last batch has, but those span 8.53 s where the log's
  // batch took 13.44 s from its arrivals.
  const std::vector<Request> first(traced.begin(), traced.begin() + 32);
  const TraceLog part{&first, "first batch", e};
  CHECK_THROWS_WITH(calibrate_step_model(t, m2, &part), Catch::Contains("imply 123 steps") && Catch::Contains("0 of 1 batches agree"));
  fit_host_scale(load_request_log(dir + "cal_static_unprof.jsonl"), e, m, rep, "cal_static_unprof.jsonl");
  for (const auto& n : m.notes) UNSCOPED_INFO(n);
  CHECK((m.host_scale > 0.6 && m.host_scale < 1.0));
  for (const auto& [log, batch] : std::vector<std::pair<std::string, std::int64_t>>{{"static16", 16}, {"static64", 64}}) {
    const auto rs = load_request_log(dir + log + ".jsonl");
    EngineConfig es = e;
    es.max_seqs = batch;
    const ServeResult r = simulate(rs, es, m, false);
    const Metrics sim = summarize(rs, r.requests, {}), meas = summarize_measured(rs, {});
    INFO(log << ": makespan " << sim.duration_s << " / " << meas.duration_s << " s, median E2E " << sim.e2el.median << " / "
             << meas.e2el.median << " ms");
    CHECK(std::abs(sim.duration_s / meas.duration_s - 1) < 0.10);
    CHECK(std::abs(sim.e2el.median / meas.e2el.median - 1) < 0.10);
  }
}

// Prefix caching against a real engine's block sharing (validate/reference/h200/serving/prefix/run_prefix.sh:
// transformers' continuous batching with allow_block_sharing, prompts starting with one of 4
// shared 512-token prefixes, hash ids per 64 tokens): the scheduler replayed over the plain
// profile's steps puts 2,926 of 2,926 tokens on their measured step with the prefix cache, 288
// (9.8 %) without, and that alignment error names --prefix-caching. The same requests unprofiled
// (the log the host speed is fitted to, so not held out): median TTFT 206.5 / 188.9 ms, TPOT
// 96.1 / 95.0 ms, E2E 7.093 / 7.061 s; 59.5 % of the prompt tokens found cached. (TTFT was 189.0
// before the steps with prompt tokens got a plan build of their own, 84.1 ms against 72.5 fitted
// on this trace: the prompt steps of this log's requests ran faster than the trace's.)
TEST_CASE("serve's prefix cache schedules as a real engine's block sharing does", "[serve][e2e]") {
  const std::string dir = kServe + "prefix/";
  const LlmConfig llm = load_llm_config(dir + "config.json");
  EngineConfig e = captured_engine();
  e.prefix_hash_block = 64;
  const Trace t = load_trace(serving_trace("prefix"));
  const auto traced = load_request_log(dir + "cal_prefix.jsonl");
  StepCostModel m = hardware_step_model(llm, load_target_hw("h200-sxm"));
  const TraceLog without{&traced, "cal_prefix.jsonl", e};
  CHECK_THROWS_WITH(calibrate_step_model(t, m, &without), Catch::Contains("disagrees") && Catch::Contains("--prefix-caching"));
  e.prefix_caching = true;
  const TraceLog tl{&traced, "cal_prefix.jsonl", e};
  CalibrationReport rep = calibrate_step_model(t, m, &tl);
  INFO(rep.alignment);
  CHECK(rep.tokens == 2926);
  CHECK(rep.tokens_agreeing == rep.tokens);
  const auto rs = load_request_log(dir + "cal_prefix_unprof.jsonl");
  fit_host_scale(rs, e, m, rep, "cal_prefix_unprof.jsonl");
  EngineConfig ec = e;
  ec.warmup = load_request_log(dir + "cal_prefix_unprof_warmup.jsonl");
  const ServeResult r = simulate(rs, ec, m, false);
  const Metrics sim = summarize(rs, r.requests, {}), meas = summarize_measured(rs, {});
  CHECK(std::abs(sim.ttft.median / meas.ttft.median - 1) < 0.10);
  CHECK(std::abs(sim.e2el.median / meas.e2el.median - 1) < 0.05);
  CHECK(static_cast<double>(r.prefix_hit_tokens) / static_cast<double>(r.prompt_tokens) == Approx(0.595).margin(0.002));
}

TEST_CASE("serve calibration says in one line when a plain profile and a log do not agree", "[serve][e2e]") {
  const LlmConfig llm = load_llm_config(kServe + "config.json");
  StepCostModel m = hardware_step_model(llm, load_target_hw("h200-sxm"));
  Trace t = load_trace(BNECK_SERVING_TRACE);
  t.ranges.clear();
  EngineConfig e = captured_engine();
  // Without a log: the steps are found, their batches cannot be.
  CHECK_THROWS_WITH(calibrate_step_model(t, m), Catch::Contains("324 steps found") && Catch::Contains("--trace-log"));
  // The log of another run (the same requests served unprofiled, its steps 40 % shorter).
  const auto other = load_request_log(kServe + "cal_unprof.jsonl");
  const TraceLog wrong_run{&other, "cal_unprof.jsonl", e};
  CHECK_THROWS_WITH(calibrate_step_model(t, m, &wrong_run),
                    Catch::Contains("cal_unprof.jsonl: disagrees") && Catch::Contains("the log of the traced run"));
  // The traced run's log with another token budget: the scheduler's batches do not match the steps.
  const auto traced = load_request_log(kServe + "cal.jsonl");
  EngineConfig small = e;
  small.max_batch_tokens = 128;
  const TraceLog wrong_engine{&traced, "cal.jsonl", small};
  CHECK_THROWS_WITH(calibrate_step_model(t, m, &wrong_engine), Catch::Contains("disagrees") && Catch::Contains("--max-batch-tokens"));
}

// The intervals of serving forecasts (models/serving/error_bars.hpp) on the runs its fit errors
// leave out (runs 1 and 2 are the fit): the plain capture's held-out loads with their repeats
// (8 runs), run 3's offline run, loads2's five runs (its own calibration) and the static engine's
// two held-out batch sizes, and loads3's, loads4's, loads5's and loads6's three runs and static batches
// of 16 (four H100 machines). At this commit, of 90 medians (TTFT, TPOT, E2E; static: E2E and makespan)
// 86 inside (96 %; loads6's static makespan, +89.8 %, the fourth outside); of the 79 before loads6,
// 76 inside, median half-width 29.2 % (without the calibration run's own pace in the host's
// term: 74 inside, 28.1 %; loads5's 8/s TPOT and E2E outside); of the 68 before loads5, 65 inside,
// median half-width 24.3 %; of the 57 before loads4, 54 inside (95 %), median half-width 21.9 % (53 at 19.8 %
// with runs 1-2's errors from the library, without the forward's assumed per-sequence host work;
// before loads3: 42 of 46 at 16.0 %); loads2's 15, loads3's, loads4's and loads5's 11 each all inside. The 3 outside: the second 8/s run's
// TTFT and TPOT (+35.8, +21.4 %: its host ran fastest, TPOT 59.6 ms where the three 8/s runs measured 64.7, 59.6 and 79.1) and the first
// 4/s repeat's TTFT (+33.8 %). Each metric takes the host's run-to-run spread of its own repeats (TTFT's 1.7 times TPOT's); with TPOT's for
// all three, the 31 before loads2: 26 inside at 15.7 % (TTFT of four plain runs outside: +20.8, +31.2, -15.7, +36.6 %). With one plan build
// for every step (before the steps with prompt tokens had their own), 22 of 31 inside, median half-width 15.1 %: the forecasts sat at the
// fast end of the runs, TPOT -15 .. -25 % on the slow ones. Checked: at least 70 % inside, each interval around its forecast.
TEST_CASE("serve's 80 % intervals on held-out runs", "[serve][e2e][error_bar]") {
  std::size_t inside = 0, all = 0;
  std::vector<double> half;
  auto check = [&](const char* what, double sim, const std::array<double, 2>& bar, double meas) {
    INFO(what << ": forecast " << sim << ", interval " << bar[0] << " .. " << bar[1] << ", measured " << meas);
    CHECK(bar[0] < sim);
    CHECK(sim < bar[1]);
    ++all;
    inside += bar[0] <= meas && meas <= bar[1];
    half.push_back((bar[1] - bar[0]) / 2 / sim);
  };
  const std::string plain = kServe + "plain/";
  for (const auto& [log, base] : std::vector<std::pair<std::string, std::string>>{{"rate4", "rate4"},
                                                                                  {"rate8", "rate8"},
                                                                                  {"graph6", "graph6"},
                                                                                  {"repeats/rate4.r1", "rate4"},
                                                                                  {"repeats/rate4.r2", "rate4"},
                                                                                  {"repeats/rate8.r1", "rate8"},
                                                                                  {"repeats/rate8.r2", "rate8"},
                                                                                  {"repeats/graph6.r1", "graph6"}}) {
    ServeJob j = calibrated_job(plain, plain + log + ".jsonl", plain + base + "_warmup.jsonl", serving_trace("plain"),
                                plain + "cal_plain.jsonl", plain + "cal_plain_unprof.jsonl");
    j.engine.cuda_graph = base == "graph6";
    const ServeOutcome o = run_serving(j);
    INFO(log << ": " << o.bars.basis.front());
    REQUIRE(o.bars.valid);
    check("TTFT", o.simulated.ttft.median, o.bars.ttft_ms, o.measured.ttft.median);
    check("TPOT", o.simulated.tpot.median, o.bars.tpot_ms, o.measured.tpot.median);
    check("E2E", o.simulated.e2el.median, o.bars.e2el_ms, o.measured.e2el.median);
  }
  {
    const std::string r3 = kServe + "run3/";
    ServeJob j = calibrated_job(r3, r3 + "offline.jsonl", r3 + "offline_warmup.jsonl", serving_trace("run3"), "", r3 + "cal_unprof.jsonl");
    j.engine.wake = 234'000;
    const ServeOutcome o = run_serving(j);
    check("TTFT", o.simulated.ttft.median, o.bars.ttft_ms, o.measured.ttft.median);
    check("TPOT", o.simulated.tpot.median, o.bars.tpot_ms, o.measured.tpot.median);
    check("E2E", o.simulated.e2el.median, o.bars.e2el_ms, o.measured.e2el.median);
  }
  // validate/reference/h200/serving/loads2: its own calibration trace and unprofiled log, five
  // held-out runs (5/s, 12/s, 32 and 96 at once, 48 at once with CUDA graphs).
  const std::string l2 = std::string(BNECK_TEST_DATA) + "/serving/loads2/";
  for (const std::string log : {"rate5", "rate12", "burst32", "burst96", "burst48_graph"}) {
    ServeJob j =
        calibrated_job(l2, l2 + log + ".jsonl", l2 + log + "_warmup.jsonl", l2 + "cal.sqlite", l2 + "cal.jsonl", l2 + "cal_unprof.jsonl");
    j.engine.cuda_graph = log == "burst48_graph";
    const ServeOutcome o = run_serving(j);
    INFO(log);
    check("TTFT", o.simulated.ttft.median, o.bars.ttft_ms, o.measured.ttft.median);
    check("TPOT", o.simulated.tpot.median, o.bars.tpot_ms, o.measured.tpot.median);
    check("E2E", o.simulated.e2el.median, o.bars.e2el_ms, o.measured.e2el.median);
  }
  const std::string st = kServe + "static/";
  for (const auto& [log, batch] : std::vector<std::pair<std::string, std::int64_t>>{{"static16", 16}, {"static64", 64}}) {
    ServeJob j =
        calibrated_job(st, st + log + ".jsonl", "", serving_trace("static"), st + "cal_static.jsonl", st + "cal_static_unprof.jsonl");
    j.engine.policy = Policy::Static;
    j.engine.max_seqs = batch;
    const ServeOutcome o = run_serving(j);
    check("E2E", o.simulated.e2el.median, o.bars.e2el_ms, o.measured.e2el.median);
    check("makespan", o.simulated.duration_s, o.bars.duration_s, o.measured.duration_s);
  }
  // validate/reference/h200/serving/loads3, loads4, loads5 and loads6 (four H100 machines, each its own
  // plain profile at 2/s): three held-out runs and the static batches of 16 from the continuous
  // engine's calibration.
  for (const std::string set : {"loads3", "loads4", "loads5", "loads6"})
    for (const std::string log : {"rate8", "burst64", "burst64_graph", "static16"}) {
      const std::string l3 = std::string(BNECK_TEST_DATA) + "/serving/" + set + "/";
      ServeJob j = calibrated_job(l3, l3 + log + ".jsonl", log == "static16" ? "" : l3 + log + "_warmup.jsonl", l3 + "cal.sqlite",
                                  l3 + "cal.jsonl", l3 + "cal_unprof.jsonl");
      j.hw = "h100-sxm";
      j.engine.cuda_graph = log == "burst64_graph";
      if (log == "static16") {
        j.engine.policy = Policy::Static;
        j.engine.max_seqs = 16;
        j.trace_max_seqs = 64;
      }
      const ServeOutcome o = run_serving(j);
      INFO(set << " " << log);
      if (log != "static16") {
        check("TTFT", o.simulated.ttft.median, o.bars.ttft_ms, o.measured.ttft.median);
        check("TPOT", o.simulated.tpot.median, o.bars.tpot_ms, o.measured.tpot.median);
      } else {
        check("makespan", o.simulated.duration_s, o.bars.duration_s, o.measured.duration_s);
      }
      check("E2E", o.simulated.e2el.median, o.bars.e2el_ms, o.measured.e2el.median);
    }
  INFO(inside << " of " << all << " inside, median half-width " << median(half));
  CHECK(all == 90);
  CHECK(static_cast<double>(inside) / static_cast<double>(all) >= 0.7);
}

// Another batch limit than the traced engine's (validate/reference/h200/serving/loads: 64 requests
// at once at 16 sequences a step, measured TPOT 32.11 ms, E2E 9,510 ms), calibrated on the plain
// capture (its engine ran 64 a step) with this machine's unprofiled calibration log: the traced
// engine's limit is --trace-max-seqs; without it the traced run's log is aligned with the
// forecast's 16 and disagrees. Forecast at this commit: TPOT 35.42 ms (+10.3 %), E2E 8,855 ms (-6.9 %);
// before the forward's per-sequence host work was assumed (100 us a sequence: 16 a step here
// against the calibration log's 1-13), 34.38 ms (+7.1 %) and 8,709 ms (-8.4 %); before steps with
// prompt tokens had their own plan build, 33.36 ms (+3.9 %) and 7,940 ms (-16.5 %). Checked: TPOT
// within 12 %, E2E within 20 %, the measured TPOT inside the interval.
TEST_CASE("serve forecasts another batch limit than the traced engine's (--trace-max-seqs)", "[serve][e2e]") {
  const std::string plain = kServe + "plain/", loads = std::string(BNECK_TEST_DATA) + "/serving/loads/";
  ServeJob j = calibrated_job(plain, loads + "burst64_seqs16.jsonl", loads + "burst64_seqs16_warmup.jsonl", serving_trace("plain"),
                              plain + "cal_plain.jsonl", loads + "cal_unprof.jsonl");
  j.engine.max_seqs = 16;
  CHECK_THROWS_WITH(run_serving(j), Catch::Contains("disagrees"));
  j.trace_max_seqs = 64;
  const ServeOutcome o = run_serving(j);
  INFO("TPOT " << o.simulated.tpot.median << " / " << o.measured.tpot.median << ", E2E " << o.simulated.e2el.median << " / "
               << o.measured.e2el.median);
  CHECK(std::abs(o.simulated.tpot.median / o.measured.tpot.median - 1) < 0.12);
  CHECK(std::abs(o.simulated.e2el.median / o.measured.e2el.median - 1) < 0.20);
  CHECK((o.bars.tpot_ms[0] <= o.measured.tpot.median && o.measured.tpot.median <= o.bars.tpot_ms[1]));
  // The host's work per step measured on the calibration log's 155 back-to-back steps (1-13
  // sequences, 1-512 query tokens; fit_host_steps): at this commit x 1.14, no per-token and no
  // per-sequence slope, a median step error of 18 % (the plan builds' cost varies between 30 and
  // 80 ms from one stretch of steps to the next). Before the steps with prompt tokens had a plan
  // build of their own: x 1.16, 6.7 us per query token standing in for it, a median error of 23 %.
  REQUIRE(o.calibration.host_fit.has_value());
  const HostStepFit& f = *o.calibration.host_fit;
  CHECK(f.agreement > 0.99);
  CHECK(f.used > 150);
  CHECK(f.scale == Approx(1.14).margin(0.05));
  CHECK(f.per_token_ns / 1e3 < 1.5);
  CHECK(f.per_seq_ns / 1e3 < 20);
  CHECK(f.median_abs_log_error < 0.2);
}

// CUDA graphs at a load the calibration never saw (validate/reference/h200/serving/loads: 64
// requests at once, the engine capturing a graph for each new padded shape), calibrated on the plain
// capture with that machine's unprofiled calibration log. The request log's token times give each
// measured step: three took 97-113 ms against 27-30 around them, steps 33, 68 and 69 (0-based), the
// captures: the cached tokens read crossing 16,384 (past 16,896 at step 33), then the query tokens
// padded to 192 and to 64 as the prompts run out. The KV read pads its cached tokens, not the step's
// own: padding both (as before) captured at step 32 and again at 65 (33,217 tokens read) and gave
// TPOT +16.1 %. At this commit TPOT 32.68 vs 29.44 ms (+11.0 %), E2E 2,905 vs 2,628 ms (+10.5 %);
// before the forward's per-sequence host work was assumed, +10.0 and +9.8 %.
TEST_CASE("serve with CUDA graphs captures a new padded shape where the engine did (64 at once)", "[serve][e2e]") {
  const std::string plain = kServe + "plain/", loads = std::string(BNECK_TEST_DATA) + "/serving/loads/";
  ServeJob j = calibrated_job(plain, loads + "burst64_graph.jsonl", loads + "burst64_graph_warmup.jsonl", serving_trace("plain"),
                              plain + "cal_plain.jsonl", loads + "cal_unprof.jsonl");
  j.engine.cuda_graph = true;
  j.keep_steps = true;
  const ServeOutcome o = run_serving(j);
  std::vector<std::size_t> captured;
  for (std::size_t i = 0; i < o.result.steps.size(); ++i)
    if (o.result.steps[i].time.build > 0) captured.push_back(i);
  CHECK(captured == std::vector<std::size_t>{33, 68, 69});
  INFO("TPOT " << o.simulated.tpot.median << " / " << o.measured.tpot.median << ", E2E " << o.simulated.e2el.median << " / "
               << o.measured.e2el.median);
  CHECK(std::abs(o.simulated.tpot.median / o.measured.tpot.median - 1) < 0.12);
  CHECK(std::abs(o.simulated.e2el.median / o.measured.e2el.median - 1) < 0.12);
}

// validate/reference/h200/serving/loads2 (run_loads2.sh, one H200 machine, 2026-12-05): a plain
// Nsight Systems profile of 24 requests at 3/s whose warm-up was served twice, so the whole
// warm-up repeats: structure recognition's iterations are those two repeats (59,899 device ops
// each) and the engine's steps the loop inside them (837 ops x 55 each). The steps are the
// segments up to each device-to-host copy, checked against that inner loop: 298 found, the log's
// 153 aligned, every token on its step. (Checked against the iterations alone, no step was found.)
// Held out, made after the calibration was written, forecast vs measured medians (TTFT / TPOT /
// E2E): 5/s -5.8 / -7.4 / -7.7 %, 12/s -11.1 / +1.0 / +1.6 %, 48 at once with CUDA graphs +2.5 /
// +3.4 / +2.4 %, 32 at once -20.2 / -12.6 / -13.6 %, 96 at once -7.8 / -11.4 / -8.2 % (offline
// batches, 2-5x the calibration's requests in flight: the host's work per sequence it did not see;
// their intervals hold them). Checked: the first three within 20 / 10 / 10 %, the two offline
// batches within 25 / 20 / 20 %.
TEST_CASE("serve calibrates from a plain profile whose warm-up repeats, and forecasts held-out loads", "[serve][e2e]") {
  const std::string l2 = std::string(BNECK_TEST_DATA) + "/serving/loads2/";
  const Trace t = load_trace(l2 + "cal.sqlite");
  std::string how;
  const auto steps = calibration::engine_steps(t, how);
  INFO(how);
  CHECK(steps.size() == 298);
  for (const auto& [log, ttft, tpot] : std::vector<std::tuple<std::string, double, double>>{
           {"rate5", 0.2, 0.1}, {"rate12", 0.2, 0.1}, {"burst48_graph", 0.2, 0.1}, {"burst32", 0.25, 0.2}, {"burst96", 0.25, 0.2}}) {
    ServeJob j =
        calibrated_job(l2, l2 + log + ".jsonl", l2 + log + "_warmup.jsonl", l2 + "cal.sqlite", l2 + "cal.jsonl", l2 + "cal_unprof.jsonl");
    j.engine.cuda_graph = log == "burst48_graph";
    const ServeOutcome o = run_serving(j);
    INFO(log << ": " << o.calibration.alignment << "; TTFT " << o.simulated.ttft.median << " / " << o.measured.ttft.median << ", TPOT "
             << o.simulated.tpot.median << " / " << o.measured.tpot.median << ", E2E " << o.simulated.e2el.median << " / "
             << o.measured.e2el.median);
    CHECK(o.calibration.tokens_agreeing == o.calibration.tokens);
    CHECK(std::abs(o.simulated.ttft.median / o.measured.ttft.median - 1) < ttft);
    CHECK(std::abs(o.simulated.tpot.median / o.measured.tpot.median - 1) < tpot);
    CHECK(std::abs(o.simulated.e2el.median / o.measured.e2el.median - 1) < tpot);
  }
}

namespace {

// One capture's host-model rows (loads3 and loads4: a plain profile of 16 requests at 2/s on an
// H100): each held-out continuous run within its bounds and inside its 80 % intervals, every traced
// token on the step the scheduler gives it; then model.generate's static batches of 16 forecast
// from the continuous engine's calibration, its batch-growing terms dropped and said.
struct HostModelRow {
  std::string log;
  double ttft, tpot, e2e;
};
// What the static batches and the calibration are held to beside the rows.
struct HostModelChecks {
  double makespan = 0, static_e2e = 0;  // their errors' bounds
  bool makespan_inside = true;          // the makespan inside its interval
  // The calibration run's own pace (fit_host_steps: its windowed medians' 10th and 90th
  // percentiles over the run's median), checked on the first row's calibration where given.
  std::optional<std::pair<double, double>> pace;
};

void host_model_rows(const std::string& dir, const std::vector<HostModelRow>& rows, const HostModelChecks& c) {
  for (const HostModelRow& row : rows) {
    ServeJob j = calibrated_job(dir, dir + row.log + ".jsonl", dir + row.log + "_warmup.jsonl", dir + "cal.sqlite", dir + "cal.jsonl",
                                dir + "cal_unprof.jsonl");
    j.hw = "h100-sxm";
    j.engine.cuda_graph = row.log == "burst64_graph";
    const ServeOutcome o = run_serving(j);
    INFO(dir << row.log << ": TTFT " << o.simulated.ttft.median << " / " << o.measured.ttft.median << ", TPOT " << o.simulated.tpot.median
             << " / " << o.measured.tpot.median << ", E2E " << o.simulated.e2el.median << " / " << o.measured.e2el.median);
    CHECK(o.calibration.tokens > 0);
    CHECK(o.calibration.tokens_agreeing == o.calibration.tokens);
    if (c.pace && &row == &rows.front()) {
      REQUIRE(o.calibration.host_fit);
      CHECK(o.calibration.host_fit->pace_lo == Approx(c.pace->first).margin(0.001));
      CHECK(o.calibration.host_fit->pace_hi == Approx(c.pace->second).margin(0.001));
    }
    CHECK(std::abs(o.simulated.ttft.median / o.measured.ttft.median - 1) < row.ttft);
    CHECK(std::abs(o.simulated.tpot.median / o.measured.tpot.median - 1) < row.tpot);
    CHECK(std::abs(o.simulated.e2el.median / o.measured.e2el.median - 1) < row.e2e);
    CHECK((o.bars.ttft_ms[0] <= o.measured.ttft.median && o.measured.ttft.median <= o.bars.ttft_ms[1]));
    CHECK((o.bars.tpot_ms[0] <= o.measured.tpot.median && o.measured.tpot.median <= o.bars.tpot_ms[1]));
    CHECK((o.bars.e2el_ms[0] <= o.measured.e2el.median && o.measured.e2el.median <= o.bars.e2el_ms[1]));
  }
  ServeJob j = calibrated_job(dir, dir + "static16.jsonl", "", dir + "cal.sqlite", dir + "cal.jsonl", dir + "cal_unprof.jsonl");
  j.hw = "h100-sxm";
  j.engine.policy = Policy::Static;
  j.engine.max_seqs = 16;
  j.trace_max_seqs = 64;
  const ServeOutcome o = run_serving(j);
  INFO(dir << "static16: makespan " << o.simulated.duration_s << " / " << o.measured.duration_s << " s, E2E " << o.simulated.e2el.median
           << " / " << o.measured.e2el.median);
  // The continuous engine's terms that grow with the batch are not model.generate's: dropped, said.
  CHECK(o.model.prepare[1] == 0);
  CHECK(o.model.prepare[2] == 0);
  CHECK(o.model.prepare[3] == 0);
  CHECK(o.model.update[1] == 0);
  CHECK(o.model.prepare[0] > 0);
  CHECK(std::any_of(o.model.notes.begin(), o.model.notes.end(), [](const std::string& n) { return n.rfind("static batching:", 0) == 0; }));
  CHECK(std::abs(o.simulated.duration_s / o.measured.duration_s - 1) < c.makespan);
  if (c.makespan_inside) CHECK((o.bars.duration_s[0] <= o.measured.duration_s && o.measured.duration_s <= o.bars.duration_s[1]));
  CHECK(std::abs(o.simulated.e2el.median / o.measured.e2el.median - 1) < c.static_e2e);
  CHECK((o.bars.e2el_ms[0] <= o.measured.e2el.median && o.measured.e2el.median <= o.bars.e2el_ms[1]));
}

}  // namespace

// validate/reference/h200/serving/loads3 (run_loads3.sh, one NVIDIA H100 80GB HBM3 machine,
// 2026-12-05): the host-model issue's serving rows. A plain Nsight Systems profile of 16 requests at
// Poisson 2/s (512 -> 64 tokens; 1-10 sequences a step), the same requests unprofiled; held out:
// Poisson 8/s (32 requests), 64 at once, 64 at once with CUDA graphs, model.generate in static
// batches of 16. Forecast vs measured medians at this commit (TTFT / TPOT / E2E): 8/s -15.8 /
// -11.2 / -11.7 %, 64 at once +0.2 / -18.1 / -13.3 %, with CUDA graphs -4.2 / -5.7 / -5.4 % (+25.1 /
// -4.6 / +2.0 % before the attention pairs a graph's padding adds were priced at the roofline: this
// calibration fitted the eager steps' attention at 43x the roofline);
// static batches from the continuous engine's calibration: makespan +10.2 %, median E2E +4.3 %
// (+15.3 / +8.3 % with the continuous engine's per-sequence, per-token and per-KV-token terms).
// (Without the forward's per-sequence host work, which was chosen on other captures' runs and not
// on these: 8/s -18.4 / -13.4 / -13.8 %, 64 at once -1.9 / -19.6 / -15.3 %, CUDA graphs +24.8 /
// -5.6 / +1.2 %.) The engine's host ran slower as the batch grew (its steps 56-60 ms at the
// calibration's load, 94-97 ms with 40-64 sequences, 62-65 ms again in the drain), more than the
// calibration's 1-10 sequences show. Checked: each within the error it has here plus about 3
// points, and every measured median inside its 80 % interval.
TEST_CASE("serve forecasts the host-model issue's held-out serving rows from a plain profile at 2/s", "[serve][e2e]") {
  host_model_rows(std::string(BNECK_TEST_DATA) + "/serving/loads3/",
                  {{"rate8", 0.19, 0.14, 0.15}, {"burst64", 0.05, 0.21, 0.17}, {"burst64_graph", 0.08, 0.09, 0.09}},
                  {0.13, 0.07, true, std::nullopt});
}

// validate/reference/h200/serving/loads4 (run_loads4.sh, a second NVIDIA H100 80GB HBM3 machine,
// 2026-12-05): loads3's rows again, every mechanism frozen before the capture, each unprofiled
// continuous run with its engine steps and an interpreter probe logged. Forecast vs measured medians
// (TTFT / TPOT / E2E): 8/s -16.6 / -7.8 / -8.3 %, 64 at once -25.2 / -22.5 / -23.9 %, with CUDA graphs
// -25.3 / -17.9 / -20.2 %; static batches of 16 from the continuous engine's calibration: makespan
// +0.9 %, median E2E -7.1 %. The 64-at-once runs miss the bounds: their decode steps grew 0.47 ms a
// sequence (eager) and 0.56 ms (CUDA graphs) over 1-59 sequences at one steady host pace (probe
// 1,110-1,170 us throughout), beyond the calibration's 1-12 sequences, whose steps switched
// between two paces (probe 650 / 1,160 us, steps 68 / 81 ms medians) with no steal time, no other
// busy CPU and no migration of the engine thread (the machine's per-CPU counters, sampled twice a
// second). Checked: each within its error here plus about 3 points, and every measured median
// inside its 80 % interval.
TEST_CASE("serve on a second machine's capture of the same rows: held-out errors and intervals", "[serve][e2e]") {
  host_model_rows(std::string(BNECK_TEST_DATA) + "/serving/loads4/",
                  {{"rate8", 0.20, 0.11, 0.12}, {"burst64", 0.28, 0.26, 0.27}, {"burst64_graph", 0.29, 0.21, 0.24}},
                  {0.04, 0.10, true, std::nullopt});
}

// validate/reference/h200/serving/loads5 (run_loads4.sh again, a third NVIDIA H100 80GB HBM3
// machine, 2026-12-06, captured before the calibration's pace entered the intervals): the same
// rows. Here the calibration run's host sat at the slow of its two paces for most of its steps
// (interpreter probe median 910 us, 611 at the 10th percentile, 1,080 at the 90th; its steps against
// the step model, medians over stretches of 15 steps, -21 .. +24 % of the run's) while the 8/s and
// 64-at-once runs held the fast one (probe medians 616 and 637 us): the forecasts come out slow,
// 8/s +31.1 / +26.1 / +26.3 % (TTFT / TPOT / E2E), 64 at once +36.4 / +10.2 / +17.7 %, with CUDA
// graphs (probe 1,034 us) -18.2 / -10.8 / -13.0 %; static batches of 16 makespan +56.9 %, median
// E2E +50.7 % (6.04 s measured: 23.6 ms a decode step where loads4's took 32.9). Before the
// calibration's own pace widened the host-pace term (+-13 % -> +-27 % here: the fast side, 21.2 % shorter steps, is a forecast 26.9 %
// long), the 8/s TPOT and E2E medians fell just outside their intervals (66.5 against 66.8 .. 105.0 ms; 4,344 against 4,374 .. 6,816 ms).
// Checked: each within its error here plus about 3 points, every median inside its 80 % interval.
TEST_CASE("serve on a third machine's capture of the same rows: the calibration's own pace in the intervals", "[serve][e2e]") {
  const std::string d = std::string(BNECK_TEST_DATA) + "/serving/loads5/";
  // The calibration's pace: 186 steps from the log's token times, 185 back to back; the windowed
  // medians' 10th and 90th percentiles -21.2 and +24.1 % of the run's median.
  host_model_rows(d, {{"rate8", 0.34, 0.29, 0.30}, {"burst64", 0.40, 0.14, 0.21}, {"burst64_graph", 0.22, 0.14, 0.16}},
                  {0.60, 0.54, true, std::pair{-0.212, 0.241}});
}

// validate/reference/h200/serving/loads6 (run_loads4.sh again, a fourth NVIDIA H100 80GB HBM3
// machine, 2026-12-07, forecast at first sight with commit df21e20): a third of the calibration's
// decode steps at the slow pace (probe over 750 us: 75.9 ms against 51.3), the held-out runs mostly
// at the fast one, as on loads5's machine: 8/s +27.7 / +27.3 / +26.5 % (TTFT / TPOT / E2E), 64 at
// once +18.5 / +14.2 / +16.4 %, with CUDA graphs +0.7 / +7.9 / +5.4 %, every median inside its 80 %
// interval (the 8/s TPOT at the edge: 61.2 against 61.0 .. 100.1 ms). Static batches of 16: makespan
// +89.8 %, outside its interval (5.23 s against 5.51 .. 15.21), median E2E +74.8 % inside: the
// first batch's shape builds are right (38.7 ms a first-time step measured, 37.6 calibrated), the
// repeated steps are the continuous engine's forward (27.2 ms) where model.generate's took 10.7
// (the README there). Checked: each within its error here plus about 3 points, every median inside
// its interval but the static makespan, the calibration's pace -13.6 .. +12.3 %.
TEST_CASE("serve on a fourth machine's capture of the same rows: first sight", "[serve][e2e]") {
  const std::string d = std::string(BNECK_TEST_DATA) + "/serving/loads6/";
  host_model_rows(d, {{"rate8", 0.31, 0.31, 0.30}, {"burst64", 0.22, 0.18, 0.20}, {"burst64_graph", 0.04, 0.11, 0.09}},
                  {0.93, 0.78, false, std::pair{-0.136, 0.123}});
}
