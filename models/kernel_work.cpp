#include "models/kernel_work.hpp"

#include <algorithm>
#include <cstring>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "models/occupancy.hpp"
#include "models/roofline.hpp"
#include "sim/base/strings.hpp"

namespace bneck {

const char* to_string(KernelClass c) {
  static const char* const names[] = {"gemm",    "conv", "attention",     "elementwise", "reduction",
                                      "softmax", "norm", "communication", "copy",        "other"};
  return names[static_cast<int>(c)];
}

bool is_compute_class(KernelClass c) { return c == KernelClass::Gemm || c == KernelClass::Conv || c == KernelClass::Attention; }

namespace {
std::string lower(std::string_view s) { return ascii_lower(s); }
bool has(const std::string& s, std::string_view p) { return s.find(p) != std::string::npos; }
}  // namespace

bool gemm_helper_kernel(std::string_view name) {
  const std::string n = lower(name);
  return n.rfind("void scal_kernel", 0) == 0 || n.rfind("scal_kernel", 0) == 0 || has(n, "cublaslt::epilogue") || has(n, "splitkreduce");
}

KernelClass classify_kernel(std::string_view name) {
  std::string n = lower(name);
  if (is_comm_kernel_name(name)) return KernelClass::Communication;
  if (has(n, "compute_dot_do_o")) return KernelClass::Reduction;  // rowsum(dO * O) of attention backward
  // A paged KV cache's writes (vLLM's reshape_and_cache_flash, its block copies): copies, not the
  // attention the cache's name ("flash") might say.
  if (has(n, "reshape_and_cache") || has(n, "copy_blocks") || has(n, "swap_blocks")) return KernelClass::Copy;
  if (has(n, "fmha") || has(n, "flash") || has(n, "sdpa") || has(n, "attention")) return KernelClass::Attention;
  if (has(n, "convolution") || has(n, "conv2d") || has(n, "conv3d") || has(n, "conv1d") || has(n, "convnd") ||
      has(n, "implicit_convolve") || has(n, "implicit_gemm") || has(n, "wgrad") || has(n, "dgrad") || has(n, "winograd") ||
      has(n, "xmma_fprop") || (has(n, "conv") && !has(n, "convert")))
    return KernelClass::Conv;
  // cuBLAS's helpers around a split-K GEMM (gemm_helper_kernel): streaming kernels, not the
  // GEMM's math.
  if (gemm_helper_kernel(name)) return has(n, "scal_kernel") ? KernelClass::Elementwise : KernelClass::Reduction;
  // Tensile's GEMMs (rocBLAS, hipBLASLt on AMD GPUs): Cijk_Ailk_Bljk_<types>_..._MT<tile>_MI<mfma>_...
  if (has(n, "gemm") || has(n, "nvjet") || has(n, "cutlass") || has(n, "cublas") || has(n, "sgemm") || has(n, "hgemm") ||
      has(n, "matmul") || has(n, "wgmma") || has(n, "xmma") || has(n, "cijk_"))
    return KernelClass::Gemm;
  if (has(n, "softmax")) return KernelClass::Softmax;
  if (has(n, "layer_norm") || has(n, "layernorm") || has(n, "rms_norm") || has(n, "rmsnorm") || has(n, "batch_norm") ||
      has(n, "batchnorm") || has(n, "gammabeta") || has(n, "norm_") || has(n, "cudnn::bn_"))
    return KernelClass::Norm;
  if (has(n, "reduce") || has(n, "reduction") || has(n, "sum_kernel") || has(n, "argmax") || has(n, "mean")) return KernelClass::Reduction;
  if (has(n, "copy") || has(n, "memcpy") || has(n, "cat") || has(n, "transpose") || has(n, "permute")) return KernelClass::Copy;
  if (has(n, "elementwise") || has(n, "vectorized") || has(n, "multi_tensor_apply") || has(n, "pointwise") || has(n, "unrolled") ||
      has(n, "fill") || has(n, "op_") || has(n, "fused") || has(n, "axpy") || has(n, "scale") || has(n, "relu") || has(n, "gelu") ||
      has(n, "silu") || has(n, "add") || has(n, "mul"))
    return KernelClass::Elementwise;
  return KernelClass::Other;
}

namespace {
// A Tensile GEMM's input type, from the token after its index strings (Cijk_Ailk_Bljk_BBS_...:
// bf16 in, bf16 out, fp32 compute; HHS fp16; S fp32; D fp64; F8 / B8 fp8; I8 int8).
std::optional<Dtype> tensile_dtype(const std::string& n) {
  const auto at = n.find("cijk_");
  if (at == std::string::npos) return std::nullopt;
  std::size_t p = at;
  for (int k = 0; k < 3 && p != std::string::npos; ++k) p = n.find('_', p + 1);  // past cijk_, a..._, b..._
  if (p == std::string::npos) return std::nullopt;
  const std::string t = n.substr(p + 1, n.find('_', p + 1) - p - 1);
  if (t.empty()) return std::nullopt;
  if (t.rfind("f8", 0) == 0 || t.rfind("b8", 0) == 0 || t.rfind("f8b8", 0) == 0) return Dtype::FP8;
  if (t.rfind("i8", 0) == 0) return Dtype::INT8;
  if (t[0] == 'b') return Dtype::BF16;
  if (t[0] == 'h') return Dtype::FP16;
  if (t[0] == 's') return Dtype::FP32;
  if (t[0] == 'd') return Dtype::FP64;
  return std::nullopt;
}

// TensorRT's tensor-core kernels name their MMA shape after the input type: h16816gemm, h1688gemm,
// h884cudnn (fp16), i8816gemm, i16832gemm (int8): a letter, three to five digits, then gemm or cudnn.
std::optional<Dtype> mma_shape_dtype(const std::string& n) {
  for (std::size_t p = 0; p < n.size(); ++p) {
    if (n[p] != 'h' && n[p] != 'i') continue;
    if (p > 0 && std::isalnum(static_cast<unsigned char>(n[p - 1]))) continue;
    std::size_t q = p + 1;
    while (q < n.size() && std::isdigit(static_cast<unsigned char>(n[q]))) ++q;
    if (q - p - 1 < 3 || q - p - 1 > 5) continue;
    if (n.compare(q, 4, "gemm") == 0 || n.compare(q, 5, "cudnn") == 0) return n[p] == 'h' ? Dtype::FP16 : Dtype::INT8;
  }
  return std::nullopt;
}
}  // namespace

Dtype kernel_dtype(std::string_view name, Dtype fallback) {
  std::string n = lower(name);
  if (const std::optional<Dtype> d = tensile_dtype(n)) return *d;
  if (const std::optional<Dtype> d = mma_shape_dtype(n)) return *d;
  if (has(n, "e4m3") || has(n, "e5m2") || has(n, "fp8")) return Dtype::FP8;
  if (has(n, "bfloat16") || has(n, "bf16") || has(n, "__nv_bfloat16") || has(n, "c10::bfloat16")) return Dtype::BF16;
  if (has(n, "half") || has(n, "fp16") || has(n, "f16") || has(n, "hgemm")) return Dtype::FP16;
  if (has(n, "tf32")) return Dtype::TF32;
  if (has(n, "double") || has(n, "f64") || has(n, "dgemm")) return Dtype::FP64;
  if (has(n, "int8") || has(n, "s8") || has(n, "imma")) return Dtype::INT8;
  if (has(n, "float") || has(n, "f32") || has(n, "sgemm")) return Dtype::FP32;
  // Tensor-core GEMM families whose names carry no precision (cuBLAS nvjet on Hopper, wgmma/hmma
  // tensor-op kernels) run in a 16-bit type; bf16 and fp16 share their peak.
  if (has(n, "nvjet") || has(n, "wgmma") || has(n, "hmma") || has(n, "tensorop")) return Dtype::BF16;
  return fallback;
}

bool low_bit_weight_gemm(std::string_view name) {
  const std::string n = lower(name);
  for (const char* k : {"mxfp4", "nvfp4", "mxfp6", "e2m1", "int4", "w4a16", "w4a8", "wna16", "marlin", "awq", "gptq"})
    if (has(n, k)) return true;
  return false;
}

ComputeUnit kernel_unit(std::string_view name, KernelClass c, Dtype d, const GpuSpec& g) {
  std::string n = lower(name);
  if (!is_compute_class(c)) return ComputeUnit::Simt;
  if (has(n, "ffma") || has(n, "simt") || has(n, "sgemm") || (d == Dtype::FP32 && !has(n, "tf32"))) return ComputeUnit::Simt;
  return g.peak_of(d, ComputeUnit::Tensor) > 0 ? ComputeUnit::Tensor : ComputeUnit::Simt;
}

std::vector<std::vector<std::int64_t>> parse_nvtx_sizes(std::string_view text) {
  std::vector<std::vector<std::int64_t>> out;
  auto p = text.find("sizes = [");
  if (p == std::string_view::npos) return out;
  p += 9;
  int depth = 1;
  std::vector<std::int64_t> cur;
  std::int64_t num = 0;
  bool in_num = false;
  for (; p < text.size() && depth > 0; ++p) {
    char c = text[p];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      num = num * 10 + (c - '0');
      in_num = true;
      continue;
    }
    if (in_num) {
      cur.push_back(num);
      num = 0;
      in_num = false;
    }
    if (c == '[') {
      ++depth;
      cur.clear();
    } else if (c == ']') {
      if (--depth == 1) out.push_back(cur);
    }
  }
  return out;
}

