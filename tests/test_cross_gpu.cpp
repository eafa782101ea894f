// Other GPUs: bneck's kernel model on the presets and their efficiency overlays
// (hw/calibrated/*-calibrated.json, fitted by validate/external/fit_neusight.py on the training
// shapes of NeuSight's published single-kernel measurements), checked on the held-out shapes
// (FNV-1a of the shape string mod 10 >= 7; the same shapes on every GPU). Two figures per GPU:
//   by shape: a GEMM whose shape the trace gives (record_shapes, NVTX shapes), timed at the
//     efficiency the target measured for the nearest training shapes, as `--hw` times it;
//   no shape: the same GEMM when only its FLOPs are known (the overlay's median efficiency).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "helpers.hpp"
#include "models/collective.hpp"
#include "models/kernel_work.hpp"
#include "sim/base/stats.hpp"

using namespace bneck;
using namespace bneck::test;
namespace fs = std::filesystem;

namespace {

// A CSV line's fields (no quoting: the Vidur profiles and the header lines).
std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string c; std::getline(ss, c, ',');) f.push_back(c);
  return f;
}

// A header's column index by name (its size when absent).
std::size_t column(const std::vector<std::string>& head, const std::string& n) {
  return static_cast<std::size_t>(std::find(head.begin(), head.end(), n) - head.begin());
}

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct Row {
  std::string op, shape;
  double ms = 0, flops = 0, bytes = 0;
  double batch = 1, rows = 0, cols = 0;  // GEMM output: batch x rows x cols
  bool gemm = false;
};

// The rows of one NeuSight kernel file, by device.
std::map<std::string, std::vector<Row>> read_rows(const std::string& path, bool gemm) {
  std::map<std::string, std::vector<Row>> out;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> head = split_csv(line);
  auto col = [&](const std::string& n) { return column(head, n); };
  const std::size_t c_op = col("OPName"), c_lat = col("Latency"), c_dev = col("Device");
  while (std::getline(in, line)) {
    std::vector<std::string> f;  // CSV with quoted kernel names
    std::string cur;
    bool q = false;
    for (char c : line) {
      if (c == '"')
        q = !q;
      else if (c == ',' && !q)
        f.push_back(cur), cur.clear();
      else
        cur += c;
    }
    f.push_back(cur);
    if (f.size() < head.size()) continue;
    Row r;
    r.op = f[c_op];
    r.ms = std::stod(f[c_lat]);
    r.gemm = gemm;
    if (gemm) {
      const double b = std::stod(f[col("B")]), m = std::stod(f[col("M")]), n = std::stod(f[col("N")]), k = std::stod(f[col("K")]);
      r.shape = f[col("B")] + "," + f[col("M")] + "," + f[col("N")] + "," + f[col("K")];
      // NeuSight's (B, M, N) @ (B, N, K): the output is B x M x K, the inner size N.
      r.flops = 2 * b * m * n * k;
      r.bytes = 4 * (b * m * n + b * n * k + b * m * k);
      r.batch = b;
      r.rows = m;
      r.cols = k;
    } else {
      static const std::map<std::string, int> rw = {{"add", 3},  {"mul", 3},  {"div", 3},  {"pow", 3},  {"addu", 2}, {"mulu", 2},
                                                    {"divu", 2}, {"powu", 2}, {"relu", 2}, {"gelu", 2}, {"tanh", 2}};
      auto it = rw.find(r.op);
      if (it == rw.end()) continue;
      const double e = std::stod(f[col("B")]) * std::stod(f[col("H")]);
      r.shape = f[col("B")] + "," + f[col("H")];
      r.flops = e;
      r.bytes = e * 4 * it->second;
    }
    out[f[c_dev]].push_back(r);
  }
  return out;
}

double model_ms(const Row& r, const HwSpec& hw, bool shape = true) {
  KernelWork w;
  w.cls = r.gemm ? KernelClass::Gemm : KernelClass::Elementwise;
  w.dtype = Dtype::FP32;
  w.unit = ComputeUnit::Simt;
  w.flops = r.flops;
  w.bytes = r.bytes;
  if (shape) {
    w.batch = r.batch;
    w.out_rows = r.rows;
    w.out_cols = r.cols;
  }
  return static_cast<double>(model_kernel(nullptr, w, hw).time_ns) / 1e6;
}

