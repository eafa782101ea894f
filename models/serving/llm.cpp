#include "models/serving/llm.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "models/roofline.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_input.hpp"

namespace bneck::serve {
using nlohmann::json;

double LlmConfig::layer_params() const {
  const double h = static_cast<double>(hidden), d = static_cast<double>(head_dim);
  const double attn = h * d * static_cast<double>(heads) * 2 + h * d * static_cast<double>(kv_heads) * 2;  // q, o; k, v
  const double mlp = h * static_cast<double>(intermediate) * (gated_mlp ? 3 : 2);
  return attn + mlp;
}

double LlmConfig::params() const {
  const double emb = static_cast<double>(vocab) * static_cast<double>(hidden);
  return layer_params() * static_cast<double>(layers) + emb * (tied_embeddings ? 1 : 2);
}

Bytes LlmConfig::weight_bytes() const { return static_cast<Bytes>(params() * dtype_bytes(dtype)); }

Bytes LlmConfig::kv_bytes_per_token() const {
  return static_cast<Bytes>(2.0 * static_cast<double>(layers * kv_heads * head_dim) * dtype_bytes(dtype));
}

LlmConfig load_llm_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open the model config");
  json j = parse_json_input(in, path);
  if (!j.is_object()) throw InputError(path, "a model config is a JSON object (a Hugging Face config.json)");
  LlmConfig c;
  c.source = path;
  // Bounds far above any model (so sizes stay finite and exact in doubles and 64-bit bytes).
  auto integer = [&](const char* key, bool required, std::int64_t dflt, std::int64_t most) -> std::int64_t {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (required) throw InputError(path, std::string("missing field '") + key + "'");
      return dflt;
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1)
      throw InputError(path, std::string("field '") + key + "' must be a positive integer");
    if (it->get<std::int64_t>() > most) throw InputError(path, std::string("field '") + key + "' is over " + std::to_string(most));
    return it->get<std::int64_t>();
  };
  with_json_errors(path, [&] {
    c.model_type = j.value("model_type", std::string());
    c.hidden = integer("hidden_size", true, 0, 1 << 20);
    c.intermediate = integer("intermediate_size", true, 0, 1 << 22);
    c.layers = integer("num_hidden_layers", true, 0, 1 << 14);
    c.heads = integer("num_attention_heads", true, 0, 1 << 14);
    c.kv_heads = integer("num_key_value_heads", false, c.heads, 1 << 14);
    c.vocab = integer("vocab_size", true, 0, 1 << 24);
    c.head_dim = integer("head_dim", false, 0, 1 << 16);
    if (c.head_dim == 0) {
      if (c.hidden % c.heads) throw InputError(path, "hidden_size is not a multiple of num_attention_heads and head_dim is not given");
      c.head_dim = c.hidden / c.heads;
    }
    if (c.heads % c.kv_heads) throw InputError(path, "num_attention_heads is not a multiple of num_key_value_heads");
    std::string dt = "bfloat16";
    for (const char* k : {"torch_dtype", "dtype"})
      if (j.contains(k) && j[k].is_string()) dt = j[k].get<std::string>();
    auto d = dtype_from_string(dt);
    if (!d) throw InputError(path, "field 'torch_dtype' ('" + dt + "') is not a dtype bneck knows");
    c.dtype = *d;
    c.tied_embeddings = j.value("tie_word_embeddings", false);
    static const char* ungated[] = {"gpt2", "gpt_neox", "opt", "bloom", "falcon", "gptj", "phi"};
    for (const char* u : ungated)
      if (c.model_type == u) c.gated_mlp = false;
  });
  return c;
}

const char* to_string(AttentionForm f) {
  return f == AttentionForm::Packed ? "packed (q x kv over the batch)" : "per sequence (sum of q_i x kv_i)";
}

