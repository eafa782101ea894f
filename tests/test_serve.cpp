// bneck serve: the model config, the request log, the scheduler and KV manager (hand-computed
// cases), the cost model, and the calibrated forecasts against transformers' continuous-batching
// engine measured on an H200 (validate/reference/h200/serving, made by validate/reference/h200/serving/run_serving.sh).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "helpers.hpp"
#include "serve_helpers.hpp"
#include "models/serving/calibrate.hpp"
#include "models/serving/error_bars.hpp"
#include "sim/base/error.hpp"
#include "traces/importer.hpp"

using namespace bneck;
using namespace bneck::serve;
using namespace bneck::test;
namespace fs = std::filesystem;

namespace {

// A step model whose every step takes `step_ms` of host time (no GPU, no other term).
StepCostModel fixed_step(double step_ms) {
  StepCostModel m;
  m.launch = {step_ms * 1e6, 0, 0};
  m.gemm_rate = m.attn_rate = m.mem_rate = 1e12;
  m.llm.layers = 1;
  return m;
}

Request req(const std::string& id, double arrival_ms, std::int64_t prompt, std::int64_t output) {
  Request r;
  r.id = id;
  r.arrival = static_cast<TimeNs>(arrival_ms * 1e6);
  r.prompt = prompt;
  r.output = output;
  return r;
}

double ms(TimeNs t) { return static_cast<double>(t) / 1e6; }

}  // namespace

TEST_CASE("model config: parameters and KV bytes from a Hugging Face config (hand-computed)", "[serve]") {
  // Llama 2048 hidden, 8192 intermediate, 16 layers, 16 heads of 128, 8 KV heads, vocab 32000:
  // a layer = q,o 2 x 2048 x 2048 + k,v 2 x 2048 x 1024 + gate,up,down 3 x 2048 x 8192
  //         = 8,388,608 + 4,194,304 + 50,331,648 = 62,914,560; x 16 = 1,006,632,960; embedding and
  // LM head 2 x 32000 x 2048 = 131,072,000: 1,137,704,960 parameters, 2,275,409,920 bytes in bf16.
  // KV per token: 2 (K, V) x 16 layers x 8 heads x 128 x 2 bytes = 65,536.
  LlmConfig c = load_llm_config(kServe + "config.json");
  CHECK(c.layer_params() == 62914560.0);
  CHECK(c.params() == 1137704960.0);
  CHECK(c.weight_bytes() == 2275409920ull);
  CHECK(c.kv_bytes_per_token() == 65536ull);
  // 4 GiB of KV memory in blocks of 64 tokens (4 MiB each): 1024 blocks.
  CHECK(blocks_for_memory(4ull << 30, c, 64) == 1024);

  std::string bad = write_tmp("bad.json", R"({"hidden_size": 2048, "num_hidden_layers": 4, "num_attention_heads": 16, "vocab_size": 100})");
  CHECK_THROWS_WITH(load_llm_config(bad), Catch::Contains(bad) && Catch::Contains("'intermediate_size'"));
  std::string neg = write_tmp(
      "neg.json", R"({"hidden_size": -1, "intermediate_size": 1, "num_hidden_layers": 4, "num_attention_heads": 16, "vocab_size": 100})");
  CHECK_THROWS_WITH(load_llm_config(neg), Catch::Contains("'hidden_size' must be a positive integer"));
}

TEST_CASE("request log: measured times read, bad lines named", "[serve]") {
  std::string ok =
      write_tmp("ok.jsonl",
                "{\"id\": \"a\", \"arrival_s\": 0.5, \"prompt_tokens\": 10, \"output_tokens\": 2, \"token_times_s\": [0.6, 0.7]}\n"
                "\n{\"id\": 7, \"arrival_s\": 0.1, \"prompt_tokens\": 3, \"output_tokens\": 1}\n");
  auto r = load_request_log(ok);
  REQUIRE(r.size() == 2);
  CHECK(r[0].id == "7");  // taken in arrival order
  CHECK(r[1].token_times[1] == 700'000'000);
  auto bad = [&](const std::string& line, const std::string& why) {
    std::string p = write_tmp("bad.jsonl", "{\"id\": \"a\", \"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\n" + line + "\n");
    CHECK_THROWS_WITH(load_request_log(p), Catch::Contains(p + ":2") && Catch::Contains(why));
  };
  bad(R"({"id": "b", "arrival_s": -1, "prompt_tokens": 1, "output_tokens": 1})", "'arrival_s' must be between 0 and 1e10 s");
  bad(R"({"id": "b", "arrival_s": 1, "prompt_tokens": 1, "output_tokens": 2, "token_times_s": [1.5, 1.6], "finish_s": 1.55})",
      "'finish_s' precedes the last of token_times_s");
  bad(R"({"id": "b", "arrival_s": 1, "prompt_tokens": 1, "output_tokens": 2, "token_times_s": [1.5, 1.6], "first_token_s": 1.4})",
      "'first_token_s' disagrees");
  bad(R"({"id": "b", "timestamp": 5, "input_length": 1, "output_length": 1, "hash_ids": "x"})", "'hash_ids' must be an array");
  bad(R"({"id": "b", "arrival_s": 1, "prompt_tokens": 1, "output_tokens": 2, "token_times_s": [1.5, 1.2]})", "not ordered");
  bad(R"({"id": "b", "arrival_s": 1, "prompt_tokens": 1, "output_tokens": 2, "token_times_s": [1.5]})", "1 times for 2 output tokens");
  bad(R"({"id": "b", "arrival_s": 1, "prompt_tokens": 0, "output_tokens": 2})", "'prompt_tokens' must be an integer");
  bad(R"({"id": "b", "arrival_s": 1, "output_tokens": 2})", "missing 'prompt_tokens'");
  bad(R"({"id": "b", "prompt_tokens": 1, "output_tokens": 2})", "missing 'arrival_s'");
  bad(R"({"id": "b", "arrival_s": 1, "prompt_tokens": 1, "output_tokens": 1, "first_token_s": 0.5})", "precedes the arrival");
  bad("[1, 2", "malformed JSON");
}

