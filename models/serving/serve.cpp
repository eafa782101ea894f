#include "models/serving/serve.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <fstream>
#include <limits>
#include <random>

#include "sim/base/error.hpp"
#include "sim/base/json_input.hpp"

namespace bneck::serve {
using nlohmann::json;

namespace {

constexpr double kMaxSeconds = 1e6;  // 11 days: past that a log's time is an error, not a run
constexpr std::int64_t kMaxTokens = 1 << 24;

TimeNs seconds_to_ns(double s) { return static_cast<TimeNs>(std::llround(s * 1e9)); }

}  // namespace

std::vector<Request> load_request_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open the request log");
  std::vector<Request> out;
  std::string line;
  std::size_t ln = 0;
  while (std::getline(in, line)) {
    ++ln;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(ln);
    if (line.size() > (64u << 20)) throw InputError(where, "line longer than 64 MiB");
    json j = parse_json_input(line, where);
    if (!j.is_object()) throw InputError(where, "a request is a JSON object");
    Request r;
    auto seconds = [&](const json& v, const char* key) {
      if (!v.is_number()) throw InputError(where, std::string("'") + key + "' must be a number of seconds");
      double s = v.get<double>();
      if (!std::isfinite(s) || s < 0 || s > kMaxSeconds) throw InputError(where, std::string("'") + key + "' must be between 0 and 1e6 s");
      return seconds_to_ns(s);
    };
    auto tokens = [&](const char* key) {
      auto it = j.find(key);
      if (it == j.end()) throw InputError(where, std::string("missing '") + key + "'");
      if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > kMaxTokens)
        throw InputError(where, std::string("'") + key + "' must be an integer from 1 to 2^24");
      return it->get<std::int64_t>();
    };
    with_json_errors(where, [&] {
      auto id = j.find("id");
      if (id == j.end()) throw InputError(where, "missing 'id'");
      r.id = id->is_string() ? id->get<std::string>() : id->dump();
      if (!j.contains("arrival_s")) throw InputError(where, "missing 'arrival_s'");
      r.arrival = seconds(j["arrival_s"], "arrival_s");
      r.prompt = tokens("prompt_tokens");
      r.output = tokens("output_tokens");
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
      for (const char* key : {"first_token_s", "finish_s"}) {
        if (!j.contains(key)) continue;
        TimeNs t = seconds(j[key], key);
        if (t < r.arrival) throw InputError(where, std::string("'") + key + "' precedes the arrival");
        if (!r.token_times.empty() && std::llabs(t - (key[0] == 'f' && key[1] == 'i' && key[2] == 'r' ? r.token_times.front() : r.token_times.back())) > 1000)
          throw InputError(where, std::string("'") + key + "' disagrees with token_times_s");
      }
      if (j.contains("finish_s")) r.measured_finish = seconds(j["finish_s"], "finish_s");
      if (j.contains("first_token_s") && j.contains("finish_s") && r.token_times.empty()) {
        TimeNs a = seconds(j["first_token_s"], "first_token_s"), b = seconds(j["finish_s"], "finish_s");
        if (b < a) throw InputError(where, "'finish_s' precedes 'first_token_s'");
        // No per-token times: spread the tokens evenly between the first and the last.
        for (std::int64_t k = 0; k < r.output; ++k) r.token_times.push_back(r.output == 1 ? a : a + (b - a) * k / (r.output - 1));
      }
    });
    r.line = ln;
    out.push_back(std::move(r));
    if (out.size() > 10'000'000) throw InputError(path, "more than 10 million requests");
  }
  if (out.empty()) throw InputError(path, "no requests");
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
      admit_arrivals();
      if (waiting_.empty() && running_.empty()) {
        if (next_ >= reqs_.size()) break;
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
      const StepTime t = step_time(sh, ps);
      record(sh, prefills, t);
      now_ += std::max<TimeNs>(t.total(), 1);
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

double percentile(std::vector<double> v, double p) {  // linear interpolation (numpy's default)
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double x = p / 100 * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(x)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (x - static_cast<double>(lo));
}

Metrics::Stat stat(const std::vector<double>& v) {
  Metrics::Stat s;
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.n = v.size();
  s.mean = sum / static_cast<double>(v.size());
  s.median = percentile(v, 50);
  s.p99 = percentile(v, 99);
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
