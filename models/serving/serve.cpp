// LLM serving: the engine's scheduler and KV-cache block manager (static and continuous batching).
#include "models/serving/serve.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "sim/base/error.hpp"

namespace bneck::serve {

std::int64_t blocks_for_memory(Bytes kv_memory, const LlmConfig& llm, std::int64_t block_size) {
  const double per_block = static_cast<double>(llm.kv_bytes_per_token()) * static_cast<double>(block_size);
  return per_block > 0 ? static_cast<std::int64_t>(static_cast<double>(kv_memory) / per_block) : 0;
}

Bytes default_kv_memory(const HwSpec& hw, const LlmConfig& llm, const EngineConfig& eng) {
  const double mem = 0.9 * static_cast<double>(hw.gpu.memory_bytes);
  const double bytes = dtype_bytes(llm.dtype);
  const double act =
      static_cast<double>(eng.max_batch_tokens) * (static_cast<double>(llm.hidden) * 4 + static_cast<double>(llm.intermediate) * 3) * bytes;
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
  std::int64_t blocks = 0;     // its block table's length
  std::int64_t cached = 0;     // of them, the leading blocks held through the prefix cache
};

// A block's key from the keys before it: hash_combine, then splitmix64's finalizer.
std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The prefix-cache keys of a request's full prompt blocks: block j (tokens [jB, (j+1)B)) is equal
// in two requests when their hash ids agree up to the one covering its last token.
// At most `limit` + 1 keys (the caller refuses more).
std::vector<std::uint64_t> prefix_keys(const Request& r, std::int64_t block, std::int64_t hash_block, std::size_t limit) {
  std::vector<std::uint64_t> keys;
  std::uint64_t chain = 0;
  std::int64_t chained = 0;  // hash ids folded into chain
  for (std::int64_t j = 0; (j + 1) * block <= r.prompt && keys.size() <= limit; ++j) {
    const std::int64_t k = ((j + 1) * block - 1) / hash_block;
    if (k >= static_cast<std::int64_t>(r.hash_ids.size())) break;
    for (; chained <= k; ++chained) chain = mix(chain, static_cast<std::uint64_t>(r.hash_ids[static_cast<std::size_t>(chained)]));
    keys.push_back(mix(chain, static_cast<std::uint64_t>(j)));
  }
  return keys;
}

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
                         std::to_string(reqs[i].prompt) + " + " + std::to_string(reqs[i].output) + " tokens) needs " +
                         std::to_string(need) + " KV blocks; the cache has " + std::to_string(eng.num_blocks));
    }
    free_ = eng.num_blocks;
    if (eng.prefix_caching && eng.policy == Policy::Continuous) {
      if (eng.prefix_hash_block < 1) throw InputError("the prefix hash block must be positive");
      keys_.resize(reqs.size());
      std::size_t total = 0;
      for (std::size_t i = 0; i < reqs.size(); ++i) {
        constexpr std::size_t kMost = std::size_t{1} << 27;
        keys_[i] = prefix_keys(reqs[i], eng.block_size, eng.prefix_hash_block, kMost - total);
        total += keys_[i].size();
        if (total > kMost)
          throw InputError("--prefix-caching: the requests' prompts hold more than 2^27 full KV blocks with hash ids (" +
                           std::to_string(i + 1) + " requests); use a larger --block-size");
      }
      cache_.reserve(std::min<std::size_t>(total, static_cast<std::size_t>(eng.num_blocks)));
    }
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
    // Every block is back: free, or cached and held by none (a replay may end with sequences running).
    if (!replay && running_.empty() && available() != eng_.num_blocks)
      throw std::logic_error("serve: KV blocks lost (" + std::to_string(available()) + " of " + std::to_string(eng_.num_blocks) + ")");
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
  // Prefix cache: blocks by key, with the sequences holding them; those none holds are evictable,
  // least recently released first (lru_ by release stamp).
  struct Cached {
    std::int64_t ref = 0;
    std::uint64_t stamp = 0;
  };
  std::vector<std::vector<std::uint64_t>> keys_;  // per request (empty: no prefix caching)
  std::unordered_map<std::uint64_t, Cached> cache_;
  std::set<std::pair<std::uint64_t, std::uint64_t>> lru_;  // (stamp, key) of blocks none holds
  std::uint64_t clock_ = 0;

  const std::vector<std::uint64_t>& keys_of(std::size_t req) const {
    static const std::vector<std::uint64_t> none;
    return keys_.empty() ? none : keys_[req];
  }

  // Blocks a new allocation can have: the free ones and the cached ones none holds.
  std::int64_t available() const { return free_ + static_cast<std::int64_t>(lru_.size()); }

  // Takes n blocks (n <= available()): free ones first, then the least recently released cached ones.
  void take(std::int64_t n) {
    const std::int64_t f = std::min(n, free_);
    free_ -= f;
    for (n -= f; n > 0; --n) {
      cache_.erase(lru_.begin()->second);
      lru_.erase(lru_.begin());
    }
  }

  // Gives a sequence's blocks back: its own to the free list, its cached ones (last first) to the LRU.
  void release(Seq& s) {
    free_ += s.blocks - s.cached;
    const auto& keys = keys_of(s.req);
    for (std::int64_t j = s.cached - 1; j >= 0; --j) {
      const std::uint64_t key = keys[static_cast<std::size_t>(j)];
      Cached& c = cache_.at(key);
      if (--c.ref == 0) {
        c.stamp = ++clock_;
        lru_.emplace(c.stamp, key);
      }
    }
    s.blocks = s.cached = 0;
  }

  // Holds a cached block for a sequence.
  void hold(std::uint64_t key) {
    Cached& c = cache_.at(key);
    if (c.ref++ == 0) lru_.erase({c.stamp, key});
  }

  // The leading prompt blocks of a sequence that is to start (nothing computed) found in the
  // cache, leaving at least its last token to compute; and how many of them none holds now.
  std::int64_t prefix_hits(const Seq& s, std::int64_t& unheld) const {
    unheld = 0;
    if (keys_.empty() || s.computed > 0) return 0;
    const auto& keys = keys_of(s.req);
    const std::int64_t most = std::min<std::int64_t>(static_cast<std::int64_t>(keys.size()), (context(s) - 1) / eng_.block_size);
    std::int64_t n = 0;
    for (; n < most; ++n) {
      auto it = cache_.find(keys[static_cast<std::size_t>(n)]);
      if (it == cache_.end()) break;
      unheld += it->second.ref == 0 ? 1 : 0;
    }
    return n;
  }

  // A sequence's prompt blocks that are full now enter the cache (or, when an equal block entered
  // meanwhile, its own copy is freed and the cached one held).
  void cache_full_blocks(Seq& s) {
    if (keys_.empty()) return;
    const auto& keys = keys_of(s.req);
    while (s.cached < static_cast<std::int64_t>(keys.size()) && (s.cached + 1) * eng_.block_size <= s.computed) {
      const std::uint64_t key = keys[static_cast<std::size_t>(s.cached)];
      auto [it, fresh] = cache_.try_emplace(key, Cached{1, 0});
      if (!fresh) {
        hold(key);
        ++free_;
      }
      ++s.cached;
    }
  }

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
    res_.gpu_busy += std::min(t.gpu, t.total());
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
    // As transformers' engine pads (ContinuousBatchProcessor.maybe_pad_inputs): the query tokens to
    // their interval, the cached tokens read (the KV less this step's own tokens) to theirs; the
    // attention reads the padded query tokens plus the padded cache.
    StepShape p = s;
    p.q = up(s.q, eng_.padding.q_interval, eng_.max_batch_tokens);
    p.kv = p.q + up(s.kv - s.q, eng_.padding.kv_interval, eng_.num_blocks * eng_.block_size);
    if (p.q > s.q || p.kv > s.kv) p.qkv_seq = s.qkv_seq * static_cast<double>(p.kv) / static_cast<double>(std::max<std::int64_t>(s.kv, 1));
    return p;
  }

  void preempt(std::size_t pos) {
    Seq s = running_[pos];
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(pos));
    release(s);
    s.computed = 0;
    ++res_.requests[s.req].preemptions;
    ++res_.preemptions;
    waiting_.push_front(s);
  }

  struct Pick {
    std::size_t pos;  // in running_
    std::int64_t q;   // tokens it computes this step
  };
  // The step being formed: the sequences picked and what is left of the step's budgets.
  struct Plan {
    std::vector<Pick> batch;
    std::vector<char> in_batch;  // by position in running_
    std::int64_t budget = 0, seqs_left = 0;
    bool preempted = false;
  };

  // Running sequences: decodes first, then unfinished prefills, each in admission order.
  void pick_running(Plan& p) {
    for (int pass = 0; pass < 2; ++pass) {
      std::size_t i = 0;
      while (i < running_.size() && p.budget > 0 && p.seqs_left > 0) {
        const std::int64_t need = context(running_[i]) - running_[i].computed;
        if (p.in_batch[i] || (pass == 0) != (need == 1)) {
          ++i;
          continue;
        }
        std::int64_t q = std::min(need, p.budget);
        if (need > 1 && eng_.chunked_prefill > 0) q = std::min(q, eng_.chunked_prefill);
        const std::int64_t more = ceil_div(running_[i].computed + q, eng_.block_size) - running_[i].blocks;
        bool self = false;
        while (more > available()) {  // preempt the latest admitted sequence not in this step (i itself at worst)
          std::size_t victim = running_.size() - 1;
          while (p.in_batch[victim]) --victim;
          preempt(victim);
          p.in_batch.erase(p.in_batch.begin() + static_cast<std::ptrdiff_t>(victim));
          for (auto& b : p.batch)
            if (b.pos > victim) --b.pos;
          p.preempted = true;
          if (victim == i) {
            self = true;
            break;
          }
        }
        if (self) continue;
        running_[i].blocks += more;
        take(more);
        p.batch.push_back({i, q});
        p.in_batch[i] = 1;
        p.budget -= q;
        --p.seqs_left;
        ++i;
      }
    }
  }

  // Waiting requests, first come first served, while blocks stay above the watermark.
  void pick_waiting(Plan& p) {
    const std::int64_t reserve = static_cast<std::int64_t>(std::ceil(eng_.watermark * static_cast<double>(eng_.num_blocks)));
    while (!p.preempted && !waiting_.empty() && p.budget > 0 && p.seqs_left > 0) {
      Seq& s = waiting_.front();
      std::int64_t unheld = 0;
      const std::int64_t hits = prefix_hits(s, unheld), hit_tokens = hits * eng_.block_size;
      const std::int64_t need = context(s) - s.computed - hit_tokens;
      std::int64_t q = std::min(need, p.budget);
      if (eng_.chunked_prefill > 0) q = std::min(q, eng_.chunked_prefill);
      const std::int64_t more = ceil_div(s.computed + hit_tokens + q, eng_.block_size) - s.blocks - hits;
      const std::int64_t left = available() - unheld;  // the hit blocks none holds are no longer free to take
      if (more > left || (!p.batch.empty() && left - more < reserve)) break;
      const auto& keys = keys_of(s.req);
      for (std::int64_t j = 0; j < hits; ++j) hold(keys[static_cast<std::size_t>(j)]);
      if (s.computed == 0) res_.prompt_tokens += context(s);
      res_.prefix_hit_tokens += hit_tokens;
      s.computed += hit_tokens;
      s.cached = hits;
      s.blocks += hits + more;
      take(more);
      if (res_.requests[s.req].scheduled < 0) res_.requests[s.req].scheduled = now_;
      running_.push_back(s);
      p.in_batch.push_back(1);
      waiting_.pop_front();
      p.batch.push_back({running_.size() - 1, q});
      p.budget -= q;
      --p.seqs_left;
    }
  }

  // The step's shape, and how many of its sequences are prefills.
  StepShape shape_of(const std::vector<Pick>& batch, std::int64_t& prefills) const {
    StepShape sh;
    for (const auto& b : batch) {
      const Seq& s = running_[b.pos];
      sh.q += b.q;
      sh.kv += s.computed + b.q;
      sh.qkv_seq += static_cast<double>(b.q) * static_cast<double>(s.computed + b.q);
      ++sh.seqs;
      if (s.computed + b.q == context(s)) ++sh.logits;
      if (b.q > 1 || s.generated == 0) ++prefills;
    }
    return sh;
  }

  // Tokens: a sequence whose context is now all in the cache samples one; finished ones leave.
  void emit_tokens(const std::vector<Pick>& batch) {
    std::vector<bool> done(running_.size(), false);
    for (const auto& b : batch) {
      Seq& s = running_[b.pos];
      s.computed += b.q;
      cache_full_blocks(s);
      if (s.computed < context(s)) continue;
      ++s.generated;
      auto& rr = res_.requests[s.req];
      rr.token_times.push_back(now_);
      if (rr.first_token < 0) rr.first_token = now_;
      if (s.generated >= reqs_[s.req].output) {
        rr.finish = now_;
        release(s);
        done[b.pos] = true;
      }
    }
    std::size_t w = 0;
    for (std::size_t i = 0; i < running_.size(); ++i)
      if (!done[i]) running_[w++] = running_[i];
    running_.resize(w);
  }

  void run_continuous() {
    Plan p;
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
      p.batch.clear();
      p.budget = eng_.max_batch_tokens;
      p.seqs_left = eng_.max_seqs;
      p.preempted = false;
      p.in_batch.assign(running_.size(), 0);
      pick_running(p);
      pick_waiting(p);
      if (p.batch.empty()) {
        if (replay) {
          replay_idle();
          continue;
        }
        // Nothing fits (blocks held by sequences that wait for others): advance to the next arrival.
        if (next_ < reqs_.size()) {
          now_ = std::max(now_ + 1, reqs_[next_].arrival);
          continue;
        }
        throw InputError("the KV cache cannot hold any waiting request next to the running ones (" + std::to_string(eng_.num_blocks) +
                         " blocks)");
      }
      std::int64_t prefills = 0;
      const StepShape sh = shape_of(p.batch, prefills);
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
      emit_tokens(p.batch);
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
        const StepShape sh = static_step_shape(b, lmax, step);
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

}  // namespace