TEST_CASE("request logs as engines and clients write them: late finish, public traces, wall clocks, vllm bench", "[serve]") {
  // A finish 5 us after the last token (an engine's own bookkeeping), no id: read.
  auto late = load_request_log(write_tmp(
      "late.jsonl", R"({"arrival_s": 1, "prompt_tokens": 4, "output_tokens": 2, "token_times_s": [1.5, 1.6], "finish_s": 1.600005})"
                    "\n"));
  REQUIRE(late.size() == 1);
  CHECK(late[0].id == "line 1");
  CHECK(late[0].measured_finish == 1'600'005'000);
  // Mooncake-style JSONL: timestamps in ms, input/output lengths, shared-prefix block ids.
  auto mc = load_request_log(write_tmp("mooncake.jsonl",
                                       R"({"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]})"
                                       "\n"
                                       R"({"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [46]})"
                                       "\n"));
  REQUIRE(mc.size() == 2);
  CHECK(mc[0].arrival == 0);
  CHECK(mc[1].arrival == 27'482'000'000);
  CHECK(mc[1].prompt == 6955);
  CHECK(mc[1].hash_ids == std::vector<std::int64_t>{46, 47});
  // A wall clock (Unix seconds): aligned by the first arrival, token times with it.
  auto wall = load_request_log(
      write_tmp("wall.jsonl", R"({"arrival_s": 1764579600.25, "prompt_tokens": 4, "output_tokens": 1, "token_times_s": [1764579600.75]})"
                              "\n"));
  REQUIRE(wall.size() == 1);
  CHECK(wall[0].arrival == 0);
  CHECK(std::llabs(wall[0].token_times[0] - 500'000'000) < 1000);
  // vllm bench serve's result (pretty-printed): two requests at request_rate 2/s (arrivals 0 and
  // 0.5 s); tokens at arrival + ttft and then by the inter-token latencies.
  auto vb = load_request_log(write_tmp("vllm.json",
                                       "{\n  \"request_rate\": 2,\n  \"input_lens\": [10, 20],\n  \"output_lens\": [3, 2],\n"
                                       "  \"ttfts\": [0.1, 0.2],\n  \"itls\": [[0.01, 0.02], [0.03]]\n}\n"));
  REQUIRE(vb.size() == 2);
  CHECK(vb[1].arrival == 500'000'000);
  CHECK(vb[0].token_times == std::vector<TimeNs>{100'000'000, 110'000'000, 130'000'000});
  CHECK(vb[1].token_times == std::vector<TimeNs>{700'000'000, 730'000'000});
  CHECK(vb[1].prompt == 20);
}

