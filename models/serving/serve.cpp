#include "models/serving/serve.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <fstream>
#include <limits>
#include <random>

#include "sim/base/error.hpp"
#include "sim/base/stats.hpp"
#include "sim/base/json_input.hpp"

namespace bneck::serve {
using nlohmann::json;

namespace {

constexpr double kMaxSeconds = 1e6;  // 11 days: past that a log's time is an error, not a run
constexpr std::int64_t kMaxTokens = 1 << 24;

TimeNs seconds_to_ns(double s) { return static_cast<TimeNs>(std::llround(s * 1e9)); }

}  // namespace

namespace {

// A request's fields under the names engines, clients and public traces use.
const char* const kArrivalSeconds[] = {"arrival_s", "arrival", "arrival_time", "timestamp_s"};
const char* const kArrivalMillis[] = {"timestamp", "timestamp_ms"};  // Mooncake-style traces
const char* const kPromptKeys[] = {"prompt_tokens", "input_length", "input_len", "prompt_len", "input_tokens", "num_prompt_tokens"};
const char* const kOutputKeys[] = {"output_tokens", "output_length", "output_len", "num_output_tokens"};
constexpr double kMaxClockSeconds = 1e10;  // a wall clock (Unix time) is aligned by the first arrival

// One JSONL request (see the header); times stay on the log's clock (aligned later).
Request parse_request(const json& j, const std::string& where, std::size_t ln) {
  if (!j.is_object()) throw InputError(where, "a request is a JSON object");
  Request r;
  auto seconds = [&](const json& v, const std::string& key, double scale = 1) {
    if (!v.is_number()) throw InputError(where, "'" + key + "' must be a number of " + (scale == 1 ? "seconds" : "milliseconds"));
    double x = v.get<double>() * scale;
    if (!std::isfinite(x) || x < 0 || x > kMaxClockSeconds) throw InputError(where, "'" + key + "' must be between 0 and 1e10 s");
    return seconds_to_ns(x);
  };
  auto tokens = [&](const char* const* keys, std::size_t n, const char* what) {
    for (std::size_t k = 0; k < n; ++k) {
      auto it = j.find(keys[k]);
      if (it == j.end()) continue;
      if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > kMaxTokens)
        throw InputError(where, std::string("'") + keys[k] + "' must be an integer from 1 to 2^24");
      return it->get<std::int64_t>();
    }
    throw InputError(where, std::string("missing '") + keys[0] + "' (the " + what + " length)");
  };
  with_json_errors(where, [&] {
    auto id = j.find("id");
    r.id = id == j.end() ? "line " + std::to_string(ln) : id->is_string() ? id->get<std::string>() : id->dump();
    bool arrival = false;
    for (const char* k : kArrivalSeconds)
      if (!arrival && j.contains(k)) r.arrival = seconds(j[k], k), arrival = true;
    for (const char* k : kArrivalMillis)
      if (!arrival && j.contains(k)) r.arrival = seconds(j[k], k, 1e-3), arrival = true;
    if (!arrival) throw InputError(where, "missing 'arrival_s' (or 'timestamp' in ms)");
    r.prompt = tokens(kPromptKeys, std::size(kPromptKeys), "prompt");
    r.output = tokens(kOutputKeys, std::size(kOutputKeys), "output");
    if (j.contains("hash_ids")) {  // shared-prefix blocks (Mooncake): read, checked
      const json& h = j["hash_ids"];
      if (!h.is_array()) throw InputError(where, "'hash_ids' must be an array of integers");
      for (const auto& v : h) {
        if (!v.is_number_integer()) throw InputError(where, "'hash_ids' must be an array of integers");
        r.hash_ids.push_back(v.get<std::int64_t>());
      }
    }
    if (j.contains("token_times_s")) {
      const json& tt = j["token_times_s"];
      if (!tt.is_array()) throw InputError(where, "'token_times_s' must be an array of seconds");
      if (static_cast<std::int64_t>(tt.size()) != r.output)
        throw InputError(where, "'token_times_s' has " + std::to_string(tt.size()) + " times for " + std::to_string(r.output) + " output tokens");
      TimeNs prev = r.arrival;
      for (const auto& v : tt) {
        TimeNs t = seconds(v, "token_times_s");
        if (t < prev) throw InputError(where, "'token_times_s' is not ordered (or a token precedes the arrival)");
        r.token_times.push_back(prev = t);
      }
    }
    // Only contradictions are errors: a time before the arrival, a first token other than the
    // first of token_times_s, a finish before the last token (an engine finishes at or after it).
    TimeNs first = -1;
    if (j.contains("first_token_s")) {
      first = seconds(j["first_token_s"], "first_token_s");
      if (first < r.arrival) throw InputError(where, "'first_token_s' precedes the arrival");
      if (!r.token_times.empty() && std::llabs(first - r.token_times.front()) > 1000)
        throw InputError(where, "'first_token_s' disagrees with token_times_s (its first time)");
    }
    if (j.contains("finish_s")) {
      r.measured_finish = seconds(j["finish_s"], "finish_s");
      if (r.measured_finish < r.arrival) throw InputError(where, "'finish_s' precedes the arrival");
      if (!r.token_times.empty() && r.measured_finish < r.token_times.back() - 1000)
        throw InputError(where, "'finish_s' precedes the last of token_times_s");
      if (first >= 0 && r.measured_finish < first) throw InputError(where, "'finish_s' precedes 'first_token_s'");
      if (first >= 0 && r.token_times.empty())  // no per-token times: spread evenly, first to last
        for (std::int64_t k = 0; k < r.output; ++k)
          r.token_times.push_back(r.output == 1 ? first : first + (r.measured_finish - first) * k / (r.output - 1));
    }
  });
  r.line = ln;
  return r;
}

// `vllm bench serve --save-result --save-detailed`: one JSON object of per-request arrays
// (input_lens, output_lens, ttfts, itls in seconds; start times where the version writes them,
// else arrivals spaced by its request_rate, else all at 0).
std::vector<Request> vllm_bench_requests(const json& j, const std::string& path) {
  std::vector<Request> out;
  with_json_errors(path, [&] {
    const json& in = j.at("input_lens");
    const json& outl = j.at("output_lens");
    if (!in.is_array() || !outl.is_array() || in.size() != outl.size())
      throw InputError(path, "'input_lens' and 'output_lens' must be arrays of one length");
    const json* ttfts = j.contains("ttfts") && j["ttfts"].is_array() ? &j["ttfts"] : nullptr;
    const json* itls = j.contains("itls") && j["itls"].is_array() ? &j["itls"] : nullptr;
    const json* starts = j.contains("start_times") && j["start_times"].is_array() ? &j["start_times"] : nullptr;
    double rate = j.contains("request_rate") && j["request_rate"].is_number() ? j["request_rate"].get<double>() : 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::string where = path + ": request " + std::to_string(i);
      Request r;
      r.id = std::to_string(i);
      auto count = [&](const json& v, const char* key) {
        if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > kMaxTokens)
          throw InputError(where, std::string("'") + key + "' must hold integers from 1 to 2^24");
        return v.get<std::int64_t>();
      };
      r.prompt = count(in[i], "input_lens");
      r.output = count(outl[i], "output_lens");
      double a = starts && i < starts->size() && (*starts)[i].is_number() ? (*starts)[i].get<double>()
                 : rate > 0 && std::isfinite(rate)                         ? static_cast<double>(i) / rate
                                                                           : 0;
      if (!std::isfinite(a) || a < 0 || a > kMaxClockSeconds) throw InputError(where, "start time out of range");
      r.arrival = seconds_to_ns(a);
      if (ttfts && i < ttfts->size() && (*ttfts)[i].is_number()) {
        double t = (*ttfts)[i].get<double>();
        if (!std::isfinite(t) || t < 0 || t > kMaxSeconds) throw InputError(where, "'ttfts' out of range");
        TimeNs now = r.arrival + seconds_to_ns(t);
        r.token_times.push_back(now);
        if (itls && i < itls->size() && (*itls)[i].is_array())
          for (const auto& g : (*itls)[i]) {
            if (!g.is_number() || !std::isfinite(g.get<double>()) || g.get<double>() < 0 || g.get<double>() > kMaxSeconds)
              throw InputError(where, "'itls' must hold non-negative seconds");
            r.token_times.push_back(now += seconds_to_ns(g.get<double>()));
          }
        // vLLM counts the output tokens by the tokenizer: where itls disagree, keep the counts and
        // spread the last token's time over them.
        if (static_cast<std::int64_t>(r.token_times.size()) != r.output) {
          TimeNs f = r.token_times.front(), l = r.token_times.back();
          r.token_times.clear();
          for (std::int64_t k = 0; k < r.output; ++k) r.token_times.push_back(r.output == 1 ? f : f + (l - f) * k / (r.output - 1));
        }
        r.measured_finish = r.token_times.back();
      }
      r.line = i + 1;
      out.push_back(std::move(r));
    }
  });
  return out;
}

}  // namespace

