// LLM serving: the model (a Hugging Face config), the shape of one engine step and what it costs.
//
// One engine step runs one forward pass over the tokens the scheduler picked: `q` query tokens of
// `seqs` sequences that read `kv` tokens of KV cache. Its time (a synchronous engine: the host
// prepares the batch, launches the forward, waits for the sampled tokens, updates its requests):
//   prepare  = host: p0 + p1 seqs + p2 q + p3 kv          (scheduling, block tables, masks)
//   forward  = max(launch + tail, lag + gpu)               (eager: the host issues every kernel)
//            = graph_launch + lag + gpu + nodes x node gap (CUDA graphs, on the padded shape)
//   update   = host: u0 + u1 seqs                          (appending tokens, finishing requests)
//   gpu      = c0 + c1 gemm(q) + c2 attention + c3 kv_read(kv) + c4 seqs + c5 q
// where gemm(q) is the roofline time of the model's projections and LM head on q tokens (the
// hardware spec's peak, GEMM efficiency and HBM bandwidth), attention the roofline time of
// 4 x heads x head_dim FLOPs per (query, key) pair, counted per sequence (sum of q_i x kv_i: flash
// and paged kernels) or over the packed batch (q x kv: one masked attention over all sequences, as
// transformers' paged|sdpa does), and kv_read(kv) the time to read that many tokens of KV cache.
// A step whose shape the engine has not met before pays `shape_build` more host time: the engine
// (or a library under it) builds a plan for that shape before the step's kernels can run. In
// transformers' paged|sdpa engine on the H200 it is cuDNN's SDPA graph, built once per (query
// tokens, KV tokens) pair: 45-60 ms on the first step of a shape, against a 13-20 ms forward on a
// repeated shape, and without CUDA graphs nearly every decode step meets a new KV length; a step
// with prompt tokens builds longer there (`shape_build_prompt`, fitted apart when the calibration
// trace holds 8 or more first-time steps of each kind: 62.8 against 38.7 ms). With
// CUDA graphs the padded shapes repeat; a new one is captured: build + two eager passes (the
// capture's warm-up and the capture itself) + the replay. The simulation keeps the set of shapes
// met (serve.hpp), the engine's warm-up included; calibration fits `shape_build` (calibrate.hpp).
// Without calibration the coefficients are the hardware model's (c1 = c2 = c3 = 1, launch = kernels
// x the spec's host launch overhead) and the host terms are stated assumptions; `calibrate_step_model`
// (calibrate.hpp) fits every coefficient to a trace of the real engine.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "hw/spec.hpp"
#include "sim/base/units.hpp"

namespace bneck::serve {

struct LlmConfig {
  std::string model_type, source;
  std::int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  Dtype dtype = Dtype::BF16;
  bool gated_mlp = true;  // gate and up projections (Llama, Mistral, Qwen, Gemma); false: one fc1
  bool tied_embeddings = false;
  double layer_params() const;  // projections of one decoder layer
  double params() const;        // layers, embedding and LM head
  Bytes weight_bytes() const;
  Bytes kv_bytes_per_token() const;  // K and V of every layer
};
// Reads a Hugging Face config.json. A missing or invalid field is an InputError naming the file and
// the field.
LlmConfig load_llm_config(const std::string& path);

struct StepShape {
  std::int64_t q = 0;       // query tokens this step
  std::int64_t kv = 0;      // KV tokens read: per sequence its cached tokens plus its new ones
  std::int64_t seqs = 0;    // sequences in the step
  std::int64_t logits = 0;  // sequences sampling a token (rows through the LM head)
  double qkv_seq = 0;       // sum over sequences of q_i x kv_i
  bool batched = false;     // a padded static batch: attention per sequence whatever the engine does
};

enum class AttentionForm { PerSequence, Packed };
const char* to_string(AttentionForm f);

struct StepTime {
  TimeNs prepare = 0, forward = 0, update = 0, gpu = 0;
  TimeNs build = 0;  // of forward: the plan built for a shape met the first time
  // The eager forward's time is its launches' (the host's), not the GPU's: the launches take at
  // least the GPU's lag and work. False under CUDA graphs (one launch; the GPU's time).
  bool host_bound = false;
  TimeNs total() const { return prepare + forward + update; }
};

// How CUDA graphs pad a step (transformers' continuous batching: the query tokens to a multiple of
// 64, capped at the token budget; the cached tokens read to a multiple of 16384, capped at the
// cache; the attention reads the padded query tokens plus the padded cache).
struct GraphPadding {
  std::int64_t q_interval = 64, kv_interval = 16384;
};

struct StepCostModel {
  std::array<double, 6> gpu{};  // c0 [ns], c1..c3 [x the feature], c4 [ns/seq], c5 [ns/token]
  AttentionForm form = AttentionForm::PerSequence;
  std::array<double, 4> prepare{};  // ns, ns/seq, ns/token, ns/KV token
  std::array<double, 3> launch{};   // ns, ns/seq, ns/token
  std::array<double, 2> update{};   // ns, ns/seq
  double host_scale = 1;            // multiplies every host term (profiler overhead removed, see calibrate)
  double host_var_ratio = 1;        // further multiplies the per-sequence, per-token and per-KV host terms
  TimeNs lag = 0;                   // forward start to the first kernel
  TimeNs tail = 0;                  // last launch to the forward's end (last kernels, copy back, sync)
  double kernels_per_step = 0;
  TimeNs graph_launch = 0, graph_node = 0;
  TimeNs shape_build = 0;  // host time of a step on a shape met the first time (0: none)
  // The same for a step with prompt tokens (q > seqs), where calibration saw it differ (-1: shape_build).
  TimeNs shape_build_prompt = -1;
  TimeNs build_for(const StepShape& s) const { return s.q > s.seqs && shape_build_prompt >= 0 ? shape_build_prompt : shape_build; }
  std::string source;
  std::vector<std::string> notes;  // what was assumed or fitted, with residuals

  // The hardware-model features of a shape: [1, gemm ns, attention ns, kv-read ns, seqs, q].
  std::array<double, 6> features(const StepShape& s) const;
  TimeNs gpu_time(const StepShape& s) const;
  // `new_shape`: the engine meets this (padded) shape for the first time (see shape_build). With
  // CUDA graphs `padded` is the shape the graph runs (the GPU's work); the host prepares and
  // updates the real one, `s`.
  StepTime time(const StepShape& s, bool cuda_graph, bool new_shape = false, const StepShape* padded = nullptr) const;

  // Filled by hardware_step_model: the roofline pieces the features are made of.
  LlmConfig llm;
  double gemm_rate = 0, attn_rate = 0, mem_rate = 0;  // FLOP/s, FLOP/s, bytes/s
  TimeNs gemm_overhead = 0;
};

// The uncalibrated model of `llm` on `hw`.
StepCostModel hardware_step_model(const LlmConfig& llm, const HwSpec& hw);

// Non-negative least squares (Lawson-Hanson): x >= 0 minimizing |A x - b|. Rows of A are samples.
std::vector<double> nnls(const std::vector<std::vector<double>>& a, const std::vector<double>& b, double* rms = nullptr);

}  // namespace bneck::serve