TEST_CASE("continuous batching: chunked prefill and decode, hand-computed", "[serve]") {
  // Every step takes 10 ms. Budget 150 tokens: A (100-token prompt) and B (100) arrive at 0.
  // Step 1 [0, 10]: A's 100 prompt tokens and 50 of B's; A's first token at 10.
  // Step 2 [10, 20]: A decodes (1), B's last 50: A's 2nd and B's 1st token at 20.
  // Step 3 [20, 30]: A and B decode: A's 3rd (done, 3 tokens) and B's 2nd at 30. Step 4: B's 3rd at 40.
  // TTFT A 10, B 20 ms; TPOT 10 ms each; E2E A 30, B 40 ms; 4 steps.
  EngineConfig e;
  e.max_batch_tokens = 150;
  e.block_size = 16;
  e.num_blocks = 100;
  StepCostModel m = fixed_step(10);
  std::vector<Request> rs = {req("A", 0, 100, 3), req("B", 0, 100, 3)};
  ServeResult r = simulate(rs, e, m, true);
  CHECK(r.step_count == 4);
  CHECK(ms(r.requests[0].first_token) == Approx(10));
  CHECK(ms(r.requests[1].first_token) == Approx(20));
  CHECK(ms(r.requests[0].finish) == Approx(30));
  CHECK(ms(r.requests[1].finish) == Approx(40));
  Metrics s = summarize(rs, r.requests, {});
  CHECK(s.ttft.mean == Approx(15));
  CHECK(s.tpot.median == Approx(10));
  CHECK(s.e2el.p99 == Approx(39.9));  // numpy's linear interpolation between 30 and 40
  CHECK(s.duration_s == Approx(0.04));
  CHECK(s.output_throughput == Approx(6 / 0.04));
  // --chunked-prefill 40: A takes 40 + 40 + 20 tokens over three steps (B's first 40, 40, 20 beside
  // them): both first tokens at 30 ms.
  e.chunked_prefill = 40;
  r = simulate(rs, e, m, false);
  CHECK(ms(r.requests[0].first_token) == Approx(30));
  CHECK(ms(r.requests[1].first_token) == Approx(30));
  // Goodput with a 25 ms TTFT SLO: only A (TTFT 10 ms) of the first run counts.
  e.chunked_prefill = 0;
  r = simulate(rs, e, m, false);
  Slo slo;
  slo.ttft = 25 * kNsPerMs - 10 * kNsPerMs;  // 15 ms: A (10) passes, B (20) does not
  CHECK(summarize(rs, r.requests, slo).request_goodput == Approx(1 / 0.04));
}

TEST_CASE("the host's work per step measured on a log's steps where the batch varies (hand-computed)", "[serve]") {
  // The engine that wrote the log: every step's host time is 1.2 x (10 ms + 20 us per query token +
  // 100 us per sequence): a step of 300 query tokens over 5 sequences takes 1.2 x (10 + 6 + 0.5) =
  // 19.8 ms. 24 requests 25 ms apart, prompts 32..492 tokens, 12 outputs each: the log holds the
  // simulated token times. Fitted from a model of 10 ms a step and no slopes: the scale 1.2 and
  // both slopes back, every step told exactly.
  EngineConfig e;
  e.max_batch_tokens = 512;
  e.max_seqs = 16;
  e.block_size = 16;
  e.num_blocks = 4096;
  StepCostModel truth = fixed_step(10);
  truth.launch = {10e6, 100e3, 20e3};
  truth.host_scale = 1.2;
  std::vector<Request> rs;
  for (int i = 0; i < 24; ++i) rs.push_back(req(std::to_string(i), 25.0 * i, 32 + (i * 97) % 461, 12));
  const ServeResult r = simulate(rs, e, truth, true);
  for (std::size_t i = 0; i < rs.size(); ++i) rs[i].token_times = r.requests[i].token_times;
  const std::vector<LogStep> steps = log_steps(rs);
  CHECK(static_cast<std::int64_t>(steps.size()) == r.step_count);
  StepCostModel m = fixed_step(10);
  HostStepFit fit;
  REQUIRE(fit_host_steps(rs, e, m, fit));
  INFO(fit.note);
  CHECK(fit.agreement == Approx(1));
  CHECK(fit.q_fitted);
  CHECK(fit.seq_fitted);
  CHECK(fit.scale == Approx(1.2).epsilon(0.01));
  CHECK(fit.per_token_ns == Approx(20e3).epsilon(0.02));
  CHECK(fit.per_seq_ns == Approx(100e3).epsilon(0.05));
  CHECK(fit.median_abs_log_error < 0.005);

  // One batch shape only (4 requests at once, 8-token prompts, 40 outputs, 4 sequences a step): the
  // decode steps are all 4 tokens over 4 sequences, 1.2 x (10 + 0.08 + 0.4) = 12.576 ms. Neither
  // slope can be told apart from the fixed term: not fitted, the scale takes it all (1.2576).
  std::vector<Request> one;
  for (int i = 0; i < 4; ++i) one.push_back(req(std::to_string(i), 0, 8, 40));
  e.max_seqs = 4;
  const ServeResult r1 = simulate(one, e, truth, true);
  for (std::size_t i = 0; i < one.size(); ++i) one[i].token_times = r1.requests[i].token_times;
  StepCostModel m1 = fixed_step(10);
  HostStepFit f1;
  REQUIRE(fit_host_steps(one, e, m1, f1));
  CHECK_FALSE(f1.q_fitted);
  CHECK_FALSE(f1.seq_fitted);
  CHECK(f1.scale == Approx(1.2576).epsilon(0.01));

  // A log too short to tell anything, and a CUDA-graph engine's: nothing fitted, the model untouched.
  std::vector<Request> few(one.begin(), one.begin() + 1);
  few[0].output = 3;
  few[0].token_times.resize(3);
  StepCostModel m2 = fixed_step(10);
  CHECK_FALSE(fit_host_steps(few, e, m2, f1));
  CHECK(m2.host_scale == 1);
  e.cuda_graph = true;
  CHECK_FALSE(fit_host_steps(rs, e, m2, f1));
}