StepShape static_step_shape(std::int64_t b, std::int64_t lmax, std::int64_t step) {
  StepShape sh;
  sh.batched = true;
  sh.seqs = sh.logits = b;
  const std::int64_t ctx = lmax + step;
  sh.q = step == 0 ? b * lmax : b;
  sh.kv = b * ctx;  // the prompt and the tokens generated so far (the last one fed now)
  sh.qkv_seq = step == 0 ? static_cast<double>(b) * static_cast<double>(lmax) * static_cast<double>(lmax)
                         : static_cast<double>(b) * static_cast<double>(ctx);
  return sh;
}

std::vector<std::vector<std::size_t>> static_batches(const std::vector<Request>& log) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < log.size(); ++i)
    if (log[i].measured_finish >= 0) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return log[a].measured_finish < log[b].measured_finish; });
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || log[order[k]].measured_finish != log[order[k - 1]].measured_finish) out.emplace_back();
    out.back().push_back(order[k]);
  }
  for (auto& g : out) std::sort(g.begin(), g.end());
  return out;
}

bool static_log(const std::vector<Request>& log) {
  std::size_t finished = 0;
  for (const auto& r : log) {
    if (!r.token_times.empty()) return false;
    finished += r.measured_finish >= 0 ? 1 : 0;
  }
  const auto batches = static_batches(log);
  if (finished < 2 || batches.size() == finished) return false;
  // A static engine takes its batches first come first served: no request of a batch arrived after
  // one of a batch that finished later.
  TimeNs later_first = std::numeric_limits<TimeNs>::max();
  for (std::size_t g = batches.size(); g-- > 0;) {
    TimeNs first = std::numeric_limits<TimeNs>::max(), last = std::numeric_limits<TimeNs>::min();
    for (std::size_t i : batches[g]) first = std::min(first, log[i].arrival), last = std::max(last, log[i].arrival);
    if (last > later_first) return false;
    later_first = std::min(later_first, first);
  }
  return true;
}

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

}  // namespace bneck::serve