StepCostModel hardware_step_model(const LlmConfig& llm, const HwSpec& hw) {
  StepCostModel m;
  m.llm = llm;
  const auto& g = hw.gpu;
  double eff = 0.8;
  auto fit = g.gemm_fit.find(llm.dtype);
  if (fit != g.gemm_fit.end() && fit->second.efficiency > 0) {
    eff = fit->second.efficiency;
    m.gemm_overhead = fit->second.overhead;
  }
  // The effective rates of bneck's roofline (models/roofline.hpp): the best unit's peak for the
  // model's precision at the calibrated GEMM efficiency, HBM at the spec's memory efficiency.
  RooflineInput in;
  in.dtype = llm.dtype;
  in.unit = g.best_unit(llm.dtype);
  in.flops = 1;
  in.bytes = 1;
  in.with_tail = false;
  in.compute_efficiency = eff;
  in.memory_efficiency = g.memory_efficiency > 0 ? g.memory_efficiency : 1.0;
  const RooflineResult rr = roofline(g, in);
  m.gemm_rate = rr.peak;
  m.attn_rate = m.gemm_rate;
  m.mem_rate = rr.bandwidth;
  if (m.gemm_rate <= 0 || m.mem_rate <= 0)
    throw InputError(hw.name, "the spec has no " + std::string(to_string(llm.dtype)) + " peak or memory bandwidth");
  // An eager decoder layer launches about 12 kernels (2 norms, 4-7 projections, rotary, attention,
  // activation, residual adds) and the head a few more; measured engines launch 2-4x that.
  m.kernels_per_step = static_cast<double>(llm.layers) * 12 + 8;
  m.gpu = {m.kernels_per_step * static_cast<double>(g.kernel_tail), 1, 1, 1, 0, 0};
  // Elementwise work per token: about 12 reads and writes of the hidden state and 4 of the MLP's
  // intermediate per layer.
  m.gpu[5] = static_cast<double>(llm.layers) * (12.0 * static_cast<double>(llm.hidden) + 4.0 * static_cast<double>(llm.intermediate)) *
             dtype_bytes(llm.dtype) / m.mem_rate * 1e9;
  m.launch = {m.kernels_per_step * static_cast<double>(g.host_launch_overhead), 0, 0};
  m.prepare = {200e3, 10e3, 0, 0};  // assumption: 200 us + 10 us per sequence (an engine written in Python)
  m.update = {50e3, 5e3};           // assumption: 50 us + 5 us per sequence
  m.lag = g.launch_latency;
  m.tail = g.launch_latency;
  m.graph_launch = g.graph_launch_overhead > 0 ? g.graph_launch_overhead : 10 * kNsPerUs;
  m.graph_node = g.graph_node_latency;
  m.source = "hardware model (" + hw.name + ")";
  m.notes.push_back("GPU: the spec's roofline (" + std::to_string(static_cast<int>(m.gemm_rate / 1e12)) + " TFLOP/s, " +
                    std::to_string(static_cast<int>(m.mem_rate / 1e9)) + " GB/s), " + std::to_string(static_cast<int>(m.kernels_per_step)) +
                    " kernels per step (assumed: 12 per layer)");
  m.notes.push_back(
      "host: launch = kernels x the spec's host launch overhead; prepare 200 us + 10 us/seq and update 50 us + 5 us/seq (assumed); "
      "calibrate with --calibrate");
  return m;
}

std::array<double, 6> StepCostModel::features(const StepShape& s) const {
  const double q = static_cast<double>(s.q), h = static_cast<double>(llm.hidden), L = static_cast<double>(llm.layers);
  const double bytes = dtype_bytes(llm.dtype);
  // Projections: q x hidden times each weight matrix, as one roofline per layer (weights read once).
  const double wl = llm.layer_params();
  const double flops = 2 * q * wl, wbytes = wl * bytes + q * h * bytes * 6;
  double gemm = L * std::max(flops / gemm_rate, wbytes / mem_rate);
  const double head_w = static_cast<double>(llm.vocab) * h;
  gemm += std::max(2 * static_cast<double>(s.logits) * head_w / gemm_rate, head_w * bytes / mem_rate);
  gemm *= 1e9;  // per-kernel fixed costs are in c0
  const double pairs = (form == AttentionForm::Packed && !s.batched) ? q * static_cast<double>(s.kv) : s.qkv_seq;
  const double attn = L * 4.0 * static_cast<double>(llm.heads * llm.head_dim) * pairs / attn_rate * 1e9;
  const double kvread = static_cast<double>(s.kv) * static_cast<double>(llm.kv_bytes_per_token()) / mem_rate * 1e9;
  return {1.0, gemm, attn, kvread, static_cast<double>(s.seqs), q};
}

TimeNs StepCostModel::gpu_time(const StepShape& s) const {
  auto f = features(s);
  double t = 0;
  for (int i = 0; i < 6; ++i) t += gpu[i] * f[i];
  return static_cast<TimeNs>(std::max(0.0, t));
}