namespace {

double numel(const std::vector<std::int64_t>& s) {
  return s.empty() ? 0 : std::accumulate(s.begin(), s.end(), 1.0, [](double a, std::int64_t b) { return a * static_cast<double>(b); });
}

// The scalar arguments Kineto records with shapes ("args = |||[2, 2]|[3, 3]|[1, 1]|1|", one field
// per argument): each field's integers ("[2, 2]" -> {2, 2}, "1" -> {1}, "True" -> {1}, "" -> {}).
std::vector<std::vector<std::int64_t>> parse_concrete_args(std::string_view text) {
  std::vector<std::vector<std::int64_t>> out;
  auto p = text.find(", args = ");
  if (p == std::string_view::npos) return out;
  std::vector<std::int64_t> cur;
  std::int64_t num = 0;
  bool in_num = false;
  for (std::size_t i = p + 9; i < text.size() && out.size() < 64; ++i) {
    const char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c)) && num < (std::int64_t{1} << 40)) {
      num = num * 10 + (c - '0');
      in_num = true;
      continue;
    }
    if (in_num) cur.push_back(num), num = 0, in_num = false;
    if (c == 'T' && text.substr(i, 4) == "True") cur.push_back(1);
    if (c == 'F' && text.substr(i, 5) == "False") cur.push_back(0);
    if (c == '|') out.push_back(cur), cur.clear();
  }
  return out;
}