// Vidur's NCCL all-reduce profile of one GPU ("a100", "h100": net__<gpu>_dgx_all_reduce.csv), the
// rows on GPUs of one node (num_workers == devices_per_node): ranks -> message bytes -> ms.
std::map<std::uint32_t, std::map<double, std::vector<double>>> vidur_all_reduce(const std::string& dir, const std::string& gpu) {
  std::ifstream in(dir + "net__" + gpu + "_dgx_all_reduce.csv");
  std::string line;
  std::getline(in, line);
  std::map<std::uint32_t, std::map<double, std::vector<double>>> by;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split_csv(line);
    if (f.size() < 12 || f[7] != f[10]) continue;
    by[static_cast<std::uint32_t>(std::stoul(f[7]))][std::stod(f[8])].push_back(std::stod(f[4]));
  }
  return by;
}

}  // namespace

TEST_CASE("other GPUs: NeuSight's held-out kernels through the presets and their fitted overlays", "[hw][cross_gpu][extended]") {
  const std::string dir = extra_dir() + "/external/neusight/kernels/";
  if (!fs::exists(dir)) {
    WARN("no " << dir << ": skipped");
    return;
  }
  auto gemm = read_rows(dir + "test_linear.csv", true);
  for (auto& [dev, v] : read_rows(dir + "test_bmm.csv", true)) gemm[dev].insert(gemm[dev].end(), v.begin(), v.end());
  auto elem = read_rows(dir + "test_elem.csv", false);
  struct Case {
    const char* device;
    const char* preset;
    double by_shape, no_shape, elem;  // held-out median |error| at most (measured: README, other GPUs)
  };
  // Bounds: the held-out medians measured when the overlays were fitted, plus one to two points.
  // The H100's rows ran PyTorch 2.1's Ampere-era sgemm kernels on Hopper; no elementwise rows.
  const Case cases[] = {
      {"NVIDIA H100 80GB HBM3", "h100-sxm", 0.06, 0.16, 0},           // 4.8, 14.2 %
      {"NVIDIA A100-PCIE-40GB", "a100-pcie-40gb", 0.05, 0.13, 0.02},  // 4.0, 10.5, 1.3 %
      {"NVIDIA A100 80GB PCIe", "a100-pcie-80gb", 0.03, 0.11, 0.02},  // 2.0, 8.8, 1.1 %
      {"Tesla V100-PCIE-32GB", "v100-pcie-32gb", 0.03, 0.07, 0.02},   // 1.7, 4.9, 0.9 %
      {"NVIDIA L4", "l4", 0.12, 0.21, 0.02},                          // 10.6, 19.1, 0.3 % (at the per-op labels' level)
      {"Tesla T4", "t4", 0.095, 0.15, 0.02},                          // 8.0, 13.2, 1.3 %
      {"Tesla P100-PCIE-16GB", "p100-pcie-16gb", 0.03, 0.17, 0.02},   // 2.0, 15.4, 1.2 %
  };
  for (const auto& c : cases) {
    INFO(c.device << " as " << c.preset);
    const HwSpec hw = load_target_hw(c.preset);
    CHECK(hw.name == std::string(c.preset) + "-calibrated");
    // An overlay whose GEMMs follow NeuSight's per-op labels (the L4: fit_neusight.py's
    // PER_OP_LEVEL) runs them at that level: its kernel set's rows at that level are what it models.
    const nlohmann::json overlay = nlohmann::json::parse(slurp(source_dir() + "/hw/calibrated/" + c.preset + "-calibrated.json"));
    const double level = overlay["calibration"].value("gemm_level", 1.0);
    std::vector<double> gs, gn, ed, gs_big;
    for (const Row& r : gemm[c.device]) {
      if (fnv1a(r.shape) % 10 < 7) continue;
      const double ms = r.ms / level;
      const double e = std::abs(model_ms(r, hw) / ms - 1);
      gs.push_back(e);
      if (ms >= 0.5) gs_big.push_back(e);
      gn.push_back(std::abs(model_ms(r, hw, false) / ms - 1));
    }
    for (const Row& r : elem[c.device])
      if (fnv1a(r.shape) % 10 >= 7) ed.push_back(std::abs(model_ms(r, hw) / r.ms - 1));
    const double m_gs = quantile(gs, 0.5), m_big = quantile(gs_big, 0.5), m_gn = quantile(gn, 0.5), m_ed = quantile(ed, 0.5);
    WARN(c.preset << ": GEMM held out " << gs.size() << " rows, by shape median |error| " << m_gs * 100 << " % (>= 0.5 ms: " << m_big * 100
                  << " %, p90 " << quantile(gs, 0.9) * 100 << " %), no shape " << m_gn * 100 << " %; elementwise " << ed.size() << " rows "
                  << m_ed * 100 << " %");
    REQUIRE(gs.size() > 100);
    CHECK(m_gs < c.by_shape);
    CHECK(m_gn < c.no_shape);
    if (c.elem > 0) CHECK(m_ed < c.elem);
    // The overlay's error bar is the same rule's held-out figure (fit_neusight.py computes it).
    CHECK(hw.gpu.held_out_error.at("gemm") == Approx(m_gs).margin(0.01));
  }
}

