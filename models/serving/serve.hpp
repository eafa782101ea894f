// LLM serving simulation: a request-level discrete-event simulation of an inference engine
// (arrivals, a scheduler, a paged KV-cache block manager with preemption by recompute) over the
// per-step cost model of llm.hpp. Time is integer nanoseconds; the result is deterministic.
//
// Policies:
// - continuous (iteration-level batching, as vLLM and transformers' continuous batching): every
//   step takes the running sequences in admission order, decodes first (one token each), then
//   unfinished prefills, then waiting requests first-come first-served, each getting as many of its
//   prompt tokens as the step's token budget (--max-batch-tokens) and --chunked-prefill allow, up to
//   --max-seqs sequences; a sequence holds ceil(tokens / block size) KV blocks; when a running
//   sequence needs a block and none is free, the most recently admitted running sequence is
//   preempted (its blocks freed, recomputed later from its prompt and the tokens it generated);
//   waiting requests are admitted only while the free blocks stay above the watermark. With
//   prefix caching (vLLM's automatic prefix caching) a full prompt block whose tokens equal an
//   earlier request's (the log's hash_ids) is reused while it stays cached: the request computes
//   only the rest of its prompt (at least its last token); blocks no sequence holds stay cached
//   until a new block is needed, the least recently released first (a sequence's last blocks
//   before its first).
// - static: when the engine is free it takes up to --max-seqs waiting requests, pads them to the
//   longest prompt, and runs one prefill and as many decode steps as the longest output needs;
//   every request of the batch is returned when the batch ends.
#pragma once
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "models/serving/llm.hpp"