// A convolution: 2 x N x C_out x (output positions) x (C_in / groups x kernel positions) FLOPs per
// pass. Forward ops (cudnn/miopen_convolution, convolution, _convolution) need the stride, padding
// and dilation from the recorded scalar arguments for the output's size; the backward
// (convolution_backward) records grad_output's shape itself and computes the input's and the
// weight's gradients as its output_mask says (both where not recorded). Transposed convolutions
// and traces without the arguments: false (their work is inferred from the duration).
bool conv_work(const std::string& op, const std::vector<std::vector<std::int64_t>>& sz, const std::vector<std::vector<std::int64_t>>& args,
               double elem, KernelWork& w) {
  const bool bwd = op == "aten::convolution_backward";
  const std::size_t in = bwd ? 1 : 0, wt = bwd ? 2 : 1;
  if (sz.size() <= wt || sz[in].size() < 3 || sz[wt].size() != sz[in].size()) return false;
  const std::size_t nd = sz[in].size() - 2;
  const auto& x = sz[in];
  const auto& k = sz[wt];
  std::vector<double> out(nd);
  if (bwd) {
    if (sz[0].size() != x.size()) return false;
    for (std::size_t i = 0; i < nd; ++i) out[i] = static_cast<double>(sz[0][i + 2]);
  } else {
    // argument positions of stride, padding, dilation and transposed (-1: none)
    int st = 3, pd = 4, dl = 5, tr = 6;
    if (op == "aten::cudnn_convolution")
      st = 3, pd = 2, dl = 4, tr = -1;
    else if (op == "aten::miopen_convolution")
      st = 4, pd = 3, dl = 5, tr = -1;
    else if (op != "aten::convolution" && op != "aten::_convolution")
      return false;
    const auto at = [&](int i) -> const std::vector<std::int64_t>* {
      return static_cast<std::size_t>(i) < args.size() ? &args[static_cast<std::size_t>(i)] : nullptr;
    };
    if (!at(dl)) return false;
    if (tr >= 0 && (at(tr)->empty() || (*at(tr))[0] != 0)) return false;
    for (std::size_t i = 0; i < nd; ++i) {
      auto v = [&](int a, std::int64_t dflt) {
        const auto& f = *at(a);
        return f.empty() ? dflt : f[std::min(i, f.size() - 1)];
      };
      const std::int64_t s = v(st, 1), p = v(pd, 0), d = v(dl, 1);
      constexpr std::int64_t kMax = std::int64_t{1} << 30;  // beyond: a hostile record, not a shape
      if (s <= 0 || d <= 0 || p < 0 || s > kMax || d > kMax || p > kMax || x[i + 2] > kMax || k[i + 2] > kMax || k[i + 2] < 1) return false;
      const std::int64_t o = (x[i + 2] + 2 * p - d * (k[i + 2] - 1) - 1) / s + 1;
      if (o <= 0) return false;
      out[i] = static_cast<double>(o);
    }
  }
  bool spatial = false;  // a filter wider than 1x1 or a stride (not one GEMM over the channels)
  for (std::size_t i = 0; i < nd; ++i) spatial = spatial || k[i + 2] > 1 || out[i] != static_cast<double>(x[i + 2]);
  double positions = 1, taps = static_cast<double>(k[1]);
  for (std::size_t i = 0; i < nd; ++i) positions *= out[i], taps *= static_cast<double>(k[i + 2]);
  const double n = static_cast<double>(x[0]), cout = static_cast<double>(k[0]);
  const double out_elems = n * cout * positions, in_elems = numel(x), wt_elems = numel(k);
  double passes = 1;
  double bytes = in_elems + wt_elems + out_elems;
  if (bwd) {  // output_mask: the input's gradient, the weight's (the bias's is a reduction)
    bool grad_in = true, grad_w = true;
    if (args.size() >= 11 && args[10].size() >= 2) grad_in = args[10][0] != 0, grad_w = args[10][1] != 0;
    passes = (grad_in ? 1 : 0) + (grad_w ? 1 : 0);
    bytes += (grad_in ? in_elems : 0) + (grad_w ? wt_elems : 0);
  }
  if (passes <= 0) return false;
  w.flops = 2 * passes * out_elems * taps;
  w.bytes = bytes * elem;
  w.weight_elems = bwd ? 0 : wt_elems;
  w.out_elems = out_elems;
  w.conv_spatial = spatial;
  if (!bwd && nd >= 1) {
    const std::int64_t groups = k[1] > 0 ? x[1] / k[1] : 1;
    w.conv_kind = groups > 1 && k[1] > 1 ? 2 : k[0] <= 64 && k[1] <= 64 ? 3 : k[0] * 2 <= k[1] && k[2] > 1 ? 4 : 1;
  }
  return true;
}