TEST_CASE("other GPUs: Vidur's held-out fp16 projections through the A100 and H100 overlays", "[hw][cross_gpu][extended]") {
  // validate/external/fit_vidur.py: each profile row's four projections as GEMMs of known shape,
  // held out by the same FNV-1a rule; here through bneck's kernel model (fp16 and bf16 on tensor
  // cores, timed at the median efficiency of the 7 nearest training shapes). Bound: the median at
  // fitting (2.5 %, 3.0 %) plus a point and a half.
  const std::string dir = extra_dir() + "/external/vidur/";
  if (!fs::exists(dir)) {
    WARN("no " << dir << ": skipped");
    return;
  }
  for (const auto& [gpu, preset] : {std::pair<std::string, std::string>{"a100", "a100-sxm-80gb"}, {"h100", "h100-sxm"}}) {
    const HwSpec hw = load_target_hw(preset);
    REQUIRE(hw.name == preset + "-calibrated");
    std::set<std::string> seen;
    std::vector<double> err[2];
    for (const char* model : {"Llama-2-7b-hf", "Llama-2-70b-hf"}) {
      std::ifstream in(dir + "mlp__" + gpu + "_meta-llama_" + model + ".csv");
      std::string line;
      std::getline(in, line);
      const std::vector<std::string> head = split_csv(line);
      auto col = [&](const std::string& n) { return column(head, n); };
      while (std::getline(in, line)) {
        const std::vector<std::string> f = split_csv(line);
        if (f.size() < head.size()) continue;
        auto num = [&](const char* n) { return std::stod(f[col(n)]); };
        const double nh = num("n_head"), nkv = num("n_kv_head"), e = num("n_embd"), ff = num("n_expanded_embd");
        const double tp = num("num_tensor_parallel_workers"), m = num("num_tokens"), d = e / nh;
        const double up = (f[col("use_gated_mlp")] == "True" ? 2 : 1) * ff / tp;
        const std::pair<const char*, std::pair<double, double>> ops[] = {{"attn_pre_proj", {e, (nh + 2 * nkv) * d / tp}},
                                                                         {"attn_post_proj", {e / tp, e}},
                                                                         {"mlp_up_proj", {e, up}},
                                                                         {"mlp_down_proj", {ff / tp, e}}};
        for (const auto& [op, kn] : ops) {
          const auto [k, n] = kn;
          char shape[96];
          std::snprintf(shape, sizeof shape, "1,%.0f,%.0f,%.0f", m, k, n);
          if (!seen.insert(shape).second || fnv1a(shape) % 10 < 7) continue;
          const double ms = std::stod(f[col(std::string("time_stats.") + op + ".median")]);
          for (int b = 0; b < 2; ++b) {
            KernelWork w;
            w.cls = KernelClass::Gemm;
            w.dtype = b ? Dtype::BF16 : Dtype::FP16;
            w.unit = ComputeUnit::Tensor;
            w.flops = 2 * m * k * n;
            w.bytes = 2 * (m * k + k * n + m * n);
            w.out_rows = m;
            w.out_cols = n;
            err[b].push_back(std::abs(static_cast<double>(model_kernel(nullptr, w, hw).time_ns) / 1e6 / ms - 1));
          }
        }
      }
    }
    INFO(preset);
    REQUIRE(err[0].size() > 1000);
    const double m16 = quantile(err[0], 0.5), m_bf = quantile(err[1], 0.5);
    WARN(preset << ": Vidur fp16 held out " << err[0].size() << " shapes, median |error| " << m16 * 100 << " % (bf16 " << m_bf * 100
                << " %, p90 " << quantile(err[0], 0.9) * 100 << " %)");
    CHECK(m16 < (gpu == "a100" ? 0.04 : 0.045));
    CHECK(m_bf == Approx(m16));
    CHECK(hw.gpu.held_out_error.at("gemm fp16") == Approx(m16).margin(0.01));
  }
}