TEST_CASE("a shape met the first time pays the plan build, a warm-up builds it before, an idle engine wakes late", "[serve]") {
  // Every step 10 ms, plus 30 ms on a shape (q, kv) met the first time. Two requests of a 64-token
  // prompt and 2 output tokens, B arriving when A is done (100 ms), budget 64 tokens:
  //   A: prefill (64, 64) new: 40 ms; decode (1, 65) new: 40 ms -> A's tokens at 40 and 80.
  //   B at 100: the same two shapes again -> 10 + 10: tokens at 110 and 120.
  EngineConfig e;
  e.max_batch_tokens = 64;
  e.block_size = 16;
  e.num_blocks = 100;
  StepCostModel m = fixed_step(10);
  m.shape_build = 30 * kNsPerMs;
  std::vector<Request> rs = {req("A", 0, 64, 2), req("B", 100, 64, 2)};
  ServeResult r = simulate(rs, e, m, false);
  CHECK(ms(r.requests[0].token_times[0]) == Approx(40));
  CHECK(ms(r.requests[0].finish) == Approx(80));
  CHECK(ms(r.requests[1].token_times[0]) == Approx(110));
  CHECK(ms(r.requests[1].finish) == Approx(120));
  CHECK(r.new_shapes == 2);
  // A warm-up that served one such request before: every shape is built, every step 10 ms.
  e.warmup = {req("w", 0, 64, 2)};
  r = simulate(rs, e, m, false);
  CHECK(ms(r.requests[0].finish) == Approx(20));
  CHECK(r.new_shapes == 0);
  // An idle engine waking 2 ms after an arrival: B's steps start at 102 (A's at 2).
  e.wake = 2 * kNsPerMs;
  r = simulate(rs, e, m, false);
  CHECK(ms(r.requests[0].finish) == Approx(22));
  CHECK(ms(r.requests[1].finish) == Approx(122));
  // CUDA graphs: both steps pad to one shape (q to 64, the budget; the cached tokens to 16384, capped
  // at the cache's 1600 tokens; KV read: 64 + 1600). Its first step captures: the build and two eager passes, 30 + 2 x 10 =
  // 50 ms; a replay costs this model nothing (no GPU time, no graph launch time): 1 ns, the least a
  // step takes. A's tokens at 50 ms (+1 ns), B's at 100 ms (+1, +2 ns); one new shape.
  e.warmup.clear();
  e.wake = 0;
  e.cuda_graph = true;
  r = simulate(rs, e, m, false);
  CHECK(r.requests[0].token_times[0] == 50 * kNsPerMs);
  CHECK(r.requests[0].finish == 50 * kNsPerMs + 1);
  CHECK(r.requests[1].finish == 100 * kNsPerMs + 2);
  CHECK(r.new_shapes == 1);
  // A step with prompt tokens (q > seqs) building its plan for 50 ms, decode-only steps for 30:
  // A's prefill 10 + 50 = 60 ms, its decode 10 + 30: tokens at 60 and 100; B (arriving at 100)
  // meets both shapes again: 110 and 120. With CUDA graphs the capture keeps the one build (50 ms).
  m.shape_build_prompt = 50 * kNsPerMs;
  r = simulate(rs, e, m, false);
  CHECK(r.requests[0].token_times[0] == 50 * kNsPerMs);
  e.cuda_graph = false;
  r = simulate(rs, e, m, false);
  CHECK(ms(r.requests[0].token_times[0]) == Approx(60));
  CHECK(ms(r.requests[0].finish) == Approx(100));
  CHECK(ms(r.requests[1].token_times[0]) == Approx(110));
  CHECK(ms(r.requests[1].finish) == Approx(120));
}

TEST_CASE("continuous batching: preemption by recompute when the KV cache is full", "[serve]") {
  // Blocks of 4 tokens, 6 blocks (24 tokens). A and B: 8-token prompts, 8 output tokens each; a
  // sequence of 16 tokens needs 4 blocks, two need 8 > 6: when they both grow past 12 tokens the
  // later one (B) is preempted, freed and recomputed from its 8 + generated tokens after A ends.
  EngineConfig e;
  e.max_batch_tokens = 64;
  e.block_size = 4;
  e.num_blocks = 6;
  StepCostModel m = fixed_step(1);
  std::vector<Request> rs = {req("A", 0, 8, 8), req("B", 0, 8, 8)};
  ServeResult r = simulate(rs, e, m, false);
  CHECK(r.preemptions >= 1);
  CHECK(r.requests[1].preemptions >= 1);
  CHECK(r.requests[0].preemptions == 0);
  for (const auto& q : r.requests) CHECK(q.token_times.size() == 8);
  // A request that can never fit is an error naming it.
  std::vector<Request> big = {req("huge", 0, 30, 8)};
  CHECK_THROWS_WITH(simulate(big, e, m, false), Catch::Contains("request huge") && Catch::Contains("10 KV blocks; the cache has 6"));
}