// Work of one aten op from its sizes; false if the op is not one we know how to count.
bool op_work(const std::string& op, const std::vector<std::vector<std::int64_t>>& sz, double elem, KernelWork& w,
             std::string_view text = {}) {
  auto is = [&](const char* n) { return op == n; };
  if (op.find("convolution") != std::string::npos) return conv_work(op, sz, parse_concrete_args(text), elem, w);
  if (is("aten::addmm") && sz.size() >= 3 && sz[1].size() == 2 && sz[2].size() == 2) {
    double m = static_cast<double>(sz[1][0]), k = static_cast<double>(sz[1][1]), n = static_cast<double>(sz[2][1]);
    w.flops = 2 * m * n * k;
    w.bytes = (m * k + k * n + m * n + n) * elem;
    w.weight_elems = k * n;
    w.out_elems = m * n;
    w.rhs_elems = k * n;
    w.out_rows = m;
    w.out_cols = n;
    return true;
  }
  if (is("aten::mm") && sz.size() >= 2 && sz[0].size() == 2 && sz[1].size() == 2) {
    double m = static_cast<double>(sz[0][0]), k = static_cast<double>(sz[0][1]), n = static_cast<double>(sz[1][1]);
    w.flops = 2 * m * n * k;
    w.bytes = (m * k + k * n + m * n) * elem;
    w.out_elems = m * n;
    w.rhs_elems = k * n;
    w.out_rows = m;
    w.out_cols = n;
    return true;
  }
  if ((is("aten::bmm") || is("aten::baddbmm")) && sz.size() >= 2) {
    const auto& a = sz[is("aten::bmm") ? 0 : 1];
    const auto& b = sz[is("aten::bmm") ? 1 : 2 < sz.size() ? 2 : 1];
    if (a.size() == 3 && b.size() == 3) {
      double bt = static_cast<double>(a[0]), m = static_cast<double>(a[1]), k = static_cast<double>(a[2]), n = static_cast<double>(b[2]);
      w.flops = 2 * bt * m * n * k;
      w.bytes = bt * (m * k + k * n + m * n) * elem;
      w.out_elems = bt * m * n;
      w.out_rows = m;
      w.out_cols = n;
      w.batch = bt;
      return true;
    }
  }
  if (op.find("attention") != std::string::npos && !sz.empty() && sz[0].size() == 4) {
    // scaled_dot_product_* take (B, H, T, D); the kernels' own ops (_efficient_attention_*,
    // _flash_attention_*) take (B, T, H, D).
    bool bthd = op.find("aten::_efficient_attention") == 0 || op.find("aten::_flash_attention") == 0;
    int ti = bthd ? 1 : 2, hi = bthd ? 2 : 1;
    double b = static_cast<double>(sz[0][0]), h = static_cast<double>(sz[0][static_cast<std::size_t>(hi)]),
           t = static_cast<double>(sz[0][static_cast<std::size_t>(ti)]), d = static_cast<double>(sz[0][3]);
    double s = sz.size() > 1 && sz[1].size() == 4 ? static_cast<double>(sz[1][static_cast<std::size_t>(ti)]) : t;
    bool bwd = op.find("backward") != std::string::npos;
    w.flops = (bwd ? 2.5 : 1.0) * 4 * b * h * t * s * d;
    w.bytes = (bwd ? 8.0 : 4.0) * b * h * t * d * elem;
    w.out_elems = b * h * t * d;
    return true;
  }
  // Lookups read only the rows they index, not the table their shapes describe, and a KV cache's
  // writes only the slots they index (vLLM's reshape_and_cache_flash takes the whole pool of blocks:
  // 4.3 G elements for 888 tokens): no estimate from shapes (inferred from the duration instead).
  for (const char* gather : {"embedding", "index", "gather", "lookup", "scatter", "sparse", "cache"})
    if (op.find(gather) != std::string::npos) return false;
  // Memory-bound ops: inputs read once, an output the size of the largest input written.
  double in = 0, largest = 0;
  for (const auto& s : sz) {
    double e = numel(s);
    in += e;
    largest = std::max(largest, e);
  }
  if (largest <= 1) return false;
  bool reduction = op.find("sum") != std::string::npos || op.find("mean") != std::string::npos;
  w.bytes = (in + (reduction ? 0 : largest)) * elem;
  w.flops = largest * (op.find("norm") != std::string::npos || op.find("softmax") != std::string::npos ? 8 : 1);
  return true;
}

}  // namespace

std::pair<int, int> gemm_tile(std::string_view name) {
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i])) || (i > 0 && std::isdigit(static_cast<unsigned char>(name[i - 1])))) continue;
    std::size_t j = i;
    int a = 0, b = 0;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j])) && a < 10000) a = a * 10 + (name[j++] - '0');
    if (j >= name.size() || name[j] != 'x') continue;
    std::size_t k = ++j;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j])) && b < 10000) b = b * 10 + (name[j++] - '0');
    if (j == k) continue;
    if (a >= 16 && a <= 512 && b >= 16 && b <= 512) return {a, b};
  }
  return {0, 0};
}

GridScaling grid_scaling(const LaunchConfig& lc, const GpuSpec& g) {
  GridScaling s;
  std::uint64_t blocks = std::uint64_t{lc.grid(0)} * lc.grid(1) * lc.grid(2);
  std::uint32_t threads = std::uint32_t{lc.block[0]} * lc.block[1] * lc.block[2];
  OccupancyResult occ = occupancy(g, {threads, lc.registers, Bytes{lc.static_smem} + lc.dynamic_smem});
  Waves wv = wave_quantization(blocks, std::max<std::uint32_t>(1, occ.blocks_per_sm), g.sm_count);
  s.waves = wv.waves;
  s.wave_efficiency = wv.efficiency;
  if (blocks > 0 && blocks < g.sm_count) {
    double f = static_cast<double>(blocks) / g.sm_count;  // only some SMs work
    s.compute = s.memory = 1 / f;
  } else if (wv.efficiency > 0) {
    s.compute = 1 / wv.efficiency;
  }
  return s;
}