TEST_CASE("other GPUs: Vidur's held-out 4-GPU all-reduces through the A100 and H100 nodes' collective model", "[hw][cross_gpu][extended]") {
  // validate/external/fit_vidur.py fits the 2- and 8-GPU all-reduce curves of Vidur's NCCL
  // profiles (A100 80GB DGX, H100 DGX); the 4-GPU rows are held out: bneck moves both curves to 4
  // GPUs and interpolates in log2 ranks. Measured median over each size's rows; every size.
  const std::string dir = extra_dir() + "/external/vidur/";
  if (!fs::exists(dir)) {
    WARN("no " << dir << ": skipped");
    return;
  }
  for (const auto& [gpu, preset] : {std::pair<std::string, std::string>{"a100", "a100-sxm-80gb"}, {"h100", "h100-sxm"}}) {
    const HwSpec hw = load_target_hw(preset);
    auto by = vidur_all_reduce(dir, gpu);  // ranks -> size -> ms
    INFO(preset);
    for (std::uint32_t n : {2u, 4u, 8u}) {
      std::vector<double> err, big;
      for (auto& [size, v] : by[n]) {
        const double ms = quantile(v, 0.5);
        const double e =
            std::abs(static_cast<double>(collective_time(hw, CollKind::AllReduce, static_cast<Bytes>(size), n).time_ns) / 1e6 / ms - 1);
        err.push_back(e);
        if (size >= 8e6) big.push_back(e);
      }
      REQUIRE(err.size() > 500);
      const double m = quantile(err, 0.5), mb = quantile(big, 0.5);
      WARN(preset << " all-reduce on " << n << " GPUs" << (n == 4 ? " (held out)" : " (fitted)") << ": median |error| " << m * 100
                  << " % over " << err.size() << " sizes, " << mb * 100 << " % at 8 MB and more");
      if (n == 4) {
        CHECK(m < 0.15);
        CHECK(mb < 0.15);
      }
    }
  }
}

// --bucket-comm's arithmetic on measurements: k all-reduces of s bytes coalesced into one of k s take
// the measured k x t(s) x model(k s) / (k model(s)); Vidur's held-out 4-GPU rows measure t(k s)
// itself. Sizes s of 64 KiB .. 4 MiB (the grid's nearest rows), k = 2 .. 16 (16 merges).
TEST_CASE("fewer and larger collectives: the collective model's merges against Vidur's held-out 4-GPU all-reduces",
          "[hw][cross_gpu][extended]") {
  const std::string dir = extra_dir() + "/external/vidur/";
  if (!fs::exists(dir)) {
    WARN("no " << dir << ": skipped");
    return;
  }
  for (const auto& [gpu, preset] : {std::pair<std::string, std::string>{"a100", "a100-sxm-80gb"}, {"h100", "h100-sxm"}}) {
    const HwSpec hw = load_target_hw(preset);
    const std::map<double, std::vector<double>> rows = vidur_all_reduce(dir, gpu)[4];  // size -> ms, 4 GPUs of one node
    auto nearest = [&](double b) {
      auto it = rows.lower_bound(b);
      if (it == rows.end()) return std::prev(it);
      if (it != rows.begin() && b - std::prev(it)->first < it->first - b) return std::prev(it);
      return it;
    };
    auto model = [&](double b) { return static_cast<double>(collective_time(hw, CollKind::AllReduce, static_cast<Bytes>(b), 4).time_ns); };
    std::vector<double> err, naive;
    for (double s : {65536.0, 262144.0, 1048576.0, 4194304.0}) {
      const auto small = nearest(s);
      const double ts = quantile(small->second, 0.5);
      for (double k : {2.0, 4.0, 8.0, 16.0}) {
        if (k * small->first > 64.0 * 1048576) continue;
        const auto big = nearest(k * small->first);
        const double measured = quantile(big->second, 0.5);
        const double forecast = k * ts * std::min(1.0, model(k * small->first) / (k * model(small->first)));
        err.push_back(std::abs(forecast / measured - 1));
        naive.push_back(std::abs(k * ts / measured - 1));
      }
    }
    REQUIRE(err.size() == 16);
    const double m = quantile(err, 0.5), mn = quantile(naive, 0.5);
    WARN(preset << " 4 GPUs: k all-reduces coalesced into one, median |error| " << m * 100 << " % over " << err.size()
                << " merges (the sum of the parts: " << mn * 100 << " %)");
    CHECK(m < 0.25);
    CHECK(m < mn);
  }
}