StepTime StepCostModel::time(const StepShape& s, bool cuda_graph, bool new_shape, const StepShape* padded) const {
  StepTime t;
  const double seqs = static_cast<double>(s.seqs), q = static_cast<double>(s.q), kv = static_cast<double>(s.kv);
  auto host = [&](double fixed, double var) { return static_cast<TimeNs>(std::max(0.0, (fixed + var * host_var_ratio) * host_scale)); };
  t.prepare = host(prepare[0], prepare[1] * seqs + prepare[2] * q + prepare[3] * kv);
  t.update = host(update[0], update[1] * seqs);
  t.gpu = gpu_time(padded ? *padded : s);
  if (padded != nullptr && gpu[2] > 1) {
    // The attention pairs that padding adds (the padded cache read by one fixed-shape kernel) are
    // priced at the roofline, not at the rate fitted on the eager steps' attention, which holds at
    // the shapes it was fitted on: a fitted 43x the roofline on 512-token prompts over their own
    // tokens priced a graph's prompt step over a 16,384-token padded cache at 71 ms (16 measured).
    const double excess = std::max(0.0, features(*padded)[2] - features(s)[2]);
    t.gpu = std::max<TimeNs>(0, t.gpu - static_cast<TimeNs>((gpu[2] - 1) * excess));
  }
  const TimeNs launch_ns = host(launch[0], launch[1] * seqs + launch[2] * q);
  // With CUDA graphs a new padded shape is captured: the one build measured for every shape.
  if (new_shape) t.build = host(static_cast<double>(cuda_graph ? shape_build : build_for(s)), 0);
  if (cuda_graph) {
    t.gpu += static_cast<TimeNs>(kernels_per_step * static_cast<double>(graph_node));
    t.forward = host(static_cast<double>(graph_launch), 0) + lag + t.gpu + tail;
    // Capture: the plan, a warm-up pass and the capture pass through the eager path, then the replay.
    if (new_shape) t.build += 2 * launch_ns;
  } else {
    // The plan is built on the host before the first kernel that needs it: the launches after it and
    // the GPU work they issue wait for it.
    t.forward = std::max(launch_ns + tail, lag + t.gpu + tail);
    t.host_bound = launch_ns >= lag + t.gpu;
  }
  t.forward += t.build;
  return t;
}

std::vector<double> nnls(const std::vector<std::vector<double>>& rows, const std::vector<double>& b, double* rms) {
  const int m = static_cast<int>(rows.size()), n = rows.empty() ? 0 : static_cast<int>(rows[0].size());
  std::vector<double> x(static_cast<std::size_t>(n), 0.0);
  if (m == 0 || n == 0) return x;
  // Columns scaled to unit norm for conditioning; the answer is scaled back.
  Eigen::MatrixXd A(m, n);
  Eigen::VectorXd B(m);
  for (int i = 0; i < m; ++i) {
    for (int k = 0; k < n; ++k) A(i, k) = rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
    B(i) = b[static_cast<std::size_t>(i)];
  }
  Eigen::VectorXd scale(n);
  for (int k = 0; k < n; ++k) {
    double c = A.col(k).norm();
    scale(k) = c > 0 ? c : 1;
    A.col(k) /= scale(k);
  }
  std::vector<bool> passive(static_cast<std::size_t>(n), false);
  Eigen::VectorXd X = Eigen::VectorXd::Zero(n);
  auto solve_passive = [&]() {
    std::vector<int> idx;
    for (int k = 0; k < n; ++k)
      if (passive[static_cast<std::size_t>(k)]) idx.push_back(k);
    Eigen::MatrixXd Ap(m, static_cast<int>(idx.size()));
    for (std::size_t k = 0; k < idx.size(); ++k) Ap.col(static_cast<int>(k)) = A.col(idx[k]);
    Eigen::VectorXd z = Ap.colPivHouseholderQr().solve(B);
    Eigen::VectorXd full = Eigen::VectorXd::Zero(n);
    for (std::size_t k = 0; k < idx.size(); ++k) full(idx[k]) = z(static_cast<int>(k));
    return full;
  };
  for (int iter = 0; iter < 3 * n + 10; ++iter) {
    Eigen::VectorXd w = A.transpose() * (B - A * X);
    int best = -1;
    double bw = 1e-12 * (1 + B.norm());
    for (int k = 0; k < n; ++k)
      if (!passive[static_cast<std::size_t>(k)] && w(k) > bw) {
        bw = w(k);
        best = k;
      }
    if (best < 0) break;
    passive[static_cast<std::size_t>(best)] = true;
    for (int inner = 0; inner < 3 * n + 10; ++inner) {
      Eigen::VectorXd z = solve_passive();
      bool feasible = true;
      for (int k = 0; k < n; ++k)
        if (passive[static_cast<std::size_t>(k)] && z(k) <= 0) feasible = false;
      if (feasible) {
        X = z;
        break;
      }
      double alpha = 1;
      for (int k = 0; k < n; ++k)
        if (passive[static_cast<std::size_t>(k)] && z(k) <= 0) alpha = std::min(alpha, X(k) / (X(k) - z(k)));
      X += alpha * (z - X);
      for (int k = 0; k < n; ++k)
        if (passive[static_cast<std::size_t>(k)] && X(k) <= 1e-15) {
          passive[static_cast<std::size_t>(k)] = false;
          X(k) = 0;
        }
    }
  }
  if (rms) *rms = std::sqrt((A * X - B).squaredNorm() / m);
  for (int k = 0; k < n; ++k) x[static_cast<std::size_t>(k)] = X(k) / scale(k);
  return x;
}

}  // namespace bneck::serve