double memory_parallelism_factor(const LaunchConfig& lc, const GpuSpec& g, Bytes width, double read_share) {
  if (g.memory_latency <= 0 || width == 0 || g.sm_count == 0 || g.max_threads_per_sm == 0) return 1;
  std::uint32_t threads = std::uint32_t{lc.block[0]} * lc.block[1] * lc.block[2];
  OccupancyResult occ = occupancy(g, {threads, lc.registers, Bytes{lc.static_smem} + lc.dynamic_smem});
  double resident = std::min<double>(g.max_threads_per_sm, static_cast<double>(occ.blocks_per_sm) * threads);
  if (resident <= 0) return 1;
  const double P = g.memory_bandwidth * g.memory_efficiency, L = static_cast<double>(g.memory_latency) * 1e-9;
  auto stretch = [&](double threads_per_sm) {
    double in_flight = static_cast<double>(g.sm_count) * threads_per_sm * static_cast<double>(width);
    double x = P * L * std::clamp(read_share, 0.0, 1.0) / in_flight;
    return std::sqrt(1 + x * x);
  };
  return stretch(resident) / stretch(g.max_threads_per_sm);
}

double gemm_inner(const KernelWork& w) {
  if (w.cls != KernelClass::Gemm || w.out_rows <= 0 || w.out_cols <= 0 || w.flops <= 0) return 0;
  return w.flops / (2 * std::max(1.0, w.batch) * w.out_rows * w.out_cols);
}

bool gemm_unaligned(const KernelWork& w) {
  const double inner = gemm_inner(w);
  const auto per16 = static_cast<long long>(16.0 / std::max(1.0, dtype_bytes(w.dtype)));
  return inner > 0 && per16 >= 1 && (std::llround(inner) % per16 != 0 || std::llround(w.out_cols) % per16 != 0);
}

std::optional<double> gemm_efficiency_by_shape(const KernelWork& w, const GpuSpec& g) {
  const double inner = gemm_inner(w);
  if (inner <= 0) return std::nullopt;
  auto it = g.gemm_samples.find(w.dtype);
  if (it == g.gemm_samples.end() || g.peak_of(w.dtype, w.unit) <= 0) return std::nullopt;
  const double batch = std::max(1.0, w.batch);
  // Unaligned: the library's other kernels, measured apart where the GPU has them.
  if (gemm_unaligned(w)) {
    auto u = g.gemm_samples_unaligned.find(w.dtype);
    if (u != g.gemm_samples_unaligned.end())
      if (const auto e = u->second.efficiency(batch, w.out_rows, inner, w.out_cols)) return e;
  }
  return it->second.efficiency(batch, w.out_rows, inner, w.out_cols);
}

KernelEstimate model_kernel(const Trace& t, OpId k, const KernelWork& w, const HwSpec& hw) {
  return model_kernel(t.launch(t.ops[k]), w, hw);
}

namespace {

// Same compute: SMs, clock and the best unit's peak of both precisions equal (relative 1e-6).
bool same_compute(const GpuSpec& x, const GpuSpec& y, Dtype a, Dtype b) {
  auto eq = [](double u, double v) { return std::abs(u - v) <= 1e-6 * std::max(std::abs(u), std::abs(v)); };
  return x.sm_count == y.sm_count && eq(x.clock_hz, y.clock_hz) && x.peak_of(a, x.best_unit(a)) > 0 &&
         eq(x.peak_of(a, x.best_unit(a)), y.peak_of(a, y.best_unit(a))) && eq(x.peak_of(b, x.best_unit(b)), y.peak_of(b, y.best_unit(b)));
}

// Surfaces for both precisions, from one source (one program and library timed both).
bool one_source_pair(const GpuSpec& g, Dtype a, Dtype b) {
  const auto x = g.gemm_samples.find(a), y = g.gemm_samples.find(b);
  return x != g.gemm_samples.end() && y != g.gemm_samples.end() && x->second.source == y->second.source;
}

}  // namespace

const HwSpec* gemm_pair_sibling(const GpuSpec& g, Dtype a, Dtype b) {
  if (one_source_pair(g, a, b)) return nullptr;
  static std::mutex mu;
  using Key = std::tuple<std::uint32_t, double, double, double, int, int>;  // what same_compute compares
  static std::map<Key, std::shared_ptr<const HwSpec>> found;                // key -> sibling (nullptr: none)
  const Key key{g.sm_count,          g.clock_hz,         g.peak_of(a, g.best_unit(a)), g.peak_of(b, g.best_unit(b)),
                static_cast<int>(a), static_cast<int>(b)};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = found.find(key); it != found.end()) return it->second.get();
  std::shared_ptr<const HwSpec> best;
  auto consider = [&](const std::string& name) {
    if (best) return;
    try {
      auto h = std::make_shared<HwSpec>(load_hw(name));
      if (one_source_pair(h->gpu, a, b) && same_compute(g, h->gpu, a, b)) best = std::move(h);
    } catch (const std::exception&) {}  // an installed spec that does not load is no sibling
  };
  for (const std::string& n : installed_hw_names()) consider(n);
  for (const std::string& n : hw_preset_names()) {
    const char* text = hw_preset_text(n);  // only a spec with measured surfaces is parsed
    if (text && std::strstr(text, "\"gemm_samples\"")) consider(n);
  }
  found[key] = best;
  return best.get();
}

std::string gemm_pair_note(const GpuSpec& g, Dtype from, Dtype to) {
  const HwSpec* sib = gemm_pair_sibling(g, from, to);
  if (!sib) return "";
  const bool own = g.gemm_samples.count(from) && g.gemm_samples.count(to);
  return std::string("; GEMMs by the ") + to_string(from) + "/" + to_string(to) + " ratio of " + sib->name +
         "'s measured surfaces (the same SMs, clock and peaks; " + (own ? "this GPU's two come from two sources" : "none of its own") + ")";
}