TEST_CASE("retargeting says which precisions the target lacks and what runs instead", "[hw][cross_gpu][cli][extended]") {
  const std::string trace = extra_dir() + "/traces/h200/block_bf16.sqlite";
  if (!fs::exists(trace)) {
    WARN("no " << trace << ": skipped");
    return;
  }
  // block_bf16's GEMMs and attention run on BF16 tensor cores; a T4 has none (Turing: FP16 only),
  // an A100 has them.
  CliRun t4 = run_bneck("replay '" + trace + "' --hw t4 --json -");
  REQUIRE(t4.code == 0);
  const auto j = nlohmann::json::parse(t4.out);
  // The T4's overlay carries its held-out error bar; block_bf16's GEMMs are bf16 (the T4's
  // measured shapes are FP32 ones): none is timed by shape.
  REQUIRE(j["assumptions"].size() == 2);
  CHECK_THAT(j["assumptions"][0].get<std::string>(),
             Catch::Contains("error bar") && Catch::Contains("gemm 8.0 %") && Catch::Contains("memory 1.3 %"));
  CHECK_THAT(j["assumptions"][1].get<std::string>(), Catch::Contains("bf16 tensor kernels") && Catch::Contains("has no bf16 tensor rate") &&
                                                         Catch::Contains("FP32 on SIMT cores (emulated)"));
  CHECK_THAT(t4.err + run_bneck("replay '" + trace + "' --hw t4").out, Catch::Contains("Assumed on t4-calibrated"));
  CHECK_THAT(run_bneck("whatif '" + trace + "' --hw t4").out, Catch::Contains("--hw t4: assumed: 192 bf16 tensor kernels"));
  CliRun a100 = run_bneck("replay '" + trace + "' --hw a100-pcie-80gb --json -");
  REQUIRE(a100.code == 0);
  const auto ja = nlohmann::json::parse(a100.out)["assumptions"];
  REQUIRE(ja.size() == 1);  // only the error bar: an A100 has bf16 tensor cores
  CHECK_THAT(ja[0].get<std::string>(), Catch::Contains("error bar"));
  // fp32 GEMMs with shapes (NVTX op shapes): timed from the A100's measured shapes.
  const std::string fp32 = extra_dir() + "/traces/h200/block_fp32.sqlite";
  CHECK_THAT(run_bneck("replay '" + fp32 + "' --hw a100-pcie-40gb").out + "",
             Catch::Contains("120 of 192 GEMM kernels") && Catch::Contains("measured GEMMs of the nearest shapes"));
}

namespace {

// "[[4, 1024], [1]]" or "(4, 1024, 1280)": the shapes' dimensions.
std::vector<std::vector<double>> parse_shapes(const std::string& s) {
  std::vector<std::vector<double>> out;
  std::vector<double> cur;
  std::string num;
  int depth = 0;
  const bool outer = s.rfind("[[", 0) == 0;
  for (char c : s) {
    if (c == '[' || c == '(') {
      ++depth;
      cur.clear();
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      num += c;
    } else {
      if (!num.empty()) cur.push_back(std::stod(num)), num.clear();
      if ((c == ']' || c == ')') && depth-- == (outer ? 2 : 1)) out.push_back(cur);
    }
  }
  return out;
}

double elems(const std::vector<double>& d) {
  double e = 1;
  for (double x : d) e *= x;
  return e;
}

// One fx node of NeuSight's per-op labels as bneck's kernel work, from its op and shapes: GEMMs
// (addmm, matmul/bmm, a Linear module), memory-bound ops (layer norm, softmax, elementwise), else
// none (size, view, getitem, embeddings, dropout: latency-bound, left as measured).
std::optional<KernelWork> fx_work(const std::string& op, const std::string& target, const std::string& in, const std::string& out) {
  const auto ins = parse_shapes(in), outs = parse_shapes(out);
  if (outs.empty() || ins.empty()) return std::nullopt;
  KernelWork w;
  w.dtype = Dtype::FP32;
  w.unit = ComputeUnit::Simt;
  const double o = elems(outs[0]);
  auto has = [&](const char* x) { return target.find(x) != std::string::npos; };
  auto gemm = [&](double m, double k, double n, double batch) {
    w.cls = KernelClass::Gemm;
    w.flops = 2 * batch * m * k * n;
    w.bytes = 4 * batch * (m * k + k * n + m * n);
    w.out_rows = m;
    w.out_cols = n;
    w.batch = batch;
    return w;
  };
  if (has("addmm") && ins.size() == 3 && ins[1].size() == 2 && ins[2].size() == 2) return gemm(ins[1][0], ins[1][1], ins[2][1], 1);
  if ((has("matmul") || has("bmm")) && ins.size() == 2 && ins[0].size() >= 2 && ins[1].size() >= 2) {
    const auto& a = ins[0];
    return gemm(a[a.size() - 2], a.back(), ins[1].back(), elems(std::vector<double>(a.begin(), a.end() - 2)));
  }
  if (op == "call_module" && (has("dense") || has("query") || has("key") || has("value") || has("lm_head")) && !ins[0].empty())
    return gemm(elems(std::vector<double>(ins[0].begin(), ins[0].end() - 1)), ins[0].back(), outs[0].back(), 1);
  const char* const memory_ops[] = {"ln_", "LayerNorm", "softmax", "add", "mul", "truediv", "where", "pow", "tanh", "gelu", "sub"};
  for (const char* m : memory_ops)
    if (has(m)) {
      w.cls = KernelClass::Elementwise;
      double b = o;
      for (const auto& i : ins)
        if (elems(i) > 1) b += elems(i);
      w.bytes = 4 * b;
      w.flops = o;
      return w;
    }
  return std::nullopt;
}

}  // namespace