std::vector<Request> load_request_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open the request log");
  std::vector<Request> out;
  std::string line;
  std::size_t ln = 0;
  bool first = true;
  while (std::getline(in, line)) {
    ++ln;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(ln);
    if (line.size() > (64u << 20)) throw InputError(where, "line longer than 64 MiB");
    if (first) {
      first = false;
      // One JSON document rather than lines: a benchmark client's result (vllm bench serve).
      bool whole = false;
      try {
        json j0 = json::parse(line);
        whole = j0.is_object() && j0.contains("input_lens");
      } catch (const json::exception&) {
        whole = line.find_first_not_of(" \t\r") != std::string::npos && line[line.find_first_not_of(" \t\r")] == '{';
      }
      if (whole) {
        std::ifstream all(path, std::ios::binary);
        std::string text((std::istreambuf_iterator<char>(all)), std::istreambuf_iterator<char>());
        if (text.size() > (1u << 30)) throw InputError(path, "a result file over 1 GiB");
        json j = parse_json_input(text, path);
        if (!j.is_object() || !j.contains("input_lens"))
          throw InputError(path + ":1", "not a request per line (JSONL) nor a vllm bench serve result ('input_lens')");
        out = vllm_bench_requests(j, path);
        break;
      }
    }
    out.push_back(parse_request(parse_json_input(line, where), where, ln));
    if (out.size() > 10'000'000) throw InputError(path, "more than 10 million requests");
  }
  if (out.empty()) throw InputError(path, "no requests");
  // A wall clock (Unix time, or any clock that does not start near 0): times are taken from the
  // first arrival, so runs logged on different clocks compare.
  TimeNs t0 = out.front().arrival;
  for (const Request& r : out) t0 = std::min(t0, r.arrival);
  if (t0 > seconds_to_ns(kMaxSeconds)) {
    for (Request& r : out) {
      r.arrival -= t0;
      for (TimeNs& t : r.token_times) t -= t0;
      if (r.measured_finish >= 0) r.measured_finish -= t0;
    }
  }
  for (const Request& r : out)
    if (r.arrival > seconds_to_ns(kMaxSeconds) || (!r.token_times.empty() && r.token_times.back() > seconds_to_ns(kMaxSeconds)))
      throw InputError(path + ":" + std::to_string(r.line), "the log spans more than 1e6 s from its first arrival");
  if (!std::is_sorted(out.begin(), out.end(), [](const Request& a, const Request& b) { return a.arrival < b.arrival; })) {
    // Arrivals need not be ordered in the file; the simulation takes them in time order.
    std::stable_sort(out.begin(), out.end(), [](const Request& a, const Request& b) { return a.arrival < b.arrival; });
  }
  return out;
}