std::pair<TimeNs, TimeNs> model_kernel_pair(const Trace& t, OpId k, const KernelWork& before, const KernelWork& after, const HwSpec& hw,
                                            bool* by_surfaces) {
  const auto& s = hw.gpu.gemm_samples;
  if (by_surfaces) *by_surfaces = false;
  auto own = [&] {
    if (by_surfaces) *by_surfaces = gemm_efficiency_by_shape(before, hw.gpu) && gemm_efficiency_by_shape(after, hw.gpu);
    return std::pair<TimeNs, TimeNs>{model_kernel(t, k, before, hw).time_ns, model_kernel(t, k, after, hw).time_ns};
  };
  if (one_source_pair(hw.gpu, before.dtype, after.dtype)) return own();
  // A sibling's one-source pair before this GPU's own surfaces of two sources (two libraries'
  // ratio) or of one precision only.
  if (gemm_inner(before) > 0)
    if (const HwSpec* sib = gemm_pair_sibling(hw.gpu, before.dtype, after.dtype))
      if (gemm_efficiency_by_shape(before, sib->gpu) && gemm_efficiency_by_shape(after, sib->gpu)) {
        // The sibling's two surfaces, this GPU's rates (the same compute; its memory may differ).
        const LaunchConfig* lc = t.launch(t.ops[k]);
        if (by_surfaces) *by_surfaces = true;
        return {model_kernel(lc, before, hw, &sib->gpu).time_ns, model_kernel(lc, after, hw, &sib->gpu).time_ns};
      }
  if (s.count(before.dtype) && s.count(after.dtype)) return own();
  KernelWork b = before, a = after;  // no shape: each precision's single efficiency
  b.out_rows = a.out_rows = 0;
  return {model_kernel(t, k, b, hw).time_ns, model_kernel(t, k, a, hw).time_ns};
}

KernelEstimate model_kernel(const LaunchConfig* lc, const KernelWork& w, const HwSpec& hw) { return model_kernel(lc, w, hw, nullptr); }

KernelEstimate model_kernel(const LaunchConfig* lc, const KernelWork& w, const HwSpec& hw, const GpuSpec* surfaces) {
  KernelEstimate e;
  const GpuSpec& g = hw.gpu;
  RooflineInput in{w.dtype, w.unit, w.flops, w.bytes, w.level, true, -1, -1};
  if (w.access_width > 0) {
    in.memory_efficiency = g.streaming_efficiency_for(w.access_width);
    if (w.read_bytes >= 0 && w.bytes > 0) {  // reads and writes at their own rates
      double rd = std::min(w.read_bytes, w.bytes);
      in.memory_efficiency =
          w.bytes / (rd / g.access_efficiency_for(w.access_width) + (w.bytes - rd) / g.write_efficiency_for(w.access_width));
    }
  }
  TimeNs tail = g.kernel_tail;
  const std::optional<double> by_shape = gemm_efficiency_by_shape(w, surfaces ? *surfaces : g);
  if (w.cls == KernelClass::Gemm) {  // calibrated GEMM fit of this precision, where there is one
    auto it = g.gemm_fit.find(w.dtype);
    if (it != g.gemm_fit.end()) {
      in.compute_efficiency = it->second.efficiency;
      tail = std::max(tail, it->second.overhead);
    }
    if (by_shape) in.compute_efficiency = *by_shape;  // measured at this shape: waves and tiles included
  }
  RooflineResult r = roofline(g, in);
  double compute_s = r.compute_time_s, memory_s = r.memory_time_s, chain_s = 0;
  if (lc) {
    GridScaling gs = grid_scaling(*lc, g);
    e.waves = gs.waves;
    e.wave_efficiency = gs.wave_efficiency;
    if (!by_shape) compute_s *= gs.compute;  // the launch's grid is the source GPU's kernel choice
    memory_s *= gs.memory;
    if (w.access_width > 0 && w.level == MemLevel::Hbm && !is_compute_class(w.cls))  // GEMMs stage tiles asynchronously
      memory_s *= memory_parallelism_factor(*lc, g, w.access_width, w.read_bytes >= 0 && w.bytes > 0 ? w.read_bytes / w.bytes : 0.5);
    // A dependent chain per thread: each wave of blocks takes the chain's latency.
    if (w.chain_ops > 0 && g.clock_hz > 0) chain_s = w.chain_ops * g.dependent_op_cycles / g.clock_hz * std::max(1.0, gs.waves);
  } else if (w.chain_ops > 0 && g.clock_hz > 0) {
    chain_s = w.chain_ops * g.dependent_op_cycles / g.clock_hz;
  }
  double s = std::max({compute_s, memory_s, chain_s});
  e.bound = compute_s >= memory_s ? Bound::Compute : Bound::Memory;
  if (chain_s > std::max(compute_s, memory_s)) e.bound = Bound::Latency;
  e.time_ns = static_cast<TimeNs>(std::llround(s * 1e9)) + tail;
  if (static_cast<double>(tail) > s * 1e9) e.bound = Bound::Latency;
  return e;
}

std::string_view op_name_of(std::string_view op) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> names;  // nodes: their strings never move
  std::lock_guard<std::mutex> lock(mu);
  auto it = names.find(op);
  if (it == names.end()) it = names.emplace(op).first;
  return *it;
}