TEST_CASE("prefix caching: prompt blocks shared by hash_ids are reused while cached, hand-computed", "[serve]") {
  // Blocks of 16 tokens, a hash id per 32 prompt tokens, steps of 10 ms, one output token each, so
  // every request is one prefill step and leaves its blocks cached.
  //   A at 0: 64 tokens, ids [1, 2]: nothing cached, q 64; its 4 blocks enter the cache.
  //   B at 20: 64 tokens, ids [1, 3]: blocks 0-1 (tokens 0-31, id 1) equal A's, 2-3 do not: q 32.
  //   C at 40: ids [1, 2], A's prompt: all 4 blocks cached, but its last token must be computed
  //     (its logits): 3 blocks reused, q 16.
  //   D at 60: 70 tokens, ids [1, 2, 5]: its 4 full blocks are A's; 6 tokens left: q 6.
  // Prompt tokens 64 x 3 + 70 = 262, found cached 0 + 32 + 48 + 64 = 144.
  EngineConfig e;
  e.max_batch_tokens = 1000;
  e.block_size = 16;
  e.num_blocks = 100;
  e.prefix_caching = true;
  e.prefix_hash_block = 32;
  StepCostModel m = fixed_step(10);
  auto with = [](Request r, std::vector<std::int64_t> ids) {
    r.hash_ids = std::move(ids);
    return r;
  };
  std::vector<Request> rs = {with(req("A", 0, 64, 1), {1, 2}), with(req("B", 20, 64, 1), {1, 3}), with(req("C", 40, 64, 1), {1, 2}),
                             with(req("D", 60, 70, 1), {1, 2, 5})};
  ServeResult r = simulate(rs, e, m, true);
  REQUIRE(r.steps.size() == 4);
  CHECK(r.steps[0].shape.q == 64);
  CHECK(r.steps[1].shape.q == 32);
  CHECK(r.steps[2].shape.q == 16);
  CHECK(r.steps[3].shape.q == 6);
  CHECK(r.steps[3].shape.kv == 70);  // the cached tokens are read
  CHECK(r.prompt_tokens == 262);
  CHECK(r.prefix_hit_tokens == 144);
  // Off: every prompt is computed whole.
  e.prefix_caching = false;
  r = simulate(rs, e, m, true);
  CHECK(r.steps[2].shape.q == 64);
  CHECK(r.prefix_hit_tokens == 0);

  // Eviction, least recently released first, a sequence's last blocks before its first. 5 blocks of
  // 16, a hash id per block. A (64 tokens, ids 1-4) leaves 4 blocks cached, 1 free. B (48, ids 9, 8,
  // 7) takes the free block and evicts A's blocks 3 and 2. C (A's prompt) at 40: A's blocks 0 and 1
  // are still cached (q 32) and held; its 2 new blocks evict B's last two (B's were released later).
  e.prefix_caching = true;
  e.prefix_hash_block = 16;
  e.num_blocks = 5;
  rs = {with(req("A", 0, 64, 1), {1, 2, 3, 4}), with(req("B", 20, 48, 1), {9, 8, 7}), with(req("C", 40, 64, 1), {1, 2, 3, 4})};
  r = simulate(rs, e, m, true);
  REQUIRE(r.steps.size() == 3);
  CHECK(r.steps[1].shape.q == 48);
  CHECK(r.steps[2].shape.q == 32);
  CHECK(r.prefix_hit_tokens == 32);

  // Generated with --shared-prefix 1024: 20 prompts of 1,024 + 100 tokens, all at t = 0, budget
  // 8,192. Step 1 computes 7 whole prompts (7,868 tokens) and 324 of the 8th: nothing is cached yet.
  // Step 2: the 8th's other 800, then the 12 waiting requests each find the 1,024 shared tokens
  // (64 blocks, two hash ids of 512) cached and compute 100: 12 x 1,024 = 12,288 hits of 22,480.
  WorkloadSpec w;
  w.num = 20;
  w.prompt = parse_length_dist("100", "--prompt-len");
  w.output = parse_length_dist("1", "--output-len");
  parse_shared_prefix("1024", w);
  rs = generate_requests(w);
  REQUIRE(rs[0].hash_ids.size() == 3);  // ceil(1124 / 512): two shared, the request's own third
  CHECK(rs[0].hash_ids[1] == rs[19].hash_ids[1]);
  CHECK(rs[0].hash_ids[2] != rs[19].hash_ids[2]);
  e = EngineConfig{};
  e.num_blocks = 10000;
  e.prefix_caching = true;
  r = simulate(rs, e, m, true);
  CHECK(r.prompt_tokens == 22480);
  CHECK(r.prefix_hit_tokens == 12288);
  CHECK(r.steps[1].shape.q == 800 + 12 * 100);
  CHECK_THROWS_WITH(parse_shared_prefix("1024:x", w), Catch::Contains("expected LEN or LEN:GROUPS"));

  // A cache too small for the load (preemptions, evictions of cached blocks) with shared prefixes:
  // every request gets all its tokens, and every block comes back (simulate checks it).
  w = WorkloadSpec{};
  w.num = 300;
  w.rate = 200;
  w.prompt = parse_length_dist("16..600", "--prompt-len");
  w.output = parse_length_dist("1..200", "--output-len");
  parse_shared_prefix("700:3", w);
  w.hash_block = 64;
  rs = generate_requests(w);
  e = EngineConfig{};
  e.block_size = 16;
  e.num_blocks = 200;
  e.max_batch_tokens = 2048;
  e.prefix_caching = true;
  e.prefix_hash_block = 64;
  m = fixed_step(1);
  r = simulate(rs, e, m, false);
  CHECK(r.preemptions > 0);
  CHECK(r.prefix_hit_tokens > 0);
  CHECK(r.prefix_hit_tokens < r.prompt_tokens);
  for (std::size_t i = 0; i < rs.size(); ++i) CHECK(static_cast<std::int64_t>(r.requests[i].token_times.size()) == rs[i].output);
}