// One transformer layer, its embeddings and LM head, op by op (NeuSight's per-op labels: each fx
// node timed alone): the target's sum forecast as `--hw` retargets a trace (a GEMM of known shape at
// the target's measured efficiency for the nearest shapes; other ops the H100's measured time x
// model(target) / model(H100)), against the target's measured sum. Calibration data, not the
// model-level latencies a cross-GPU forecast is judged on. Measured when written (forecast vs
// measured): GPT-2 large 4x1024 A100 PCIe 40 GB -5.6 %, V100 PCIe -2.2 %, L4 +20.6 %, T4 +0.6 %,
// P100 +12.4 %; BERT-large 8x512 -30.2 %, -12.6 %, +30.4 %, +2.9 %, -2.7 %; median 9.0 %. These
// labels disagree with the same GPUs' single-kernel set at the same shapes: a 4096 x 1024 x 1024
// Linear takes 0.989 ms in the A100's labels and 0.672 ms in its kernel set (+47 %), 0.692 and
// 1.092 ms on the L4 (-37 %), while V100, P100 and H100 agree within 7 %: measured on other boards
// or clocks. The forecast follows the kernel set.
TEST_CASE("other GPUs: one transformer layer op by op, forecast from the H100's per-op times", "[hw][cross_gpu][extended]") {
  const std::string dir = extra_dir() + "/external/neusight/";
  if (!fs::exists(dir + "per_op_labels")) {
    WARN("no " << dir << ": skipped");
    return;
  }
  // The H100 as a source calibrated on its own stack (its FP32 GEMM efficiency from the kernel
  // set's training rows, as in the test above).
  HwSpec h100 = load_target_hw("h100-sxm");
  {
    std::vector<double> eff;
    const double peak = h100.gpu.peak_of(Dtype::FP32, ComputeUnit::Simt);
    for (const char* f : {"test_linear.csv", "test_bmm.csv"}) {
      auto rows = read_rows(dir + "kernels/" + f, true);
      for (const Row& r : rows["NVIDIA H100 80GB HBM3"])
        if (fnv1a(r.shape) % 10 < 7 && r.ms >= 0.5) eff.push_back(r.flops / (r.ms * 1e-3) / peak);
    }
    h100.gpu.gemm_fit[Dtype::FP32] = {0, quantile(eff, 0.5), 0};
  }
  auto read = [](const std::string& path) {
    std::map<std::string, std::vector<std::string>> rows;  // by Name: op, target, input_shapes, output_shape, latency
    std::ifstream in(path);
    std::string line, all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::vector<std::string>> recs(1, std::vector<std::string>(1));
    bool q = false;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const char c = all[i];
      if (c == '"') {
        if (q && i + 1 < all.size() && all[i + 1] == '"')
          recs.back().back() += '"', ++i;
        else
          q = !q;
      } else if (c == ',' && !q) {
        recs.back().emplace_back();
      } else if (c == '\n' && !q) {
        recs.emplace_back(1);
      } else {
        recs.back().back() += c;
      }
    }
    const auto& h = recs[0];
    auto col = [&](const char* n) { return column(h, n); };
    for (std::size_t k = 1; k < recs.size(); ++k)
      if (recs[k].size() == h.size())
        rows[recs[k][col("Name")]] = {recs[k][col("op")], recs[k][col("target")], recs[k][col("input_shapes")],
                                      recs[k][col("output_shape")], recs[k][col("latency")]};
    return rows;
  };
  struct Target {
    const char* file;
    const char* preset;
  };
  const Target targets[] = {{"NVIDIA_A100-PCIE-40GB", "a100-pcie-40gb"},
                            {"Tesla_V100-PCIE-32GB", "v100-pcie-32gb"},
                            {"NVIDIA_L4", "l4"},
                            {"Tesla_T4", "t4"},
                            {"Tesla_P100-PCIE-16GB", "p100-pcie-16gb"}};
  std::vector<double> errors;
  for (const char* wl : {"gpt2_large-inf-1024-4", "bert_large-inf-512-8"}) {
    const auto src = read(dir + "per_op_labels/NVIDIA_H100_80GB_HBM3__" + wl + ".csv");
    for (const auto& tg : targets) {
      const auto dst = read(dir + "per_op_labels/" + tg.file + "__" + wl + ".csv");
      const HwSpec hw = load_target_hw(tg.preset);
      double forecast = 0, measured = 0, h100_total = 0;
      for (const auto& [name, s] : src) {
        auto it = dst.find(name);
        if (it == dst.end()) continue;
        const double t_src = std::stod(s[4]), t_dst = std::stod(it->second[4]);
        const auto w = fx_work(s[0], s[1], s[2], s[3]);
        const double t_tgt = w ? static_cast<double>(model_kernel(nullptr, *w, hw).time_ns) / 1e6 : 0;
        if (w && gemm_efficiency_by_shape(*w, hw.gpu))
          forecast += t_tgt;  // as `--hw` times a GEMM of known shape
        else
          forecast += w ? t_src * t_tgt / (static_cast<double>(model_kernel(nullptr, *w, h100).time_ns) / 1e6) : t_src;
        measured += t_dst;
        h100_total += t_src;
      }
      const double err = forecast / measured - 1;
      errors.push_back(std::abs(err));
      WARN(wl << " on " << tg.preset << ": forecast " << forecast << " ms from the H100's " << h100_total << " ms, measured " << measured
              << " ms (" << err * 100 << " %)");
      CHECK(std::abs(err) < 0.45);
    }
  }
  WARN("median |error| over the 10 cases " << quantile(errors, 0.5) * 100 << " %");
  CHECK(quantile(errors, 0.5) < 0.10);
}