namespace bneck::serve {

struct Request {
  std::string id;
  TimeNs arrival = 0;
  std::int64_t prompt = 0, output = 0;
  // Measured (a log of a real run): times of each output token, first and last.
  std::vector<TimeNs> token_times;
  TimeNs measured_finish = -1;  // finish_s (a static batch's log has no token times)
  std::size_t line = 0;         // in its log (0: generated)
  // Shared-prefix ids (Mooncake traces), one per EngineConfig::prefix_hash_block prompt tokens:
  // equal ids up to a block mean equal tokens up to its end. Used by prefix caching.
  std::vector<std::int64_t> hash_ids;
  bool measured() const { return !token_times.empty() || measured_finish >= 0; }
};

// Reads a request log: JSONL, a request a line (arrival_s, prompt_tokens, output_tokens and, when
// measured, first_token_s, finish_s, token_times_s; id optional; the names public traces use too:
// arrival / arrival_time / timestamp_s in seconds, timestamp / timestamp_ms in ms (Mooncake),
// input_length / input_len / prompt_len, output_length / output_len, hash_ids), or a `vllm bench
// serve` result JSON (input_lens, output_lens, ttfts, itls). A wall clock is aligned by the first
// arrival. Only contradictions are errors (a token before its arrival, a finish before the last
// token, a first token other than token_times_s's), each an InputError naming FILE:LINE and field.
std::vector<Request> load_request_log(const std::string& path);

struct LengthDist {
  enum Kind { Fixed, Uniform, Lognormal } kind = Fixed;
  double a = 0, b = 0;  // fixed: a; uniform: [a, b]; lognormal: median a, sigma b
};
// "256", "32..512" (uniform, integers), "lognormal:MEDIAN,SIGMA".
LengthDist parse_length_dist(const std::string& text, const char* what);

struct WorkloadSpec {
  double rate = 0;  // requests/s; 0: all at t = 0
  double cv = 1;    // coefficient of variation of the gaps: 1 Poisson, else Gamma
  std::int64_t num = 0;
  LengthDist prompt, output;
  std::uint64_t seed = 1;
  // Shared prefixes: each prompt starts with one of `prefix_groups` prefixes of `shared_prefix`
  // tokens (drawn at random; the drawn prompt length follows it), written as hash ids of
  // `hash_block` tokens (a hash block the prefix does not cover whole is the request's own).
  std::int64_t shared_prefix = 0, prefix_groups = 1, hash_block = 512;
};
std::vector<Request> generate_requests(const WorkloadSpec& w);
// "LEN" or "LEN:GROUPS" (--shared-prefix) into w.shared_prefix, w.prefix_groups.
void parse_shared_prefix(const std::string& text, WorkloadSpec& w);

enum class Policy { Continuous, Static };

struct EngineConfig {
  Policy policy = Policy::Continuous;
  std::int64_t max_batch_tokens = 8192;
  std::int64_t max_seqs = 256;
  std::int64_t block_size = 16;
  std::int64_t num_blocks = 0;
  std::int64_t chunked_prefill = 0;  // most prompt tokens of one request per step (0: the budget)
  double watermark = 0;              // fraction of blocks kept free when admitting new requests
  bool cuda_graph = false;
  GraphPadding padding;
  TimeNs wake = 0;                       // an idle engine starts its next step this long after the arrival that wakes it
  bool prefix_caching = false;           // reuse cached prompt blocks (continuous policy; by hash_ids)
  std::int64_t prefix_hash_block = 512;  // prompt tokens one hash id covers (Mooncake's traces: 512)
  // Requests the engine served before these (its warm-up): simulated first, so the step shapes they
  // met are built already (StepCostModel::shape_build); their own results are not reported.
  std::vector<Request> warmup;
};

// A step's shape as the engine keys its plans: (a padded static batch's sequences, else 0; query
// tokens; KV tokens), after CUDA-graph padding. Static batches reuse the shapes of earlier ones:
// measured with transformers' model.generate on the H200 (batches of 32, step times per batch:
// the first all 50-57 ms, the next 28 new steps then 13-14 ms, the third 14 ms but its first 2;
// a last batch of 4 sequences all new).
using ShapeKey = std::tuple<std::int64_t, std::int64_t, std::int64_t>;

struct RequestResult {
  std::size_t index = 0;  // into the input
  TimeNs scheduled = -1, first_token = -1, finish = -1;
  std::int64_t preemptions = 0;
  std::vector<TimeNs> token_times;
};

struct StepRecord {
  TimeNs start = 0;
  StepTime time;
  StepShape shape;
  std::int64_t prefills = 0;
};

struct ServeResult {
  std::vector<RequestResult> requests;
  std::vector<StepRecord> steps;  // kept when asked (chrome trace)
  std::int64_t step_count = 0, preemptions = 0, padded_tokens = 0;
  std::int64_t new_shapes = 0;  // steps that met their shape first (and paid shape_build)
  // Prompt tokens at admission (a recomputed request's again) and those found in the prefix cache.
  std::int64_t prompt_tokens = 0, prefix_hit_tokens = 0;
  TimeNs busy = 0;      // the engine's steps, summed
  TimeNs gpu_busy = 0;  // their GPU time, summed
};

// Throws InputError naming the request if one can never fit the KV cache (or a static batch).
ServeResult simulate(const std::vector<Request>& reqs, const EngineConfig& eng, const StepCostModel& model, bool keep_steps);

// Step `step` of a static batch of `b` sequences left-padded to `lmax` prompt tokens: the prefill
// (step 0: b x lmax query tokens) or a decode (one token a sequence over lmax + step KV tokens).
StepShape static_step_shape(std::int64_t b, std::int64_t lmax, std::int64_t step);

// A static-batching engine's log: requests returned together share their finish time (finish_s),
// and no request has token times. The batches, in the order they finished, each its requests'
// indices (ascending); requests without a finish are in none.
std::vector<std::vector<std::size_t>> static_batches(const std::vector<Request>& log);
// The log looks like one of a static-batching engine: no token times, at least two requests
// finished together, and its batches (in the order they finished) are its requests in arrival order.
bool static_log(const std::vector<Request>& log);

// An engine step as a trace measured it, on the request log's clock: when the scheduler picked its
// batch and when its tokens were out.
struct MeasuredStep {
  TimeNs sched = 0, emit = 0;
};
// The continuous scheduler replayed over measured steps: at each step's `sched` it picks the batch
// as simulate() does (the same code), and the batch's tokens come out at the step's `emit`. Every
// measured step gives one StepRecord (steps kept), in order; one the scheduler has nothing for is
// empty (seqs 0). Requests left unfinished when the steps run out have fewer token times.
ServeResult replay_schedule(const std::vector<Request>& reqs, const EngineConfig& eng, const std::vector<MeasuredStep>& steps);

struct Slo {
  TimeNs ttft = 0, tpot = 0;  // 0: none
};

// The figures `vllm bench serve` reports (ms, requests/s, tokens/s), over completed requests.
struct Metrics {
  std::int64_t completed = 0, total_output = 0;
  double duration_s = 0, request_throughput = 0, output_throughput = 0, request_goodput = 0;
  struct Stat {
    double mean = 0, median = 0, p99 = 0;
    std::size_t n = 0;  // samples
  } ttft, tpot, itl, e2el;
  std::vector<double> req_ttft, req_tpot, req_e2el, req_queue;  // per request, ms (NaN: none)
};
Metrics summarize(const std::vector<Request>& reqs, const std::vector<RequestResult>& res, const Slo& slo);
// The same figures from a log's measured token times.
Metrics summarize_measured(const std::vector<Request>& reqs, const Slo& slo);

// KV blocks that fit `kv_memory` bytes.
std::int64_t blocks_for_memory(Bytes kv_memory, const LlmConfig& llm, std::int64_t block_size);
// KV memory left on the GPU by default: 90 % of its memory less the weights and the activations of
// one step of max_batch_tokens (and the logits of max_seqs sequences in fp32).
Bytes default_kv_memory(const HwSpec& hw, const LlmConfig& llm, const EngineConfig& eng);

}  // namespace bneck::serve