TEST_CASE("static batching pads to the longest prompt and output, hand-computed", "[serve]") {
  // Steps of 10 ms. A (10-token prompt, 2 outputs) and B (20, 4) form one batch: a prefill of
  // 2 x 20 tokens (10 of them padding) and 3 decode steps of 2 sequences (A's 2nd and 3rd are
  // padding): 4 steps, both returned at 40 ms; 10 + 2 padding tokens.
  EngineConfig e;
  e.policy = Policy::Static;
  e.block_size = 16;
  e.num_blocks = 100;
  StepCostModel m = fixed_step(10);
  std::vector<Request> rs = {req("A", 0, 10, 2), req("B", 0, 20, 4)};
  ServeResult r = simulate(rs, e, m, true);
  CHECK(r.step_count == 4);
  CHECK(r.padded_tokens == 12);
  CHECK(ms(r.requests[0].finish) == Approx(40));
  CHECK(ms(r.requests[1].finish) == Approx(40));
  CHECK(r.steps[0].shape.q == 40);
  CHECK(r.steps[3].shape.kv == 2 * 23);  // 20 prompt + 3 generated tokens per sequence
}

TEST_CASE("a static engine's log: its batches are the requests that finished together", "[serve]") {
  // Finishes 2, 1, 2, 1, 3 s: batches {1, 3} (1 s), {0, 2} (2 s), {4} (3 s). With a token time on
  // one request it is a continuous engine's log; all finishes apart, no batch shows.
  std::vector<Request> rs;
  const std::vector<std::pair<const char*, double>> finish = {{"r0", 2.0}, {"r1", 1.0}, {"r2", 2.0}, {"r3", 1.0}, {"r4", 3.0}};
  for (const auto& [id, f] : finish) {
    rs.push_back(req(id, 0, 10, 2));
    rs.back().measured_finish = static_cast<TimeNs>(f * 1e9);
  }
  CHECK(static_log(rs));
  const auto b = static_batches(rs);
  REQUIRE(b.size() == 3);
  CHECK(b[0] == std::vector<std::size_t>{1, 3});
  CHECK(b[1] == std::vector<std::size_t>{0, 2});
  CHECK(b[2] == std::vector<std::size_t>{4});
  // Its steps: batch {0, 2} (prompts 10, 2 outputs each) is a prefill of 2 x 10 and one decode over 2 x 11.
  CHECK(static_step_shape(2, 10, 0).q == 20);
  CHECK(static_step_shape(2, 10, 1).q == 2);
  CHECK(static_step_shape(2, 10, 1).kv == 22);
  // The same finishes with arrivals that make {1, 3} not the first requests to come: not a static
  // engine's batches (a continuous engine can finish two requests in one step).
  std::vector<Request> late = rs;
  late[1].arrival = late[3].arrival = 5'000'000;
  CHECK_FALSE(static_log(late));
  std::vector<Request> apart = rs;
  for (std::size_t i = 0; i < apart.size(); ++i) apart[i].measured_finish = static_cast<TimeNs>((i + 1) * 1000);
  CHECK_FALSE(static_log(apart));
  rs[0].token_times = {rs[0].measured_finish};
  CHECK_FALSE(static_log(rs));
}

