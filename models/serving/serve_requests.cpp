// LLM serving: request logs (JSONL, vllm bench serve results) and generated workloads.
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
        throw InputError(where,
                         "'token_times_s' has " + std::to_string(tt.size()) + " times for " + std::to_string(r.output) + " output tokens");
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
                 : rate > 0 && std::isfinite(rate)                        ? static_cast<double>(i) / rate
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

void parse_shared_prefix(const std::string& text, WorkloadSpec& w) {
  const std::size_t colon = text.find(':');
  auto num = [&](const std::string& s) -> std::int64_t {
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(s, &used);
    } catch (...) { used = 0; }
    if (s.empty() || used != s.size() || v < 0) throw InputError("--shared-prefix '" + text + "': expected LEN or LEN:GROUPS (integers)");
    return v;
  };
  w.shared_prefix = num(text.substr(0, colon));
  w.prefix_groups = colon == std::string::npos ? 1 : num(text.substr(colon + 1));
}

std::vector<Request> generate_requests(const WorkloadSpec& w) {
  if (w.num < 1 || w.num > 10'000'000) throw InputError("--num must be 1 to 10,000,000");
  if (!(w.rate >= 0) || !std::isfinite(w.rate)) throw InputError("--rate must be a non-negative number of requests/s");
  if (!(w.cv > 0) || w.cv > 100) throw InputError("--arrival gamma:CV needs 0 < CV <= 100");
  if (w.shared_prefix < 0 || w.shared_prefix > 10'000'000 || w.prefix_groups < 1 || w.prefix_groups > 1'000'000 || w.hash_block < 1)
    throw InputError("--shared-prefix LEN[:GROUPS]: LEN 0 to 10,000,000 tokens, GROUPS 1 to 1,000,000");
  Rng rng(w.seed);
  std::vector<Request> out;
  out.reserve(static_cast<std::size_t>(w.num));
  double t = 0;
  const double shape = 1 / (w.cv * w.cv);
  std::int64_t total_ids = 0;
  for (std::int64_t i = 0; i < w.num; ++i) {
    if (w.rate > 0) t += (w.cv == 1 ? -std::log1p(-rng.uniform()) : rng.gamma(shape) / shape) / w.rate;
    Request r;
    r.id = std::to_string(i);
    r.id.insert(r.id.begin(), 'r');
    r.arrival = seconds_to_ns(std::min(t, kMaxSeconds));
    r.prompt = rng.length(w.prompt);
    r.output = rng.length(w.output);
    if (w.shared_prefix > 0) {
      const auto g = static_cast<std::int64_t>(rng.uniform() * static_cast<double>(w.prefix_groups)) % w.prefix_groups;
      r.prompt += w.shared_prefix;
      const std::int64_t ids = (r.prompt + w.hash_block - 1) / w.hash_block, shared = w.shared_prefix / w.hash_block;
      total_ids += ids;
      if (total_ids > (std::int64_t{1} << 27))  // 1 GiB of ids: a generated workload that large is a mistake
        throw InputError("--shared-prefix: " + std::to_string(i + 1) + " requests already need " + std::to_string(total_ids) +
                         " hash ids (one per --prefix-hash-block tokens); at most 2^27");
      for (std::int64_t k = 0; k < ids; ++k)  // the group's ids below 2^40, the request's own above
        r.hash_ids.push_back(k < shared ? g * 1'000'000 + k : (std::int64_t{1} << 40) + i * 100'000 + k);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace bneck::serve