WorkTable estimate_work(const Trace& t, const HwSpec& source) {
  WorkTable work(t.ops.size());
  // Innermost aten range with sizes around each launch call: ranges sorted by start per thread.
  std::map<LaneId, std::vector<std::size_t>> by_lane;
  for (std::size_t i = 0; i < t.ranges.size(); ++i)
    if (t.strings.str(t.ranges[i].name).find("sizes = [") != std::string::npos) by_lane[t.ranges[i].lane].push_back(i);
  auto innermost = [&](const Op& api) -> std::size_t {
    auto it = by_lane.find(api.lane);
    if (it == by_lane.end()) return kNone;
    const auto& v = it->second;
    auto hi = std::upper_bound(v.begin(), v.end(), api.start, [&](TimeNs s, std::size_t r) { return s < t.ranges[r].start; });
    // Walking back by start: the first range that contains the call is the innermost (op ranges
    // of one thread nest); ranges that start at the same time as it are compared by depth.
    std::size_t best = kNone;
    for (auto p = hi; p != v.begin();) {
      --p;
      const Range& r = t.ranges[*p];
      if (best != kNone && r.start < t.ranges[best].start) break;
      if (r.end >= api.end() && (best == kNone || r.depth > t.ranges[best].depth)) best = *p;
      if (api.start - r.start > 10 * kNsPerS) break;
    }
    return best;
  };
  std::map<std::size_t, std::vector<OpId>> kernels_of_range;
  // What a name says (class, precision, unit), read once per distinct name; what a launch of a
  // name costs per unit of work, once per distinct (name, launch configuration).
  std::unordered_map<StrId, std::size_t> by_name;
  std::vector<KernelWork> named;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (o.kind != OpKind::Kernel) continue;
    KernelWork w;
    auto [it, fresh] = by_name.emplace(o.name, named.size());
    if (fresh) {
      const std::string& name = t.name(o);
      KernelWork x;
      x.cls = classify_kernel(name);
      x.dtype = kernel_dtype(name);
      x.unit = kernel_unit(name, x.cls, x.dtype, source.gpu);
      named.push_back(x);
    }
    const KernelWork& x = named[it->second];
    w.cls = x.cls;
    w.dtype = x.dtype;
    w.unit = x.unit;
    work.set(i, w);
    if (o.link != kNone) {
      std::size_t r = innermost(t.ops[o.link]);
      if (r != kNone) kernels_of_range[r].push_back(i);
    }
  }
  for (auto& [r, ks] : kernels_of_range) {
    const std::string& text = t.strings.str(t.ranges[r].name);
    std::string op = text.substr(0, text.find(','));
    auto sizes = parse_nvtx_sizes(text);
    KernelWork total;
    if (!op_work(op, sizes, dtype_bytes(work[ks[0]].dtype), total, text)) continue;
    // Math goes to the op's compute-class kernels if it has any, bytes are shared by all.
    std::size_t compute =
        static_cast<std::size_t>(std::count_if(ks.begin(), ks.end(), [&](OpId k) { return is_compute_class(work[k].cls); }));
    for (OpId k : ks) {
      KernelWork w = work[k];
      bool gets_math = compute == 0 || is_compute_class(w.cls);
      w.flops = gets_math ? total.flops / static_cast<double>(compute ? compute : ks.size()) : 0;
      w.bytes = total.bytes / static_cast<double>(ks.size());
      w.from_shapes = true;
      w.op = op_name_of(op);
      w.weight_elems = gets_math ? total.weight_elems / static_cast<double>(compute ? compute : ks.size()) : 0;
      w.out_elems = total.out_elems;
      w.conv_spatial = total.conv_spatial;
      w.conv_kind = total.conv_kind;
      w.rhs_elems = gets_math ? total.rhs_elems : 0;
      if (gets_math) {
        w.out_rows = total.out_rows;
        w.out_cols = total.out_cols;
        w.batch = total.batch;
      }
      // Output tiles: cuBLAS is column-major, so its m (the tile's first figure) runs along
      // PyTorch's output columns.
      if (w.cls == KernelClass::Gemm && total.out_rows > 0 && ks.size() == 1) {
        auto [tm, tn] = gemm_tile(t.name(t.ops[k]));
        if (tm > 0) w.tiles = std::ceil(total.out_cols / tm) * std::ceil(total.out_rows / tn) * total.batch;
      }
      work.set(k, w);
    }
  }
  // Launch geometry: one-element-per-thread elementwise kernels (see the model card). Per
  // (name, launch): the bytes of one array and the time it takes (0: not such a kernel).
  struct Geometry {
    double threads = 0, array_bytes = 0, per_array = 0;
    Bytes elem = 0;
  };
  std::unordered_map<std::uint64_t, Geometry> geometry;
  auto launch_key = [](const Op& o) { return (static_cast<std::uint64_t>(o.name) << 32) | o.extra; };
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (o.kind != OpKind::Kernel) continue;
    KernelWork w = work[i];
    if (w.from_shapes || w.cls != KernelClass::Elementwise) continue;
    const LaunchConfig* lc = t.launch(o);
    if (!lc) continue;
    auto [it, fresh] = geometry.emplace(launch_key(o), Geometry{});
    Geometry& g = it->second;
    if (fresh) {
      const std::string& name = t.name(o);
      if (name.find('<') == std::string::npos) continue;
      const double threads = static_cast<double>(lc->grid(0)) * lc->grid(1) * lc->grid(2) * lc->block[0] * lc->block[1] * lc->block[2];
      if (threads < static_cast<double>(1 << 20)) continue;
      const Dtype d = kernel_dtype(name, Dtype::FP64);
      if (d != kernel_dtype(name, Dtype::INT8)) continue;  // the name does not say
      const auto elem = static_cast<Bytes>(dtype_bytes(d));
      if (elem == 0) continue;
      KernelWork one = w;
      one.bytes = threads * static_cast<double>(elem);
      one.access_width = elem;
      const double per_array = static_cast<double>(model_kernel(t, i, one, source).time_ns - source.gpu.kernel_tail);
      if (per_array <= 0) continue;
      g = Geometry{threads, one.bytes, per_array, elem};
    }
    if (g.per_array <= 0) continue;
    const TimeNs fixed = source.gpu.kernel_tail;
    double k = std::round(static_cast<double>(std::max<TimeNs>(0, o.duration() - fixed)) / g.per_array);
    if (k < 1 || k > 8) continue;
    w.bytes = k * g.array_bytes;
    w.flops = g.threads;
    w.access_width = g.elem;
    w.from_geometry = true;
    work.set(i, w);
  }
  // Inference from the measured duration for the rest: the model is linear in the work beyond the
  // tail, so one evaluation with a unit of work gives the work that takes the measured time.
  // Per (name, launch): its fixed time and its time per unit.
  constexpr double kUnit = 1e9;
  std::unordered_map<std::uint64_t, std::pair<TimeNs, double>> rate;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (o.kind != OpKind::Kernel) continue;
    const KernelWork w = work[i];
    if (w.from_shapes || w.from_geometry) continue;
    const bool math = is_compute_class(w.cls);
    auto [it, fresh] = rate.emplace(launch_key(o), std::pair<TimeNs, double>{});
    if (fresh) {
      KernelWork unit = w, none = w;
      unit.flops = math ? kUnit : 0;
      unit.bytes = math ? 0 : kUnit;
      none.flops = none.bytes = 0;
      const TimeNs f = model_kernel(t, i, none, source).time_ns;  // the tail (or a GEMM fit's overhead)
      it->second = {f, static_cast<double>(model_kernel(t, i, unit, source).time_ns - f)};
    }
    const auto [fixed, per_unit] = it->second;
    double d = static_cast<double>(std::max<TimeNs>(0, o.duration() - fixed));
    work.set_amount(i, per_unit > 0 ? d / per_unit * kUnit : 0);
  }
  return work;
}