TEST_CASE("step cost model: roofline features and CUDA-graph padding (hand-computed)", "[serve]") {
  LlmConfig c = load_llm_config(kServe + "config.json");
  HwSpec hw = load_target_hw("h200-sxm");
  StepCostModel m = hardware_step_model(c, hw);
  // One decode token: the projections read their weights once: 16 x 62,914,560 x 2 bytes =
  // 2,013,265,920 bytes at the calibrated bandwidth, plus the LM head's 131 MB... in the memory-
  // bound regime the GEMM feature is bytes / bandwidth.
  StepShape one;
  one.q = one.seqs = one.logits = 1;
  one.kv = 100;
  one.qkv_seq = 100;
  auto f = m.features(one);
  const double weights = 16 * 62914560.0 * 2 + 16 * 2048.0 * 2 * 6;  // + one token's activations, 6 passes
  const double head = 32000.0 * 2048 * 2;
  CHECK(f[1] == Approx((weights + head) / m.mem_rate * 1e9).epsilon(1e-9));
  // 4096 tokens: compute-bound, 2 x 4096 x 62,914,560 x 16 FLOPs at the GEMM rate.
  StepShape big = one;
  big.q = 4096;
  CHECK(m.features(big)[1] == Approx((2.0 * 4096 * 62914560 * 16 / m.gemm_rate + head / m.mem_rate) * 1e9).epsilon(1e-9));
  // Attention per sequence: 4 x 16 heads x 128 x (q x kv) per layer; packed: q x kv of the batch.
  StepShape two;
  two.q = two.seqs = two.logits = 2;
  two.kv = 300;
  two.qkv_seq = 300;  // decode: 1 x 100 + 1 x 200
  CHECK(m.features(two)[2] == Approx(16 * 4.0 * 2048 * 300 / m.attn_rate * 1e9));
  m.form = AttentionForm::Packed;
  CHECK(m.features(two)[2] == Approx(16 * 4.0 * 2048 * 600 / m.attn_rate * 1e9));
  // CUDA graphs: 100 query tokens padded to 128 (interval 64), 3000 KV tokens to 16384.
  EngineConfig e;
  e.max_batch_tokens = 512;
  e.block_size = 64;
  e.num_blocks = 1024;
  e.cuda_graph = true;
  StepCostModel fixed = fixed_step(1);
  ServeResult r = simulate({req("A", 0, 100, 1)}, e, fixed, false);
  CHECK(r.padded_tokens == 28);
  // The KV read pads its cached tokens, not the step's own (transformers' maybe_pad_inputs): a
  // 127-token prompt and 3 output tokens, query tokens to 64s, cached tokens to 128s. Prefill: q 127
  // -> 128, nothing cached -> 128: (128, 128 + 128). Decodes: q 1 -> 64; 127 then 128 cached -> 128
  // both: (64, 64 + 128) twice. 2 shapes; padding the whole KV (128 then 129 tokens) would make 3.
  e.padding = {64, 128};
  r = simulate({req("A", 0, 127, 3)}, e, fixed, false);
  CHECK(r.step_count == 3);
  CHECK(r.new_shapes == 2);
  // A graph's padded attention: the pairs padding adds are priced at the roofline, the step's own
  // at the fitted rate. Attention alone, 43x the roofline (as fitted on one capture's eager steps):
  // a 512-token prompt over nothing cached, 512 x 512 pairs, padded to 512 x (512 + 16384). Each
  // pair costs 16 layers x 4 x 2048 / attn_rate; the prompt's own 262,144 at 43x, the 8,388,608
  // added at 1x: (43 x 262,144 + 8,388,608) pairs' worth, 19,660,800 (not 43 x 8,650,752).
  m.form = AttentionForm::PerSequence;
  m.gpu = {0, 0, 43, 0, 0, 0};
  m.kernels_per_step = 0;
  StepShape prompt;
  prompt.q = prompt.kv = 512;
  prompt.seqs = prompt.logits = 1;
  prompt.qkv_seq = 512.0 * 512;
  StepShape padded = prompt;
  padded.kv = 512 + 16384;
  padded.qkv_seq = 512.0 * (512 + 16384);
  const double pair_ns = 16 * 4.0 * 2048 / m.attn_rate * 1e9;
  CHECK(static_cast<double>(m.time(prompt, true, false, &padded).gpu) == Approx(19660800 * pair_ns).margin(1));
  CHECK(static_cast<double>(m.time(prompt, false).gpu) == Approx(43 * 262144 * pair_ns).margin(1));
  // A fitted rate at or under the roofline prices the padding at that rate.
  m.gpu = {0, 0, 0.5, 0, 0, 0};
  CHECK(static_cast<double>(m.time(prompt, true, false, &padded).gpu) == Approx(0.5 * 8650752 * pair_ns).margin(1));
}

TEST_CASE("nnls: non-negative least squares (hand-computed)", "[serve]") {
  // y = 2 + 3x exactly, and a third column that least squares would give a negative weight.
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  for (int x = 0; x < 10; ++x) {
    a.push_back({1.0, static_cast<double>(x), static_cast<double>(x * x)});
    b.push_back(2 + 3 * x - 0.01 * x * x);
  }
  auto c = nnls(a, b);
  CHECK(c[2] == 0.0);
  CHECK(c[0] >= 0);
  CHECK(c[1] > 2.8);
  std::vector<double> exact;
  for (int x = 0; x < 10; ++x) exact.push_back(2 + 3 * x);
  c = nnls(a, exact);
  CHECK(c[0] == Approx(2));
  CHECK(c[1] == Approx(3));
  CHECK(c[2] == Approx(0).margin(1e-12));
}