TEST_CASE("retargeting says when the trace's weights and optimizer state cannot fit the target (hand-computed)", "[whatif][hw]") {
  // One forward fp32 GEMM of a 4096 x 4096 weight (aten::addmm): 64 MiB of weights, inference (no
  // backward thread). On a T4 (16 GB = 14.9 GiB) it leaves 14.8 GiB; on a spec of 48 MiB it does
  // not fit.
  std::string p = tmp("mem.json");
  std::ofstream(p) << R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 10, "dur": 20,
     "args": {"Input Dims": [[4096], [1024, 4096], [4096, 4096]], "Input type": ["float", "float", "float"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 12, "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f32f32_f32f32", "pid": 0, "tid": 7, "ts": 40, "dur": 500,
     "args": {"correlation": 1, "stream": 7, "device": 0}}],
    "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132, "computeMajor": 9, "computeMinor": 0}]})";
  auto memory_line = [&](const std::string& hw) {
    const WhatIfReport w = whatif_of(p, "", {"--hw", hw});
    for (const auto& l : w.log)
      if (l.find("memory: ") != std::string::npos) return l;
    return std::string();
  };
  CHECK_THAT(memory_line("t4"),
             Catch::Contains("at least 0.1 GiB (weights 0.1 GiB; activations not in the trace) of 14.9 GiB: leaves 14.8 GiB"));
  CHECK_THAT(memory_line(R"({"extends": "t4", "name": "small", "gpu": {"memory": "48 MiB"}})"),
             Catch::Contains("does not fit: the run as traced cannot run on small"));
  std::remove(p.c_str());
}