void WorkTable::set(std::size_t op, const KernelWork& w) {
  if (w.from_shapes || w.from_geometry) {
    index_[op] = intern(w);
    amount_[op] = 0;
    return;
  }
  KernelWork base = w;
  double& field = is_compute_class(w.cls) ? base.flops : base.bytes;
  amount_[op] = field;
  field = 0;
  index_[op] = intern(base);
}

std::uint32_t WorkTable::intern(const KernelWork& w) {
  if (templates_.empty()) templates_.emplace_back();
  if (interned_.empty()) interned_.emplace(templates_[0], 0);
  auto [it, fresh] = interned_.try_emplace(w, static_cast<std::uint32_t>(templates_.size()));
  if (fresh) templates_.push_back(w);
  return it->second;
}

namespace {
std::uint64_t bits_of(double v) {
  std::uint64_t b = 0;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
}  // namespace

std::size_t WorkTable::Hash::operator()(const KernelWork& w) const {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(static_cast<std::uint64_t>(w.cls) | static_cast<std::uint64_t>(w.dtype) << 8 | static_cast<std::uint64_t>(w.unit) << 16 |
      static_cast<std::uint64_t>(w.from_shapes) << 24 | static_cast<std::uint64_t>(w.from_geometry) << 25 |
      static_cast<std::uint64_t>(w.level) << 32);
  for (double v :
       {w.flops, w.bytes, w.weight_elems, w.read_bytes, w.chain_ops, w.out_elems, w.rhs_elems, w.out_rows, w.out_cols, w.batch, w.tiles})
    mix(bits_of(v));
  mix(w.access_width);
  mix(std::hash<std::string_view>()(w.op));
  mix(w.conv_spatial ? 1 : 0);
  mix(w.conv_kind);
  return static_cast<std::size_t>(h);
}

bool WorkTable::Eq::operator()(const KernelWork& a, const KernelWork& b) const {
  return a.cls == b.cls && a.dtype == b.dtype && a.unit == b.unit && a.from_shapes == b.from_shapes && a.from_geometry == b.from_geometry &&
         a.level == b.level && bits_of(a.flops) == bits_of(b.flops) && bits_of(a.bytes) == bits_of(b.bytes) &&
         bits_of(a.weight_elems) == bits_of(b.weight_elems) && a.access_width == b.access_width &&
         bits_of(a.read_bytes) == bits_of(b.read_bytes) && bits_of(a.chain_ops) == bits_of(b.chain_ops) && a.op == b.op &&
         bits_of(a.out_elems) == bits_of(b.out_elems) && bits_of(a.rhs_elems) == bits_of(b.rhs_elems) &&
         bits_of(a.out_rows) == bits_of(b.out_rows) && bits_of(a.out_cols) == bits_of(b.out_cols) && bits_of(a.batch) == bits_of(b.batch) &&
         bits_of(a.tiles) == bits_of(b.tiles) && a.conv_spatial == b.conv_spatial && a.conv_kind == b.conv_kind;
}

}  // namespace bneck