LengthDist parse_length_dist(const std::string& text, const char* what) {
  LengthDist d;
  auto num = [&](const std::string& s) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (...) { used = 0; }
    if (used != s.size() || !std::isfinite(v) || v <= 0 || v > kMaxTokens)
      throw InputError(std::string(what) + " '" + text + "': expected N, LO..HI or lognormal:MEDIAN,SIGMA (positive token counts)");
    return v;
  };
  if (text.rfind("lognormal:", 0) == 0) {
    auto comma = text.find(',');
    if (comma == std::string::npos) throw InputError(std::string(what) + " '" + text + "': expected lognormal:MEDIAN,SIGMA");
    d.kind = LengthDist::Lognormal;
    d.a = num(text.substr(10, comma - 10));
    d.b = num(text.substr(comma + 1));
  } else if (auto dots = text.find(".."); dots != std::string::npos) {
    d.kind = LengthDist::Uniform;
    d.a = num(text.substr(0, dots));
    d.b = num(text.substr(dots + 2));
    if (d.b < d.a) throw InputError(std::string(what) + " '" + text + "': HI is below LO");
  } else {
    d.a = num(text);
  }
  return d;
}

namespace {

struct Rng {
  std::mt19937_64 g;
  explicit Rng(std::uint64_t seed) : g(seed) {}
  double uniform() { return static_cast<double>(g() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    double u = uniform(), v = uniform();
    return std::sqrt(-2 * std::log1p(-u)) * std::cos(2 * M_PI * v);
  }
  double gamma(double k) {  // Marsaglia and Tsang, shape k, scale 1
    if (k < 1) return gamma(k + 1) * std::pow(std::max(uniform(), 1e-300), 1 / k);
    const double d = k - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    for (;;) {
      double x = normal(), v = 1 + c * x;
      if (v <= 0) continue;
      v = v * v * v;
      double u = uniform();
      if (std::log(std::max(u, 1e-300)) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }
  std::int64_t length(const LengthDist& d) {
    double v = d.a;
    if (d.kind == LengthDist::Uniform) v = std::floor(d.a + uniform() * (d.b - d.a + 1));
    if (d.kind == LengthDist::Lognormal) v = std::round(d.a * std::exp(d.b * normal()));
    return std::clamp<std::int64_t>(static_cast<std::int64_t>(v), 1, kMaxTokens);
  }
};

}  // namespace

std::vector<Request> generate_requests(const WorkloadSpec& w) {
  if (w.num < 1 || w.num > 10'000'000) throw InputError("--num must be 1 to 10,000,000");
  if (!(w.rate >= 0) || !std::isfinite(w.rate)) throw InputError("--rate must be a non-negative number of requests/s");
  if (!(w.cv > 0) || w.cv > 100) throw InputError("--arrival gamma:CV needs 0 < CV <= 100");
  Rng rng(w.seed);
  std::vector<Request> out;
  out.reserve(static_cast<std::size_t>(w.num));
  double t = 0;
  const double shape = 1 / (w.cv * w.cv);
  for (std::int64_t i = 0; i < w.num; ++i) {
    if (w.rate > 0) t += (w.cv == 1 ? -std::log1p(-rng.uniform()) : rng.gamma(shape) / shape) / w.rate;
    Request r;
    r.id = std::to_string(i);
    r.id.insert(r.id.begin(), 'r');
    r.arrival = seconds_to_ns(std::min(t, kMaxSeconds));
    r.prompt = rng.length(w.prompt);
    r.output = rng.length(w.output);
    out.push_back(std::move(r));
  }
  return out;
}

std::int64_t blocks_for_memory(Bytes kv_memory, const LlmConfig& llm, std::int64_t block_size) {
  const double per_block = static_cast<double>(llm.kv_bytes_per_token()) * static_cast<double>(block_size);
  return per_block > 0 ? static_cast<std::int64_t>(static_cast<double>(kv_memory) / per_block) : 0;
}

Bytes default_kv_memory(const HwSpec& hw, const LlmConfig& llm, const EngineConfig& eng) {
  const double mem = 0.9 * static_cast<double>(hw.gpu.memory_bytes);
  const double bytes = dtype_bytes(llm.dtype);
  const double act = static_cast<double>(eng.max_batch_tokens) *
                     (static_cast<double>(llm.hidden) * 4 + static_cast<double>(llm.intermediate) * 3) * bytes;
  const double logits = static_cast<double>(eng.max_seqs) * static_cast<double>(llm.vocab) * 4;
  const double left = mem - static_cast<double>(llm.weight_bytes()) - act - logits;
  return left > 0 ? static_cast<Bytes>(left) : 0;
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct Seq {
  std::size_t req = 0;
  std::int64_t computed = 0;   // tokens whose KV is in the cache
  std::int64_t generated = 0;  // output tokens so far
  std::int64_t blocks = 0;
};

class Simulator {
 public:
  Simulator(const std::vector<Request>& reqs, const EngineConfig& eng, const StepCostModel& model, bool keep)
      : reqs_(reqs), eng_(eng), model_(model), keep_(keep) {
    if (eng.block_size < 1 || eng.num_blocks < 1) throw InputError("the KV cache has no blocks (--num-blocks, --kv-memory)");
    if (eng.max_batch_tokens < 1 || eng.max_seqs < 1) throw InputError("--max-batch-tokens and --max-seqs must be positive");
    if (eng.wake < 0) throw InputError("the engine's wake-up time must not be negative");
    res_.requests.resize(reqs.size());
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      res_.requests[i].index = i;
      res_.requests[i].token_times.reserve(static_cast<std::size_t>(reqs[i].output));
      const std::int64_t need = ceil_div(reqs[i].prompt + reqs[i].output, eng.block_size);
      if (need > eng.num_blocks)
        throw InputError((reqs[i].line ? std::to_string(reqs[i].line) + ": " : std::string()) + "request " + reqs[i].id + " (" +
                         std::to_string(reqs[i].prompt) + " + " + std::to_string(reqs[i].output) +
                         " tokens) needs " + std::to_string(need) + " KV blocks; the cache has " + std::to_string(eng.num_blocks));
    }
    free_ = eng.num_blocks;
  }

  // Shapes met before (a warm-up's); the ones this run meets are added.
  std::set<ShapeKey> shapes;
  // Replay (replay_schedule): the steps' times come from these, not from the cost model.
  const std::vector<MeasuredStep>* replay = nullptr;

  ServeResult run() {
    if (!reqs_.empty()) now_ = reqs_.front().arrival + eng_.wake;  // the engine starts idle
    if (eng_.policy == Policy::Static)
      run_static();
    else
      run_continuous();
    return std::move(res_);
  }

 private:
  const std::vector<Request>& reqs_;
  const EngineConfig& eng_;
  const StepCostModel& model_;
  bool keep_;
  ServeResult res_;
  std::int64_t free_ = 0;
  TimeNs now_ = 0;
  std::size_t next_ = 0;
  std::deque<Seq> waiting_;
  std::vector<Seq> running_;  // admission order
  std::size_t replayed_ = 0;  // replay: the next measured step

  void admit_arrivals() {
    while (next_ < reqs_.size() && reqs_[next_].arrival <= now_) waiting_.push_back(Seq{next_++});
  }

  std::int64_t context(const Seq& s) const { return reqs_[s.req].prompt + s.generated; }

  // The step's time: the real shape `sh` run on the (padded) shape `ps`; a new shape pays the plan build.
  StepTime step_time(const StepShape& sh, const StepShape& ps) {
    bool fresh = false;
    if (model_.shape_build > 0 || eng_.cuda_graph) {
      fresh = shapes.emplace(ps.batched ? ps.seqs : 0, ps.q, ps.kv).second;
      res_.new_shapes += fresh ? 1 : 0;
    }
    return model_.time(sh, eng_.cuda_graph, fresh, &ps);
  }

  void record(const StepShape& sh, std::int64_t prefills, StepTime t) {
    ++res_.step_count;
    res_.busy += t.total();
    if (keep_) res_.steps.push_back({now_, t, sh, prefills});
  }

  // Replay: a measured step the scheduler has nothing for (kept empty, so steps stay aligned).
  void replay_idle() {
    record(StepShape{}, 0, StepTime{});
    now_ = (*replay)[replayed_++].emit;
  }

  StepShape pad(StepShape s) const {
    if (!eng_.cuda_graph) return s;
    auto up = [](std::int64_t v, std::int64_t step, std::int64_t cap) {
      if (step <= 0) return v;
      return std::min(std::max<std::int64_t>(ceil_div(std::max<std::int64_t>(v, 1), step) * step, v), std::max(cap, v));
    };
    StepShape p = s;
    p.q = up(s.q, eng_.padding.q_interval, eng_.max_batch_tokens);
    p.kv = up(s.kv, eng_.padding.kv_interval, eng_.num_blocks * eng_.block_size);
    if (p.q > s.q || p.kv > s.kv) p.qkv_seq = s.qkv_seq * static_cast<double>(p.kv) / static_cast<double>(std::max<std::int64_t>(s.kv, 1));
    return p;
  }

  void preempt(std::size_t pos) {
    Seq s = running_[pos];
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(pos));
    free_ += s.blocks;
    s.blocks = 0;
    s.computed = 0;
    ++res_.requests[s.req].preemptions;
    ++res_.preemptions;
    waiting_.push_front(s);
  }

  void run_continuous() {
    struct Pick {
      std::size_t pos;
      std::int64_t q;
    };
    std::vector<Pick> batch;
    std::vector<char> in_batch;
    while (true) {
      if (replay) {
        if (replayed_ >= replay->size()) break;
        now_ = (*replay)[replayed_].sched;
      }
      admit_arrivals();
      if (waiting_.empty() && running_.empty()) {
        if (next_ >= reqs_.size()) break;
        if (replay) {
          replay_idle();
          continue;
        }
        now_ = std::max(now_, reqs_[next_].arrival + eng_.wake);
        continue;
      }
      batch.clear();
      std::int64_t budget = eng_.max_batch_tokens, seqs_left = eng_.max_seqs;
      bool preempted = false;
      // Running sequences: decodes first, then unfinished prefills, each in admission order.
      in_batch.assign(running_.size(), 0);
      for (int pass = 0; pass < 2; ++pass) {
        std::size_t i = 0;
        while (i < running_.size() && budget > 0 && seqs_left > 0) {
          const std::int64_t need = context(running_[i]) - running_[i].computed;
          if (in_batch[i] || (pass == 0) != (need == 1)) {
            ++i;
            continue;
          }
          std::int64_t q = std::min(need, budget);
          if (need > 1 && eng_.chunked_prefill > 0) q = std::min(q, eng_.chunked_prefill);
          const std::int64_t more = ceil_div(running_[i].computed + q, eng_.block_size) - running_[i].blocks;
          bool self = false;
          while (more > free_) {  // preempt the latest admitted sequence not in this step (i itself at worst)
            std::size_t victim = running_.size() - 1;
            while (in_batch[victim]) --victim;
            preempt(victim);
            in_batch.erase(in_batch.begin() + static_cast<std::ptrdiff_t>(victim));
            for (auto& b : batch)
              if (b.pos > victim) --b.pos;
            preempted = true;
            if (victim == i) {
              self = true;
              break;
            }
          }
          if (self) continue;
          running_[i].blocks += more;
          free_ -= more;
          batch.push_back({i, q});
          in_batch[i] = 1;
          budget -= q;
          --seqs_left;
          ++i;
        }
      }
      // Waiting requests, first come first served, while blocks stay above the watermark.
      const std::int64_t reserve = static_cast<std::int64_t>(std::ceil(eng_.watermark * static_cast<double>(eng_.num_blocks)));
      while (!preempted && !waiting_.empty() && budget > 0 && seqs_left > 0) {
        Seq& s = waiting_.front();
        const std::int64_t need = context(s) - s.computed;
        std::int64_t q = std::min(need, budget);
        if (eng_.chunked_prefill > 0) q = std::min(q, eng_.chunked_prefill);
        const std::int64_t more = ceil_div(s.computed + q, eng_.block_size) - s.blocks;
        if (more > free_ || (!batch.empty() && free_ - more < reserve)) break;
        s.blocks += more;
        free_ -= more;
        if (res_.requests[s.req].scheduled < 0) res_.requests[s.req].scheduled = now_;
        running_.push_back(s);
        in_batch.push_back(1);
        waiting_.pop_front();
        batch.push_back({running_.size() - 1, q});
        budget -= q;
        --seqs_left;
      }
      if (batch.empty()) {
        if (replay) {
          replay_idle();
          continue;
        }
        // Nothing fits (blocks held by sequences that wait for others): advance to the next arrival.
        if (next_ < reqs_.size()) {
          now_ = std::max(now_ + 1, reqs_[next_].arrival);
          continue;
        }
        throw InputError("the KV cache cannot hold any waiting request next to the running ones (" + std::to_string(eng_.num_blocks) + " blocks)");
      }
      StepShape sh;
      std::int64_t prefills = 0;
      for (const auto& b : batch) {
        const Seq& s = running_[b.pos];
        sh.q += b.q;
        sh.kv += s.computed + b.q;
        sh.qkv_seq += static_cast<double>(b.q) * static_cast<double>(s.computed + b.q);
        ++sh.seqs;
        if (s.computed + b.q == context(s)) ++sh.logits;
        if (b.q > 1 || s.generated == 0) ++prefills;
      }
      const StepShape ps = pad(sh);
      res_.padded_tokens += ps.q - sh.q;
      if (replay) {
        StepTime t;
        t.forward = (*replay)[replayed_].emit - now_;
        record(sh, prefills, t);
        now_ = (*replay)[replayed_++].emit;
      } else {
        const StepTime t = step_time(sh, ps);
        record(sh, prefills, t);
        now_ += std::max<TimeNs>(t.total(), 1);
      }
      // Tokens: a sequence whose context is now all in the cache samples one.
      std::vector<bool> done(running_.size(), false);
      for (const auto& b : batch) {
        Seq& s = running_[b.pos];
        s.computed += b.q;
        if (s.computed < context(s)) continue;
        ++s.generated;
        auto& rr = res_.requests[s.req];
        rr.token_times.push_back(now_);
        if (rr.first_token < 0) rr.first_token = now_;
        if (s.generated >= reqs_[s.req].output) {
          rr.finish = now_;
          free_ += s.blocks;
          s.blocks = 0;
          done[b.pos] = true;
        }
      }
      std::size_t w = 0;
      for (std::size_t i = 0; i < running_.size(); ++i)
        if (!done[i]) running_[w++] = running_[i];
      running_.resize(w);
    }
  }

  void run_static() {
    while (true) {
      admit_arrivals();
      if (waiting_.empty()) {
        if (next_ >= reqs_.size()) break;
        now_ = std::max(now_, reqs_[next_].arrival + eng_.wake);
        continue;
      }
      std::vector<Seq> batch;
      std::int64_t lmax = 0, omax = 0;
      while (!waiting_.empty() && static_cast<std::int64_t>(batch.size()) < eng_.max_seqs) {
        const Request& r = reqs_[waiting_.front().req];
        const std::int64_t l = std::max(lmax, r.prompt), o = std::max(omax, r.output);
        const std::int64_t n = static_cast<std::int64_t>(batch.size()) + 1;
        if (!batch.empty() && n * ceil_div(l + o, eng_.block_size) > eng_.num_blocks) break;  // the padded batch must fit
        lmax = l;
        omax = o;
        batch.push_back(waiting_.front());
        waiting_.pop_front();
      }
      const std::int64_t b = static_cast<std::int64_t>(batch.size());
      for (const auto& s : batch) res_.requests[s.req].scheduled = now_;
      for (std::int64_t step = 0; step < omax; ++step) {
        StepShape sh;
        sh.batched = true;
        sh.seqs = sh.logits = b;
        const std::int64_t ctx = lmax + step;
        sh.q = step == 0 ? b * lmax : b;
        sh.kv = b * ctx;  // the prompt and the tokens generated so far (the last one fed now)
        sh.qkv_seq = step == 0 ? static_cast<double>(b) * static_cast<double>(lmax) * static_cast<double>(lmax)
                               : static_cast<double>(b) * static_cast<double>(ctx);
        std::int64_t real = 0;
        for (const auto& s : batch) real += step == 0 ? reqs_[s.req].prompt : (reqs_[s.req].output > step ? 1 : 0);
        res_.padded_tokens += sh.q - real;
        const StepTime t = step_time(sh, sh);
        record(sh, step == 0 ? b : 0, t);
        now_ += std::max<TimeNs>(t.total(), 1);
        for (const auto& s : batch) {
          auto& rr = res_.requests[s.req];
          if (step < reqs_[s.req].output) {
            rr.token_times.push_back(now_);
            if (rr.first_token < 0) rr.first_token = now_;
          }
        }
      }
      for (const auto& s : batch) res_.requests[s.req].finish = now_;  // returned with the batch
    }
  }
};


Metrics::Stat stat(const std::vector<double>& v) {
  Metrics::Stat s;
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.n = v.size();
  s.mean = sum / static_cast<double>(v.size());
  s.median = quantile(v, 0.5);
  s.p99 = quantile(v, 0.99);
  return s;
}

// Metrics from, per request, its arrival, scheduling time (or -1), token times and finish.
Metrics metrics(const std::vector<Request>& reqs, const std::vector<const std::vector<TimeNs>*>& tokens, const std::vector<TimeNs>& finish,
                const std::vector<TimeNs>& scheduled, const Slo& slo) {
  Metrics m;
  std::vector<double> ttft, tpot, itl, e2el;
  TimeNs first = std::numeric_limits<TimeNs>::max(), last = 0;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::int64_t good = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const auto& tt = *tokens[i];
    first = std::min(first, reqs[i].arrival);
    if (tt.empty() && finish[i] >= 0) {  // finish only: throughput and E2E latency
      ++m.completed;
      m.total_output += reqs[i].output;
      last = std::max(last, finish[i]);
      const double e = static_cast<double>(finish[i] - reqs[i].arrival) / 1e6;
      e2el.push_back(e);
      m.req_ttft.push_back(nan), m.req_tpot.push_back(nan), m.req_e2el.push_back(e), m.req_queue.push_back(nan);
      if (slo.ttft <= 0 && slo.tpot <= 0) ++good;
      continue;
    }
    if (tt.empty() || finish[i] < 0) {
      m.req_ttft.push_back(nan), m.req_tpot.push_back(nan), m.req_e2el.push_back(nan), m.req_queue.push_back(nan);
      continue;
    }
    ++m.completed;
    m.total_output += static_cast<std::int64_t>(tt.size());
    last = std::max(last, finish[i]);
    const double a = static_cast<double>(tt.front() - reqs[i].arrival) / 1e6;
    const double e = static_cast<double>(finish[i] - reqs[i].arrival) / 1e6;
    double p = nan;
    if (tt.size() > 1) {
      p = static_cast<double>(finish[i] - tt.front()) / 1e6 / static_cast<double>(tt.size() - 1);
      tpot.push_back(p);
      for (std::size_t k = 1; k < tt.size(); ++k) itl.push_back(static_cast<double>(tt[k] - tt[k - 1]) / 1e6);
    }
    ttft.push_back(a);
    e2el.push_back(e);
    m.req_ttft.push_back(a);
    m.req_tpot.push_back(p);
    m.req_e2el.push_back(e);
    m.req_queue.push_back(scheduled.empty() || scheduled[i] < 0 ? nan : static_cast<double>(scheduled[i] - reqs[i].arrival) / 1e6);
    const bool ok_ttft = slo.ttft <= 0 || tt.front() - reqs[i].arrival <= slo.ttft;
    const bool ok_tpot = slo.tpot <= 0 || std::isnan(p) || p * 1e6 <= static_cast<double>(slo.tpot);
    if (ok_ttft && ok_tpot) ++good;
  }
  m.ttft = stat(ttft);
  m.tpot = stat(tpot);
  m.itl = stat(itl);
  m.e2el = stat(e2el);
  if (m.completed > 0 && last > first) {
    m.duration_s = static_cast<double>(last - first) / 1e9;
    m.request_throughput = static_cast<double>(m.completed) / m.duration_s;
    m.output_throughput = static_cast<double>(m.total_output) / m.duration_s;
    m.request_goodput = static_cast<double>(good) / m.duration_s;
  }
  return m;
}

}  // namespace

