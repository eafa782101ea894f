#include "tools/views/serve_view.hpp"

#include <CLI/CLI.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "hw/spec.hpp"
#include "models/serving/calibrate.hpp"
#include "models/serving/pipeline.hpp"
#include "sim/base/error.hpp"
#include "tools/output.hpp"
#include "traces/importer.hpp"

namespace bneck {

void add_serve_options(CLI::App& app, ServeArgs& a) {
  app.add_option("--model", a.model_path, "a Hugging Face config.json (hidden_size, layers, heads, ...)")->required();
  app.add_option("--hw", a.hw_name, "the GPU: a preset (bneck hw list) or a spec file")->required();
  app.add_option("--requests", a.requests_path, "request log, JSONL: id, arrival_s, prompt_tokens, output_tokens [, token_times_s ...]");
  app.add_option("--rate", a.rate, "generate requests: arrivals per second (0: all at t = 0)");
  app.add_option("--num", a.num, "generate requests: how many");
  app.add_option("--prompt-len", a.prompt_len, "generated prompt lengths: N, LO..HI (uniform) or lognormal:MEDIAN,SIGMA")
      ->capture_default_str();
  app.add_option("--output-len", a.output_len, "generated output lengths: N, LO..HI or lognormal:MEDIAN,SIGMA")->capture_default_str();
  app.add_option("--shared-prefix", a.shared_prefix,
                 "generated prompts start with one of GROUPS shared prefixes of LEN tokens (LEN[:GROUPS]; hash ids for --prefix-caching)");
  app.add_option("--arrival", a.arrival, "generated arrivals: poisson or gamma:CV")->capture_default_str();
  app.add_option("--seed", a.seed, "generator seed")->capture_default_str();
  app.add_option("--calibrate", a.calib_trace, "a trace (nsys, Kineto) of the real engine: a plain profile, or its steps marked (README)");
  app.add_option(
      "--step-costs", a.step_costs,
      "list the engine steps a trace names (vLLM, SGLang) with their engine, mode, shape and measured cost, beside the model's GPU time");
  app.add_option("--trace-log", a.trace_log,
                 "the request log of the traced run: the batches of a plain profile's steps (default: --calibrate-log)");
  app.add_option("--calibrate-log", a.calib_log,
                 "request logs (comma-separated) whose inter-token latency sets the host's speed: the traced run's, or its requests served "
                 "unprofiled (several runs: the median of their scales)");
  app.add_option("--warmup-requests", a.warmup_path,
                 "requests the engine served before these (its warm-up), JSONL: their step shapes are built already");
  app.add_option("--engine-wake", a.wake, "an idle engine starts a step this long after the request that wakes it ('200 us'; default 0)");
  app.add_option("--policy", a.policy, "continuous | static")->check(CLI::IsMember({"continuous", "static"}))->capture_default_str();
  app.add_option("--max-batch-tokens", a.max_batch_tokens, "tokens per step (the scheduler's budget)")->capture_default_str();
  app.add_option("--max-seqs", a.max_seqs, "sequences per step (static: the batch size)")->capture_default_str();
  app.add_option("--trace-max-seqs", a.trace_max_seqs,
                 "the traced engine's sequences per step, where the forecast's --max-seqs differs (default: --max-seqs)");
  app.add_option("--block-size", a.block_size, "KV-cache block, tokens")->capture_default_str();
  app.add_option("--num-blocks", a.num_blocks, "KV-cache blocks (default: from --kv-memory)");
  app.add_option("--kv-memory", a.kv_memory, "memory for the KV cache ('60 GiB'; default: 90 % of the GPU less weights and activations)");
  app.add_option("--kv-watermark", a.watermark, "fraction of blocks kept free when admitting requests")->capture_default_str();
  app.add_option("--chunked-prefill", a.chunked, "most prompt tokens of one request per step (0: the token budget)")->capture_default_str();
  app.add_flag("--prefix-caching", a.prefix_caching,
               "reuse cached prompt blocks shared with earlier requests (the log's hash_ids; vLLM's automatic prefix caching)");
  app.add_option("--prefix-hash-block", a.prefix_hash_block, "prompt tokens one of the log's hash_ids covers (Mooncake's traces: 512)")
      ->capture_default_str();
  app.add_flag("--cuda-graph", a.cuda_graph, "the forward runs as a CUDA graph on a padded shape");
  app.add_option("--graph-q-pad", a.q_pad, "CUDA graphs: query tokens padded to a multiple of N")->capture_default_str();
  app.add_option("--graph-kv-pad", a.kv_pad, "CUDA graphs: cached KV tokens read padded to a multiple of N (0: none)")
      ->capture_default_str();
  app.add_option("--slo-ttft", a.slo_ttft, "goodput: time to first token at most ('200 ms')");
  app.add_option("--slo-tpot", a.slo_tpot, "goodput: time per output token at most ('50 ms')");
  app.add_option("--rates", a.rates, "sweep these request rates (requests/s): the knee and the goodput-maximizing rate");
  app.add_option("--chrome-trace", a.chrome_out, "engine steps and requests (Perfetto UI) to FILE");
}

using nlohmann::json;
using namespace serve;

namespace {

json stat_json(const Metrics& m) {
  json j;
  auto put = [&](const char* name, const Metrics::Stat& s) {
    j[std::string("mean_") + name + "_ms"] = s.mean;
    j[std::string("median_") + name + "_ms"] = s.median;
    j[std::string("p99_") + name + "_ms"] = s.p99;
  };
  put("ttft", m.ttft);
  put("tpot", m.tpot);
  put("itl", m.itl);
  put("e2el", m.e2el);
  j["completed"] = m.completed;
  j["total_output_tokens"] = m.total_output;
  j["duration_s"] = m.duration_s;
  j["request_throughput"] = m.request_throughput;
  j["output_throughput"] = m.output_throughput;
  j["request_goodput"] = m.request_goodput;
  return j;
}

json num_or_null(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

void print_row(std::ostream& o, const char* name, double sim, double meas, bool has_meas, const char* unit) {
  o << "  " << std::left << std::setw(22) << name << std::right << std::setw(12) << std::fixed << std::setprecision(2) << sim;
  if (has_meas && std::isnan(meas)) {
    o << std::setw(12) << "-";
  } else if (has_meas) {
    o << std::setw(12) << meas;
    if (meas != 0) o << std::setw(9) << std::showpos << std::setprecision(1) << (sim / meas - 1) * 100 << std::noshowpos << " %";
  }
  o << "  " << unit << "\n";
}

void write_chrome(const std::vector<Request>& reqs, const ServeResult& r, std::ostream& o) {
  json ev = json::array();
  ev.push_back({{"ph", "M"}, {"pid", 1}, {"name", "process_name"}, {"args", {{"name", "engine steps"}}}});
  ev.push_back({{"ph", "M"}, {"pid", 2}, {"name", "process_name"}, {"args", {{"name", "requests"}}}});
  for (const auto& s : r.steps) {
    const double t0 = static_cast<double>(s.start) / 1e3;
    json args = {{"q", s.shape.q},
                 {"kv", s.shape.kv},
                 {"seqs", s.shape.seqs},
                 {"prefills", s.prefills},
                 {"gpu_us", static_cast<double>(s.time.gpu) / 1e3},
                 {"build_us", static_cast<double>(s.time.build) / 1e3}};
    ev.push_back({{"ph", "X"},
                  {"pid", 1},
                  {"tid", 1},
                  {"ts", t0},
                  {"dur", static_cast<double>(s.time.total()) / 1e3},
                  {"name", "step q=" + std::to_string(s.shape.q) + " seqs=" + std::to_string(s.shape.seqs)},
                  {"args", args}});
    double t = t0;
    for (auto [name, d] :
         {std::pair<const char*, TimeNs>{"prepare", s.time.prepare}, {"forward", s.time.forward}, {"update", s.time.update}}) {
      ev.push_back({{"ph", "X"}, {"pid", 1}, {"tid", 2}, {"ts", t}, {"dur", static_cast<double>(d) / 1e3}, {"name", name}});
      t += static_cast<double>(d) / 1e3;
    }
  }
  for (std::size_t i = 0; i < r.requests.size() && i < 20000; ++i) {
    const auto& q = r.requests[i];
    const Request& rq = reqs[i];
    auto span = [&](const char* name, TimeNs a, TimeNs b) {
      if (a < 0 || b < a) return;
      ev.push_back({{"ph", "X"},
                    {"pid", 2},
                    {"tid", static_cast<int>(i)},
                    {"ts", static_cast<double>(a) / 1e3},
                    {"dur", static_cast<double>(b - a) / 1e3},
                    {"name", std::string(name) + " " + rq.id},
                    {"args", {{"prompt", rq.prompt}, {"output", rq.output}, {"preemptions", q.preemptions}}}});
    };
    span("queue", rq.arrival, q.scheduled);
    span("prefill", q.scheduled, q.first_token);
    span("decode", q.first_token, q.finish);
  }
  o << json_text(json{{"traceEvents", ev}, {"displayTimeUnit", "ms"}}, -1) << "\n";
}

}  // namespace

// --step-costs: the steps an engine's annotations name, what each cost on the traced GPU, and the
// (uncalibrated) model's GPU time for its shape.
json step_costs(const ServeArgs& a, const LlmConfig& llm, const HwSpec& hw, std::ostream* text) {
  Trace t = load_trace(a.step_costs);
  const NamedSteps ns = read_named_steps(t);
  if (ns.steps.empty() && ns.captures.empty())
    throw InputError(a.step_costs,
                     "no engine step names (vLLM's execute_..., SGLang's step[...], forward q= kv= seqs=); a plain profile calibrates with "
                     "--calibrate TRACE --trace-log LOG");
  const StepCostModel model = hardware_step_model(llm, hw);
  json rows = json::array();
  for (const auto& s : ns.steps)
    rows.push_back({{"engine", s.engine},
                    {"mode", s.mode},
                    {"name", s.name},
                    {"q", s.shape.q},
                    {"kv", s.shape.kv},
                    {"seqs", s.shape.seqs},
                    {"prefills", s.prefills},
                    {"decodes", s.decodes},
                    {"host_ms", static_cast<double>(s.host_span) / 1e6},
                    {"gpu_busy_ms", static_cast<double>(s.gpu_busy) / 1e6},
                    {"gpu_span_ms", static_cast<double>(s.gpu_span) / 1e6},
                    {"device_ops", s.device_ops},
                    {"launches", s.launches},
                    {"graph_launches", s.graph_launches},
                    {"model_gpu_ms", static_cast<double>(model.gpu_time(s.shape)) / 1e6}});
  json j = {{"trace", a.step_costs}, {"step_costs", rows}, {"captures", ns.captures}, {"model", a.model_path}, {"hw", hw.name}};
  if (!text) return j;
  std::ostream& o = *text;
  o << "bneck serve --step-costs " << a.step_costs << ": " << ns.steps.size() << " engine steps (model " << a.model_path << " on "
    << hw.name << ")\n";
  o << "  engine  mode                    prefills decodes      q       kv   host ms  GPU busy  GPU span  model GPU  ops\n";
  for (const auto& s : ns.steps)
    o << "  " << std::left << std::setw(8) << s.engine.substr(0, 7) << std::setw(24) << s.mode << std::right << std::setw(8) << s.prefills
      << std::setw(8) << s.decodes << std::setw(7) << s.shape.q << std::setw(9) << s.shape.kv << std::fixed << std::setprecision(3)
      << std::setw(10) << static_cast<double>(s.host_span) / 1e6 << std::setw(10) << static_cast<double>(s.gpu_busy) / 1e6 << std::setw(10)
      << static_cast<double>(s.gpu_span) / 1e6 << std::setw(11) << static_cast<double>(model.gpu_time(s.shape)) / 1e6 << std::setw(6)
      << s.device_ops << "\n";
  for (const auto& c : ns.captures) o << "  CUDA-graph capture: " << c << " (the graphs' capture, no step to time)\n";
  return j;
}

// The job the CLI's options describe (strings parsed: durations, sizes, lengths, rates).
ServeJob serve_job(const ServeArgs& a) {
  ServeJob job;
  job.model_path = a.model_path;
  job.hw = a.hw_name;
  job.requests_path = a.requests_path;
  EngineConfig& eng = job.engine;
  eng.policy = a.policy == "static" ? Policy::Static : Policy::Continuous;
  eng.max_batch_tokens = a.max_batch_tokens;
  eng.max_seqs = a.max_seqs;
  job.trace_max_seqs = a.trace_max_seqs;
  eng.block_size = a.block_size;
  eng.num_blocks = a.num_blocks > 0 ? a.num_blocks : 0;
  eng.chunked_prefill = a.chunked;
  eng.cuda_graph = a.cuda_graph;
  eng.padding = {a.q_pad, a.kv_pad};
  eng.watermark = a.watermark;
  eng.prefix_caching = a.prefix_caching;
  eng.prefix_hash_block = a.prefix_hash_block;
  if (!a.wake.empty()) eng.wake = parse_duration(a.wake);
  if (a.num_blocks <= 0 && !a.kv_memory.empty()) {
    job.kv_memory = parse_bytes(a.kv_memory);
    if (job.kv_memory <= 0) throw InputError("--kv-memory '" + a.kv_memory + "': must be positive");
  }
  if (a.requests_path.empty()) {
    WorkloadSpec& ws = job.workload;
    ws.rate = a.rate;
    ws.num = a.num;
    ws.seed = a.seed;
    if (a.num > 0) {
      ws.prompt = parse_length_dist(a.prompt_len, "--prompt-len");
      ws.output = parse_length_dist(a.output_len, "--output-len");
    }
    if (!a.shared_prefix.empty()) parse_shared_prefix(a.shared_prefix, ws);
    ws.hash_block = a.prefix_hash_block;
    if (a.arrival.rfind("gamma:", 0) == 0) {
      try {
        ws.cv = std::stod(a.arrival.substr(6));
      } catch (...) { throw InputError("--arrival '" + a.arrival + "': expected poisson or gamma:CV"); }
    } else if (a.arrival != "poisson") {
      throw InputError("--arrival '" + a.arrival + "': expected poisson or gamma:CV");
    }
  }
  job.warmup_path = a.warmup_path;
  job.calibrate_trace = a.calib_trace;
  job.trace_log = a.trace_log;
  job.calibrate_log = a.calib_log;
  if (!a.slo_ttft.empty()) job.slo.ttft = parse_duration(a.slo_ttft);
  if (!a.slo_tpot.empty()) job.slo.tpot = parse_duration(a.slo_tpot);
  if (!a.rates.empty()) job.rates = serve::parse_rates(a.rates, "--rates");
  job.keep_steps = !a.chrome_out.empty();
  return job;
}

json run_serve(const ServeArgs& a, std::ostream* text) {
  if (!a.step_costs.empty()) return step_costs(a, load_llm_config(a.model_path), load_target_hw(a.hw_name), text);
  const ServeJob job = serve_job(a);
  return serve_report(job, run_serving(job), a.chrome_out, text);
}

namespace {

// The outcome as JSON (the same figures as the text).
json serve_json(const ServeJob& job, const ServeOutcome& out) {
  const EngineConfig& eng = out.engine;
  const std::string policy = eng.policy == Policy::Static ? "static" : "continuous";
  const ServeResult& res = out.result;
  const Metrics& m = out.simulated;
  json j = stat_json(m);
  j["policy"] = policy;
  j["model"] = {{"config", job.model_path},
                {"model_type", out.llm.model_type},
                {"params", out.llm.params()},
                {"weight_bytes", out.llm.weight_bytes()},
                {"kv_bytes_per_token", out.llm.kv_bytes_per_token()}};
  j["hw"] = out.hw.name;
  j["kv_cache"] = {
      {"blocks", eng.num_blocks}, {"block_size", eng.block_size}, {"tokens", eng.num_blocks * eng.block_size}, {"bytes", out.kv_bytes}};
  j["engine"] = {{"max_batch_tokens", eng.max_batch_tokens},
                 {"max_seqs", eng.max_seqs},
                 {"chunked_prefill", eng.chunked_prefill},
                 {"cuda_graph", eng.cuda_graph},
                 {"kv_watermark", eng.watermark},
                 {"prefix_caching", eng.prefix_caching},
                 {"wake_ns", eng.wake}};
  j["step_model"] = {{"source", out.model.source},
                     {"notes", out.model.notes},
                     {"attention", to_string(out.model.form)},
                     {"host_scale", out.model.host_scale}};
  j["steps"] = res.step_count;
  j["preemptions"] = res.preemptions;
  j["padded_tokens"] = res.padded_tokens;
  j["new_shapes"] = res.new_shapes;
  j["notes"] = out.notes;
  if (eng.prefix_caching)
    j["prefix_cache"] = {
        {"prompt_tokens", res.prompt_tokens},
        {"hit_tokens", res.prefix_hit_tokens},
        {"hit_rate", res.prompt_tokens ? static_cast<double>(res.prefix_hit_tokens) / static_cast<double>(res.prompt_tokens) : 0.0}};
  j["warmup_requests"] = eng.warmup.size();
  json rq = json::array();
  for (std::size_t i = 0; i < out.requests.size(); ++i)
    rq.push_back({{"id", out.requests[i].id},
                  {"ttft_ms", num_or_null(m.req_ttft[i])},
                  {"tpot_ms", num_or_null(m.req_tpot[i])},
                  {"e2el_ms", num_or_null(m.req_e2el[i])},
                  {"queue_ms", num_or_null(m.req_queue[i])},
                  {"preemptions", res.requests[i].preemptions}});
  j["requests"] = rq;
  if (out.has_measured) {
    json mj = stat_json(out.measured);
    json mr = json::array();
    for (std::size_t i = 0; i < out.requests.size(); ++i)
      mr.push_back({{"id", out.requests[i].id},
                    {"ttft_ms", num_or_null(out.measured.req_ttft[i])},
                    {"tpot_ms", num_or_null(out.measured.req_tpot[i])},
                    {"e2el_ms", num_or_null(out.measured.req_e2el[i])}});
    mj["requests"] = mr;
    j["measured"] = mj;
  }
  if (!out.sweep.empty()) {
    json sj = json::array();
    for (const auto& row : out.sweep) {
      json x = stat_json(row.m);
      x["rate"] = row.rate;
      sj.push_back(x);
    }
    j["sweep"] = sj;
    j["knee_rate"] = out.knee_rate > 0 ? json(out.knee_rate) : json(nullptr);
    j["goodput_best_rate"] = out.best_rate;
    j["sweep_s"] = out.sweep_s;
  }
  if (out.bars.valid)
    j["error_bars"] = {{"median_ttft_ms", out.bars.ttft_ms},
                       {"median_tpot_ms", out.bars.tpot_ms},
                       {"median_e2el_ms", out.bars.e2el_ms},
                       {"duration_s", out.bars.duration_s},
                       {"basis", out.bars.basis}};
  j["simulation_s"] = out.simulation_s;
  return j;
}

void print_serve_text(const ServeJob& job, const ServeOutcome& out, std::ostream& o) {
  const LlmConfig& llm = out.llm;
  const HwSpec& hw = out.hw;
  const EngineConfig& eng = out.engine;
  const Bytes kv_bytes = out.kv_bytes;
  const Slo slo = job.slo;
  const std::string policy = eng.policy == Policy::Static ? "static" : "continuous";
  const std::vector<Request>& reqs = out.requests;
  const bool generated = out.generated;
  const StepCostModel& model = out.model;
  const ServeResult& res = out.result;
  const Metrics& m = out.simulated;
  const Metrics& meas = out.measured;
  const bool has_meas = out.has_measured;
  const auto& sweep = out.sweep;
  const double knee = out.knee_rate;
  const double best_rate = out.best_rate;
  const double sweep_s = out.sweep_s;
  const double sim_s = out.simulation_s;
  const double total_s = out.total_s;
  o << "bneck serve: " << reqs.size() << " requests (" << (generated ? "generated" : job.requests_path) << "), " << policy << " batching"
    << (eng.cuda_graph ? ", CUDA graphs" : "") << "\n";
  o << "  model " << job.model_path << ": " << std::fixed << std::setprecision(2) << llm.params() / 1e9 << " B parameters, "
    << format_bytes(llm.weight_bytes()) << " of weights, " << format_bytes(llm.kv_bytes_per_token()) << " of KV per token\n";
  o << "  " << hw.name << ": KV cache " << eng.num_blocks << " blocks x " << eng.block_size
    << " tokens = " << eng.num_blocks * eng.block_size << " tokens (" << format_bytes(kv_bytes) << "); budget " << eng.max_batch_tokens
    << " tokens, " << eng.max_seqs << " sequences per step\n";
  o << "  step model: " << model.source << "\n";
  for (const auto& n : model.notes) o << "    " << n << "\n";
  o << "\n  " << std::left << std::setw(22) << "" << std::right << std::setw(12) << "simulated" << (has_meas ? "    measured    error" : "")
    << "\n";
  print_row(o, "mean TTFT", m.ttft.mean, meas.ttft.n ? meas.ttft.mean : NAN, has_meas, "ms");
  print_row(o, "median TTFT", m.ttft.median, meas.ttft.n ? meas.ttft.median : NAN, has_meas, "ms");
  print_row(o, "p99 TTFT", m.ttft.p99, meas.ttft.n ? meas.ttft.p99 : NAN, has_meas, "ms");
  print_row(o, "mean TPOT", m.tpot.mean, meas.tpot.n ? meas.tpot.mean : NAN, has_meas, "ms");
  print_row(o, "median TPOT", m.tpot.median, meas.tpot.n ? meas.tpot.median : NAN, has_meas, "ms");
  print_row(o, "p99 TPOT", m.tpot.p99, meas.tpot.n ? meas.tpot.p99 : NAN, has_meas, "ms");
  print_row(o, "median ITL", m.itl.median, meas.itl.n ? meas.itl.median : NAN, has_meas, "ms");
  print_row(o, "mean E2E latency", m.e2el.mean, meas.e2el.mean, has_meas, "ms");
  print_row(o, "median E2E latency", m.e2el.median, meas.e2el.median, has_meas, "ms");
  print_row(o, "p99 E2E latency", m.e2el.p99, meas.e2el.p99, has_meas, "ms");
  print_row(o, "duration", m.duration_s, meas.duration_s, has_meas, "s");
  print_row(o, "request throughput", m.request_throughput, meas.request_throughput, has_meas, "requests/s");
  print_row(o, "output throughput", m.output_throughput, meas.output_throughput, has_meas, "tokens/s");
  if (slo.ttft > 0 || slo.tpot > 0)
    print_row(o, "request goodput", m.request_goodput, meas.request_goodput, has_meas, "requests/s (within the SLOs)");
  if (out.bars.valid) {
    auto iv = [&](const std::array<double, 2>& b, int prec) {
      std::ostringstream x;
      x << std::fixed << std::setprecision(prec) << b[0] << " .. " << b[1];
      return x.str();
    };
    o << "  80 % intervals: median TTFT " << iv(out.bars.ttft_ms, 1) << " ms, median TPOT " << iv(out.bars.tpot_ms, 1) << " ms, median E2E "
      << iv(out.bars.e2el_ms, 0) << " ms, duration " << iv(out.bars.duration_s, 2) << " s\n";
    for (const auto& b : out.bars.basis) o << "    " << b << "\n";
  }
  o << "  " << res.step_count << " engine steps (" << res.new_shapes << " on a shape met the first time), " << res.preemptions
    << " preemptions, " << res.padded_tokens << " padding tokens; simulated in " << std::setprecision(3) << sim_s << " s (" << total_s
    << " s in all)\n";
  for (const auto& n : out.notes) o << "  " << n << "\n";
  if (eng.prefix_caching && eng.policy == Policy::Continuous)
    o << "  prefix cache: " << res.prefix_hit_tokens << " of " << res.prompt_tokens << " prompt tokens found cached ("
      << std::setprecision(1)
      << (res.prompt_tokens ? 100.0 * static_cast<double>(res.prefix_hit_tokens) / static_cast<double>(res.prompt_tokens) : 0.0) << " %)\n";
  if (!sweep.empty()) {
    o << "\n  rate sweep     req/s out tok/s  median TTFT  median TPOT    p99 E2E" << (slo.ttft > 0 || slo.tpot > 0 ? "   goodput" : "")
      << "\n";
    for (const auto& row : sweep) {
      o << "  " << std::setw(8) << std::setprecision(2) << row.rate << " /s" << std::setw(9) << row.m.request_throughput << std::setw(10)
        << std::setprecision(0) << row.m.output_throughput << std::setw(10) << std::setprecision(1) << row.m.ttft.median << " ms"
        << std::setw(10) << row.m.tpot.median << " ms" << std::setw(8) << std::setprecision(0) << row.m.e2el.p99 << " ms";
      if (slo.ttft > 0 || slo.tpot > 0) o << std::setw(10) << std::setprecision(2) << row.m.request_goodput;
      o << "\n";
    }
    o << "  " << sweep.size() << " rates simulated in " << std::setprecision(3) << sweep_s << " s\n";
    o << "  saturation knee (completions below 90 % of arrivals): " << (knee > 0 ? std::to_string(knee) + " requests/s" : "not reached")
      << "\n";
    o << "  " << (slo.ttft > 0 || slo.tpot > 0 ? "goodput" : "throughput") << "-maximizing rate: " << best_rate << " requests/s\n";
  }
}

}  // namespace

json serve_report(const ServeJob& job, const ServeOutcome& out, const std::string& chrome_out, std::ostream* text) {
  json result = serve_json(job, out);
  if (!chrome_out.empty()) write_output(chrome_out, [&](std::ostream& o) { write_chrome(out.requests, out.result, o); });
  if (text) print_serve_text(job, out, *text);
  return result;
}

}  // namespace bneck