TEST_CASE("generated workloads: Poisson arrivals at the rate, lengths in range, deterministic", "[serve]") {
  WorkloadSpec w;
  w.rate = 10;
  w.num = 20000;
  w.prompt = parse_length_dist("32..512", "--prompt-len");
  w.output = parse_length_dist("lognormal:100,0.5", "--output-len");
  auto a = generate_requests(w), b = generate_requests(w);
  REQUIRE(a.size() == 20000);
  CHECK(a.back().arrival == b.back().arrival);
  // 20000 gaps of mean 100 ms: 2000 s within 3 % (the sum's sd is 100 ms x sqrt(20000) = 14 s).
  CHECK(ms(a.back().arrival) / 1e3 == Approx(2000).epsilon(0.03));
  for (const auto& r : a) CHECK((r.prompt >= 32 && r.prompt <= 512));
  CHECK_THROWS_WITH(parse_length_dist("12..5", "--prompt-len"), Catch::Contains("HI is below LO"));
  CHECK_THROWS_WITH(parse_length_dist("abc", "--prompt-len"), Catch::Contains("expected N, LO..HI"));
}

// The host-pace term of a serving interval (models/serving/error_bars.hpp), by hand. TPOT's fit
// errors {+2.3, +8.9, -4.3, +11.7, -3.5, +5.6, +0.4, +0.7 %}: bias b = 2.725 %, sample s = 5.666 %,
// w = t(0.9, 7) x s x sqrt(1 + 1/8) = 1.415 x 5.666 x 1.0607 = 8.504 %. The repeats' deviations
// from their runs' means (9 runs) give the pace p = t(0.9, 8) x 9.161 % x sqrt(1 + 1/9) = 13.49 %.
// A host-bound forecast of 100 ms at the calibration's load: half-width sqrt(w^2 + p^2) = 15.95 %,
// the measured median in [100 / 1.1867, 100 / 0.8677] = [84.27, 115.24] ms. A calibration run whose
// own pace moved 30 % over stretches of its steps takes p = 30 %: sqrt(w^2 + 0.3^2) = 31.18 %, [74.68,
// 139.78] ms; one that moved 10 % (under the repeats') changes nothing. TTFT's pace takes the same
// move in its repeats' proportion: 0.3 x 23.64 / 13.49 = 52.58 %; with TTFT's fit errors (b = 1.375 %,
// w = 13.22 %) the half-width is 54.21 %, [100 / 1.5559, 100 / 0.4716] = [64.27, 212.05] ms.
TEST_CASE("serving intervals: the calibration run's own pace widens the host's term (hand-computed)", "[serve][error_bar]") {
  ServeBarInputs in;
  in.calibrated = true;
  in.gpu_fraction = 0.1;
  in.ttft = in.tpot = in.e2el = 100;
  in.duration = 10;
  const ServeBars plain = serve_error_bars(in);
  CHECK(plain.tpot_ms[0] == Approx(84.27).epsilon(2e-4));
  CHECK(plain.tpot_ms[1] == Approx(115.24).epsilon(2e-4));
  in.calibration_pace = 0.10;
  const ServeBars small = serve_error_bars(in);
  CHECK(small.tpot_ms[0] == plain.tpot_ms[0]);
  CHECK(small.ttft_ms[1] == plain.ttft_ms[1]);
  in.calibration_pace = 0.30;
  const ServeBars wide = serve_error_bars(in);
  CHECK(wide.tpot_ms[0] == Approx(74.68).epsilon(2e-4));
  CHECK(wide.tpot_ms[1] == Approx(139.78).epsilon(2e-4));
  CHECK(wide.ttft_ms[0] == Approx(64.27).epsilon(2e-4));
  CHECK(wide.ttft_ms[1] == Approx(212.05).epsilon(2e-4));
  CHECK(std::any_of(wide.basis.begin(), wide.basis.end(),
                    [](const std::string& b) { return b.find("calibration run's own pace") != std::string::npos; }));
}

TEST_CASE("a step is host-bound where its launches take at least the GPU's lag and work", "[serve]") {
  // Launches 10 ms + 0.5 ms a sequence; the GPU 2 ms + 1 ms a sequence (gpu[4], ns a sequence),
  // lag 0.5 ms, tail 0.3 ms. 4 sequences: launches 12 ms >= 0.5 + 6 ms: host-bound, the forward
  // 12 + 0.3 = 12.3 ms. 16 sequences: launches 18 ms < 0.5 + 18 ms: GPU-bound, the forward
  // 0.5 + 18 + 0.3 = 18.8 ms. Under CUDA graphs never host-bound (one launch, then the GPU).
  StepCostModel m = fixed_step(10);
  m.launch[1] = 0.5e6;
  m.gpu = {2e6, 0, 0, 0, 1e6, 0};
  m.lag = 500'000;
  m.tail = 300'000;
  StepShape four, sixteen;
  four.seqs = four.q = four.logits = 4;
  sixteen.seqs = sixteen.q = sixteen.logits = 16;
  const StepTime a = m.time(four, false, false), b = m.time(sixteen, false, false), g = m.time(four, true, false);
  CHECK(a.host_bound);
  CHECK(a.forward == 12'300'000);
  CHECK_FALSE(b.host_bound);
  CHECK(b.forward == 18'800'000);
  CHECK_FALSE(g.host_bound);
}