ServeResult simulate(const std::vector<Request>& reqs, const EngineConfig& eng, const StepCostModel& model, bool keep_steps) {
  if (eng.warmup.empty()) return Simulator(reqs, eng, model, keep_steps).run();
  EngineConfig plain = eng;
  plain.warmup.clear();
  Simulator warm(eng.warmup, plain, model, false);
  (void)warm.run();
  Simulator sim(reqs, plain, model, keep_steps);
  sim.shapes = std::move(warm.shapes);
  return sim.run();
}

ServeResult replay_schedule(const std::vector<Request>& reqs, const EngineConfig& eng, const std::vector<MeasuredStep>& steps) {
  EngineConfig plain = eng;
  plain.policy = Policy::Continuous;
  plain.warmup.clear();
  plain.wake = 0;
  const StepCostModel none;
  Simulator sim(reqs, plain, none, true);
  sim.replay = &steps;
  return sim.run();
}

Metrics summarize(const std::vector<Request>& reqs, const std::vector<RequestResult>& res, const Slo& slo) {
  std::vector<const std::vector<TimeNs>*> tokens;
  std::vector<TimeNs> finish, sched;
  for (const auto& r : res) {
    tokens.push_back(&r.token_times);
    finish.push_back(r.finish);
    sched.push_back(r.scheduled);
  }
  return metrics(reqs, tokens, finish, sched, slo);
}

Metrics summarize_measured(const std::vector<Request>& reqs, const Slo& slo) {
  std::vector<const std::vector<TimeNs>*> tokens;
  std::vector<TimeNs> finish;
  for (const auto& r : reqs) {
    tokens.push_back(&r.token_times);
    finish.push_back(r.measured_finish >= 0 ? r.measured_finish : r.token_times.empty() ? -1 : r.token_times.back());
  }
  return metrics(reqs, tokens, finish, {}, slo);
}

}  // namespace bneck::serve