TEST_CASE("other GPUs: whole-model forecasts of NeuSight's released labels from H200 traces", "[hw][cross_gpu][e2e][extended]") {
  // NeuSight's released end-to-end latencies of GPT-3 XL and OPT-1.3B (fp32, TF32 off; inference 2
  // and 8 x 2048, training 1 and 2 x 2048) on seven GPUs, forecast from bneck's H200 traces of the
  // same workloads (validate/reference/h200/loops/neusight.tar.xz) and NeuSight's H200 timings of
  // them: forecast = H200 label x predicted / baseline (`whatif --hw`, `--batch K` for the larger
  // batches). Measured (validate/external/whole_model_neusight.py, which writes each median into
  // the overlay's held_out_error["whole model"]): A100 PCIe 40 GB 3.9 %, A100 80 GB PCIe 4.0 %, H100
  // 1.6 %, L4 6.2 %, P100 0.5 %, T4 3.2 %, V100 1.9 %; the largest |error| -17.9 % (OPT-1.3B training
  // at batch 2 on the A100 80 GB, whose forward took 2.95x the batch-1 one there: 1.98x on the H100
  // and H200). Bounds: each GPU's median within 8 %, every other row within 12 %.
  const std::string labels = extra_dir() + "/external/neusight/labels/";
  if (!fs::exists(labels)) {
    WARN("no " << labels << ": skipped");
    return;
  }
  auto read = [](const std::string& p) {
    std::ifstream in(p);
    std::string line;
    std::getline(in, line);
    if (line.rfind("\xEF\xBB\xBF", 0) == 0) line = line.substr(3);
    const std::vector<std::string> head = split_csv(line);
    std::vector<std::map<std::string, std::string>> rows;
    while (std::getline(in, line)) {
      const std::vector<std::string> f = split_csv(line);
      if (f.size() < head.size()) continue;
      std::map<std::string, std::string> r;
      for (std::size_t i = 0; i < head.size(); ++i) r[head[i]] = f[i];
      rows.push_back(std::move(r));
    }
    return rows;
  };
  std::map<std::string, double> h200;
  for (auto& r : read(labels + "h200_e2e_calibration.csv")) h200[r["model"] + "-" + r["mode"] + "-" + r["batch"]] = std::stod(r["e2e_ms"]);
  const std::map<std::string, std::string> gpus = {{"NVIDIA_A100-PCIE-40GB", "a100-pcie-40gb"},
                                                   {"NVIDIA_A100_80GB_PCIe", "a100-pcie-80gb"},
                                                   {"NVIDIA_H100_80GB_HBM3", "h100-sxm"},
                                                   {"NVIDIA_L4", "l4"},
                                                   {"Tesla_T4", "t4"},
                                                   {"Tesla_P100-PCIE-16GB", "p100-pcie-16gb"},
                                                   {"Tesla_V100-PCIE-32GB", "v100-pcie-32gb"}};
  std::map<std::string, std::vector<double>> errs;
  for (auto& r : read(labels + "labels_e2e_calibration.csv")) {
    auto g = gpus.find(r["device"]);
    if (g == gpus.end()) continue;
    const int base = r["mode"] == "inf" ? 2 : 1, batch = std::stoi(r["batch"]);
    const std::string key = r["model"] + "-" + r["mode"] + "-" + std::to_string(base);
    if (!h200.count(key) || batch % base) continue;
    const std::string trace = std::string(BNECK_TEST_DATA) + "/loops/k/" + r["model"] + "-" + r["mode"] + "-" + std::to_string(base) +
                              "x2048.fp32.kineto.json.gz";
    std::vector<std::string> args = {"--hw", g->second};
    if (batch != base) args.insert(args.begin(), {"--batch", std::to_string(batch / base)});
    const WhatIfReport w = whatif_of(trace, "step.*", args);
    const double f = h200[key] * static_cast<double>(w.predicted_ns) / static_cast<double>(w.baseline_ns), m = std::stod(r["e2e_ms"]);
    INFO(r["device"] << " " << r["model"] << " " << r["mode"] << " batch " << batch << ": forecast " << f << " ms, measured " << m
                     << " ms");
    const bool allocator_bound = g->second == "a100-pcie-80gb" && r["model"] == "opt_13" && batch == 2;
    if (!allocator_bound) CHECK(std::abs(f / m - 1) < 0.12);
    errs[g->second].push_back(std::abs(f / m - 1));
  }
  REQUIRE(errs.size() == 7);
  for (const auto& [gpu, e] : errs) {
    INFO(gpu);
    CHECK(quantile(e, 0.5) < 0.08);
    CHECK(load_target_hw(gpu).gpu.held_out_error.at("whole model") == Approx(quantile(e, 0.5)).margin(0.005));
  }
}
