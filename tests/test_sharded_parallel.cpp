// Sharded parallelism what-ifs from one-GPU traces (models/whatif/fsdp.cpp, context_parallel.cpp,
// expert_parallel.cpp): hand-computed graphs, and runs on real one-GPU traces.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <string>

#include "helpers.hpp"
#include "models/collective.hpp"
#include "sim/base/units.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {

// Three training iterations, 3 ms apart on the host: the main thread (lane 0) launches 4 layers of
// forward (a 200 us GEMM and a 50 us activation each) at the iteration's start, autograd's thread
// (lane 2) the 4 layers of backward (50 us, then a 400 us GEMM), then the main thread the
// optimizer (200 us) inside `Optimizer.step#AdamW.step`. The GPU is the bottleneck: kernels run
// back to back from 100 us, 3 ms an iteration (1 ms forward, 1.8 ms backward, 0.2 ms optimizer).
std::string training_steps() {
  std::string ops, ranges;
  int n = 0;
  long gpu = 100;
  auto launch = [&](int lane, long host, const char* kernel, long us) {
    const long st = std::max(gpu, host + 10);
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        R"(%s{"kind": "api", "name": "cudaLaunchKernel", "lane": %d, "start": "%ld us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "%s", "lane": 1, "start": "%ld us", "end": "%ld us", "launched_by": %d})",
        n ? ",\n      " : "", lane, host, kernel, st, st + us, n);
    ops += buf;
    n += 2;
    gpu = st + us;
  };
  for (int it = 0; it < 3; ++it) {
    long h = it * 3000;
    for (int l = 0; l < 4; ++l) {
      launch(0, h, "sm90_gemm_layer_fwd", 200), h += 6;
      launch(0, h, "vectorized_elementwise_kernel relu_fwd", 50), h += 6;
    }
    h += 10;
    for (int l = 0; l < 4; ++l) {
      launch(2, h, "vectorized_elementwise_kernel relu_bwd", 50), h += 6;
      launch(2, h, "sm90_gemm_layer_bwd", 400), h += 6;
    }
    launch(0, h + 10, "multi_tensor_apply_kernel adam", 200);
    char buf[160];
    std::snprintf(buf, sizeof buf, R"(%s{"name": "Optimizer.step#AdamW.step", "lane": 0, "start": "%ld us", "end": "%ld us"})",
                  it ? ", " : "", h + 9, h + 20);
    ranges += buf;
  }
  return R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}, {"kind": "thread", "name": "autograd"}],
    "ops": [)" +
         ops + "],\n    \"ranges\": [" + ranges + "]}";
}

bool logged(const WhatIfReport& r, const std::string& what) {
  for (const auto& l : r.log)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("FSDP what-if: per-layer all-gathers and reduce-scatters around a training step (hand-computed)", "[whatif][parallel][fsdp]") {
  // --fsdp 2 --param-bytes 64 MiB: structure recognition finds 3 iterations, 4 layers in each
  // forward and backward; each layer is a unit of 16 MiB (the GEMMs' time is equal). Per unit an
  // all-gather A = AG(16 MiB, 2 ranks) and a reduce-scatter R = RS(16 MiB, 2 ranks), both shorter
  // than a layer's compute, so all are hidden but two per iteration: the first all-gather (it waits
  // for the previous optimizer, which updates the parameters; the first one for its host call,
  // launch end 5 us + the c10d call's 30 us) and the last reduce-scatter (the optimizer waits for it).
  // The optimizer updates half the parameters: 200 us at half its work, tail + (200 us - tail) / 2.
  // The run, from the first all-gather at 35 us: 3 x (A + 2.8 ms + R + O/2). (`--host-speed 1`:
  // every rank's host at the traced pace, not the slowest of the ranks': host_speed.cpp.)
  const std::string path = write_temp(training_steps(), "fsdp");
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const TimeNs A = collective_time(hw, CollKind::AllGather, 16ull << 20, 2).time_ns;
  const TimeNs R = collective_time(hw, CollKind::ReduceScatter, 16ull << 20, 2).time_ns;
  const TimeNs tail = hw.gpu.kernel_tail;
  const TimeNs O2 = tail + (200 * kNsPerUs - tail) / 2;
  INFO("A = " << A << " ns, R = " << R << " ns, optimizer " << O2 << " ns");
  REQUIRE(A < 250 * kNsPerUs);
  REQUIRE(A + R < 450 * kNsPerUs);
  WhatIfReport r = whatif_of(path, "", {"--host-speed", "1", "--fsdp", "2", "--param-bytes", "64 MiB", "--sharing", "off"});
  CHECK(r.baseline_ns == 9 * kNsPerMs);
  CHECK(std::llabs(r.predicted_ns - 3 * (A + 2800 * kNsPerUs + R + O2)) <= 3);
  CHECK(logged(r, "stage 3, 3 steps of 4 units + root; 24 all-gathers, 12 reduce-scatters"));
  CHECK(logged(r, "weak scaling"));
  // Memory: 64 MiB of parameters, gradients and AdamW's two moments over 2 GPUs, plus two units of
  // 16 MiB gathered: 32 + 32 + 64 + 32 = 160 MiB.
  CHECK(logged(r, "optimizer state (AdamW) 64.0 MiB; total 160.0 MiB"));
  // The same figures in JSON (memory_per_gpu): activations the trace cannot tell (null).
  {
    const nlohmann::json m = memory_per_gpu_json(r);
    CHECK(m["parameters_bytes"] == 32ull << 20);
    CHECK(m["gradients_bytes"] == 32ull << 20);
    CHECK(m["optimizer_bytes"] == 64ull << 20);
    CHECK(m["buffers_bytes"] == 32ull << 20);
    CHECK(m["activations_bytes"].is_null());
    CHECK(m["total_bytes"] == 160ull << 20);
    CHECK(m["capacity_bytes"] == hw.gpu.memory_bytes);
  }

  // Stage 2 keeps the forward's parameters: no backward all-gathers; the exposed ones are the same.
  WhatIfReport s2 =
      whatif_of(path, "", {"--host-speed", "1", "--fsdp", "2", "--fsdp-stage", "2", "--param-bytes", "64 MiB", "--sharing", "off"});
  CHECK(logged(s2, "stage 2, 3 steps of 4 units + root; 12 all-gathers, 12 reduce-scatters"));
  CHECK(std::llabs(s2.predicted_ns - 3 * (A + 2800 * kNsPerUs + R + O2)) <= 3);
  // 64 MiB kept gathered + 32 gradients + 64 optimizer state.
  CHECK(logged(s2, "total 160.0 MiB"));

  // Hybrid: 4 GPUs in 2 groups of 2: gathers and scatters among 2, then the 8 MiB shard
  // all-reduced between the groups after each reduce-scatter; the last one is exposed too.
  const TimeNs AR = collective_time(hw, CollKind::AllReduce, 8ull << 20, 2).time_ns;
  WhatIfReport hy =
      whatif_of(path, "", {"--host-speed", "1", "--fsdp", "4", "--fsdp-hybrid", "2", "--param-bytes", "64 MiB", "--sharing", "off"});
  CHECK(logged(hy, "12 cross-group all-reduces"));
  CHECK(std::llabs(hy.predicted_ns - 3 * (A + 2800 * kNsPerUs + R + AR + O2)) <= 3);

  // Strong scaling: the global batch fixed, every forward and backward kernel does half the work
  // (8.4 ms of them, about halved: the kernel tail stays); the host, which launches an iteration
  // every 3 ms, then paces the run: at least 6 ms + the last iteration.
  WhatIfReport st =
      whatif_of(path, "", {"--host-speed", "1", "--fsdp", "2", "--param-bytes", "64 MiB", "--scaling", "strong", "--sharing", "off"});
  CHECK(logged(st, "strong scaling: the global batch is the traced one, each GPU computes 1/2 (8.400 ms -> 4.2"));
  CHECK(st.predicted_ns < r.predicted_ns);
  CHECK(st.predicted_ns > 6 * kNsPerMs + 1400 * kNsPerUs);

  // Without shapes or --param-bytes nothing sizes the parameters: one clear line, never a silent
  // step with no all-gathers.
  CHECK_THROWS_WITH(whatif_of(path, "", {"--host-speed", "1", "--fsdp", "2", "--sharing", "off"}),
                    Catch::Contains("no GEMM shapes in the trace to size the parameters: give --param-bytes BYTES"));
  std::remove(path.c_str());
}

TEST_CASE("FSDP composed with tensor parallelism on the same step (hand-computed)", "[whatif][parallel][fsdp]") {
  // The three iterations above, `--fsdp 2 --param-bytes 4 MiB` then `--tensor-parallel 2
  // --tp-bytes 4 KiB` (2 x 2 GPUs). Tensor parallelism, without shapes, pairs the GEMMs by order
  // along the stream: in the forward G1 opens a region that G2 closes (G1, its activation and G2
  // split 2 ways), the activation after G2 is replicated, G3..G4 likewise; the backward the same
  // from its first GEMM (its first and third activations replicated): 12 kernels an iteration
  // split, a kernel of time d taking F + (d - F) / 2 (F: the fp32 GEMM fit's fixed part for the
  // GEMMs, the tail for the activations). Each of the 4 row-parallel GEMMs an iteration is followed
  // by an all-reduce of 4 KiB (T) that holds back the stream; the last runs beside the backward's
  // last reduce-scatter (R > T), which the optimizer (half its work: O/2) waits for. FSDP's 1 MiB
  // all-gathers are hidden. The iterations now take C + 3 T + R + O/2 (C: their kernels after the
  // split), about 1.6 ms, less than the host's 3 ms: the third starts where it did in the trace,
  // at 6.1 ms (its first kernel's launch keeps its delay), and the run, from the first all-gather
  // at 35 us (launch end + the c10d call), spans 6.1 ms - 35 us + C + 3 T + R + O/2. Both say
  // which batch they hold fixed: FSDP the per-GPU one (weak, default), tensor parallelism the
  // global one (strong, default).
  const std::string path = write_temp(training_steps(), "fsdp_tp");
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const double R = static_cast<double>(collective_time(hw, CollKind::ReduceScatter, 1ull << 20, 2).time_ns);
  const double T = static_cast<double>(collective_time(hw, CollKind::AllReduce, 4ull << 10, 2).time_ns);
  const double tail = static_cast<double>(hw.gpu.kernel_tail);
  auto fit = hw.gpu.gemm_fit.find(Dtype::FP32);
  const double F = std::max(tail, fit != hw.gpu.gemm_fit.end() ? static_cast<double>(fit->second.overhead) : 0.0);
  auto half = [](double d, double fixed) { return fixed + (d - fixed) / 2; };
  const double us = 1e3;
  // Forward: 4 GEMMs and 2 activations split, 2 activations kept; backward: 4 GEMMs split, 2 of
  // its activations split and 2 kept.
  const double C =
      4 * half(200 * us, F) + 2 * half(50 * us, tail) + 2 * 50 * us + 4 * half(400 * us, F) + 2 * half(50 * us, tail) + 2 * 50 * us;
  const double O2 = half(200 * us, tail);
  REQUIRE(R > T);
  REQUIRE(C + 3 * T + R + O2 < 2900 * us);
  WhatIfReport r = whatif_of(
      path, "",
      {"--host-speed", "1", "--fsdp", "2", "--param-bytes", "4 MiB", "--tensor-parallel", "2", "--tp-bytes", "4 KiB", "--sharing", "off"});
  INFO("R " << R << " ns, T " << T << " ns, F " << F << " ns, C " << C << " ns");
  CHECK(logged(r, "36 kernels split 2 ways"));
  CHECK(logged(r, "12 all-reduces after the row-parallel GEMMs"));
  CHECK(logged(r, "24 all-gathers, 12 reduce-scatters"));
  CHECK(logged(r, "weak scaling: every GPU keeps the traced batch"));
  CHECK(logged(r, "strong scaling: the global batch is the traced one, which every GPU sees"));
  CHECK(static_cast<double>(r.predicted_ns) == Approx(6100 * us - 35 * us + C + 3 * T + R + O2).epsilon(0.001));
  // `--scaling` before both applies to both (a companion given before its transforms).
  WhatIfReport st = whatif_of(path, "",
                              {"--scaling", "strong", "--fsdp", "2", "--param-bytes", "4 MiB", "--tensor-parallel", "2", "--tp-bytes",
                               "4 KiB", "--sharing", "off"});
  CHECK(logged(st, "strong scaling: the global batch is the traced one, each GPU computes 1/2"));
  CHECK(logged(st, "strong scaling: the global batch is the traced one, which every GPU sees"));
  std::remove(path.c_str());
}

TEST_CASE("FSDP what-if: bad options are one clear error", "[whatif][parallel][fsdp]") {
  const std::string path = write_temp(training_steps(), "fsdp_bad");
  CHECK_THROWS_WITH(whatif_of(path, "", {"--host-speed", "1", "--fsdp", "0"}), Catch::Contains("--fsdp 0"));
  CHECK_THROWS_WITH(whatif_of(path, "", {"--host-speed", "1", "--fsdp", "2", "--fsdp-stage", "1"}), Catch::Contains("--fsdp-stage 1"));
  CHECK_THROWS_WITH(whatif_of(path, "", {"--host-speed", "1", "--fsdp", "4", "--fsdp-hybrid", "3"}), Catch::Contains("must divide"));
  CHECK_THROWS_WITH(whatif_of(path, "", {"--host-speed", "1", "--fsdp", "2", "--scaling", "huge"}), Catch::Contains("--scaling huge"));
  std::remove(path.c_str());
}

TEST_CASE("context-parallel what-if: ring attention's K/V exchange beside the blocks (hand-computed)", "[whatif][parallel][cp]") {
  // One stream: a 2 ms projection GEMM, a 16 ms fused attention kernel, a 2 ms output GEMM, each
  // launched long before it runs. --context-parallel 2: each kernel does half its work, d' = tail
  // + (d - tail) / 2 (its work read from its measured time); the attention's half is run as two
  // blocks of d'/2 = P each: the local block at once, the neighbour's after its exchange X (one
  // send/recv of --cp-bytes, started with the attention). Span: G' + P + max(P, X) + G'.
  const char* w = R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ops": [
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm90_gemm_qkv", "lane": 1, "start": "100 us", "end": "2100 us", "launched_by": 0},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "10 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "flash_fwd_kernel", "lane": 1, "start": "2100 us", "end": "18100 us", "launched_by": 2},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "20 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm90_gemm_out", "lane": 1, "start": "18100 us", "end": "20100 us", "launched_by": 4}]})";
  const std::string path = write_temp(w, "cp");
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const TimeNs tail = hw.gpu.kernel_tail;
  auto half = [&](TimeNs d) { return tail + (d - tail) / 2; };
  const TimeNs G = half(2 * kNsPerMs), P = half(16 * kNsPerMs) / 2;
  for (const char* bytes : {"64 MiB", "4 GiB"}) {  // hidden behind the local block, and exposed
    const TimeNs X = collective_time(hw, CollKind::SendRecv, parse_bytes(bytes), 2).time_ns;
    INFO(bytes << ": X = " << X << " ns, P = " << P << " ns");
    WhatIfReport r = whatif_of(path, "", {"--context-parallel", "2", "--cp-bytes", bytes, "--sharing", "off"});
    CHECK(r.baseline_ns == 20 * kNsPerMs);
    CHECK(std::llabs(r.predicted_ns - (2 * G + P + std::max(P, X))) <= 2);
    CHECK(logged(r, "1 attention kernels in a ring of 2 K/V blocks, 1 send/recv exchanges"));
  }
  // Ulysses: an all-to-all of q, k, v (1.5 x the block) before the attention and of its output
  // (0.5 x) after; the attention runs on half the heads: G' + A1 + 2P + A2 + G'.
  const TimeNs A1 = collective_time(hw, CollKind::AllToAll, 96ull << 20, 2).time_ns;
  const TimeNs A2 = collective_time(hw, CollKind::AllToAll, 32ull << 20, 2).time_ns;
  WhatIfReport u = whatif_of(path, "", {"--context-parallel", "2", "--cp-mode", "all-to-all", "--cp-bytes", "64 MiB", "--sharing", "off"});
  CHECK(std::llabs(u.predicted_ns - (2 * G + A1 + half(16 * kNsPerMs) + A2)) <= 4);  // ns rounding of 4 durations
  CHECK_THROWS_WITH(whatif_of(path, "", {"--context-parallel", "2", "--cp-mode", "zigzag"}), Catch::Contains("--cp-mode zigzag"));
  std::remove(path.c_str());
}

TEST_CASE("expert-parallel what-if: all-to-all dispatch and combine around the experts (hand-computed)", "[whatif][parallel][ep]") {
  // One stream: the router's scoring GEMM (100 us) and its top-k (20 us), then 4 experts of a
  // 300 us GEMM, a 50 us activation and a 30 us index_add (the combine), then a 50 us norm.
  // --expert-parallel 2 --ep-bytes 64 MiB: each expert kernel runs N = 2 times the tokens in 1/2
  // of the kernels: model(2 work) / 2 = d - tail / 2 (its work read from its measured time); an
  // all-to-all X of 64 MiB after the top-k and another after the last combine. Span: 100 + 20 us +
  // X + sum(d - tail/2) (12 kernels) + X + 50 us; --ep-imbalance 0.25 stretches the experts 1.25x.
  std::string ops;
  int n = 0;
  long gpu = 100;
  auto launch = [&](const char* name, long us) {
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  R"(%s{"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "%d us", "duration": "2 us", "api_class": "launch"},
      {"kind": "kernel", "name": "%s", "lane": 1, "start": "%ld us", "end": "%ld us", "launched_by": %d})",
                  n ? ",\n      " : "", n * 2, name, gpu, gpu + us, n);
    ops += buf;
    n += 2;
    gpu += us;
  };
  launch("sm90_gemm_router", 100);
  launch("void at::native::sbtopk::gatherTopK<float>", 20);
  for (int e = 0; e < 4; ++e) {
    launch("sm90_gemm_expert", 300);
    launch("vectorized_elementwise_kernel silu", 50);
    launch("void at::native::indexFuncLargeIndex<float> index_add", 30);
  }
  launch("vectorized_layer_norm_kernel", 50);
  const std::string path = write_temp(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ops": [)" + ops + "]}",
                                      "ep");
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const TimeNs tail = hw.gpu.kernel_tail;
  const TimeNs X = collective_time(hw, CollKind::AllToAll, 64ull << 20, 2).time_ns;
  const TimeNs experts = 4 * (300 + 50 + 30) * kNsPerUs - 12 * tail / 2;
  WhatIfReport r = whatif_of(path, "", {"--expert-parallel", "2", "--ep-bytes", "64 MiB", "--sharing", "off"});
  CHECK(r.baseline_ns == 1690 * kNsPerUs);
  CHECK(std::llabs(r.predicted_ns - (170 * kNsPerUs + 2 * X + experts)) <= 12);
  CHECK(logged(r, "1 expert regions (12 kernels"));
  WhatIfReport im = whatif_of(path, "", {"--expert-parallel", "2", "--ep-bytes", "64 MiB", "--ep-imbalance", "0.25", "--sharing", "off"});
  CHECK(std::llabs(im.predicted_ns - (170 * kNsPerUs + 2 * X + experts * 5 / 4)) <= 12);
  // Selected by name instead of found: the same region.
  WhatIfReport sel = whatif_of(
      path, "", {"--expert-parallel", "2", "--ep-experts", "name~expert|silu|index_add", "--ep-bytes", "64 MiB", "--sharing", "off"});
  CHECK(std::llabs(sel.predicted_ns - r.predicted_ns) <= 2);
  CHECK_THROWS_WITH(whatif_of(path, "", {"--expert-parallel", "2", "--ep-imbalance", "-1"}), Catch::Contains("--ep-imbalance -1"));
  std::remove(path.c_str());
}

namespace {
// A one-layer MoE training step as a Kineto file (bf16): the forward thread (tid 1) launches the
// router GEMM (100 us), its top-k (20), an expert GEMM x W (W 1024 x 2048; 300 us), the combine
// (index_add, 30) and a norm (50); autograd's thread (tid 2) the expert's input and weight
// gradients (rhs / output of `grad_w` elements each, 300 us) and a norm's backward (50), all on
// one stream, back to back from 100 us.
std::string moe_training(const char* grad_w) {
  std::string ev;
  long gpu = 100;
  int corr = 0;
  auto add = [&](int tid, const char* name, long us, const char* dims) {
    ++corr;
    char buf[900];
    const long ts = corr * 3;
    if (dims)
      std::snprintf(
          buf, sizeof buf,
          R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": %d, "ts": %ld, "dur": 3, "args": {"Input Dims": %s, "Input type": ["c10::BFloat16", "c10::BFloat16"]}},)",
          tid, ts, dims);
    else
      buf[0] = 0;
    ev += buf;
    std::snprintf(
        buf, sizeof buf,
        R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": %d, "ts": %ld, "dur": 1, "args": {"correlation": %d}},
      {"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %ld, "dur": %ld, "args": {"correlation": %d, "stream": 7, "device": 0}},)",
        tid, ts + 1, corr, name, gpu, us, corr);
    ev += buf;
    gpu += us;
  };
  add(1, "sm90_gemm_bf16_router", 100, "[[4096, 1024], [1024, 8]]");
  add(1, "void at::native::sbtopk::gatherTopK<float>", 20, nullptr);
  add(1, "sm90_gemm_bf16_expert", 300, "[[8192, 1024], [1024, 2048]]");
  add(1, "void at::native::indexFuncLargeIndex<c10::BFloat16> index_add", 30, nullptr);
  add(1, "vectorized_layer_norm_kernel", 50, nullptr);
  add(2, "sm90_gemm_bf16_nt_input_grad", 300, grad_w);
  add(2, "sm90_gemm_bf16_tn_weight_grad", 300, "[[1000, 8192], [8192, 1000]]");
  add(2, "layer_norm_grad_input_kernel", 50, nullptr);
  ev.pop_back();  // the last comma
  return R"({"traceEvents": [)" + ev + R"(],
    "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132, "computeMajor": 9, "computeMinor": 0}]})";
}
}  // namespace

TEST_CASE("expert-parallel what-if: the backward's gradient all-to-alls (hand-computed)", "[whatif][parallel][ep]") {
  // The expert's input gradient (rhs 2048 x 1024: the forward weight's elements) is found in the
  // backward; the weight gradient here has a shape of its own and is not. With the backward region
  // found, the step gains the output gradient's all-to-all before it and the input gradient's after
  // it (X each, the forward dispatch's 64 MiB) and the dgrad GEMM runs twice the tokens in half the
  // kernels (its model(2 work) / 2): predicted(found) - predicted(not found) = 2 X + (that - 300 us).
  const std::string found = write_temp(moe_training("[[8192, 2048], [2048, 1024]]"), "ep_bwd");
  const std::string none = write_temp(moe_training("[[8192, 2000], [2000, 1000]]"), "ep_bwd_none");
  const std::vector<std::string> args = {"--unprofile=off", "--expert-parallel", "2", "--ep-bytes", "64 MiB", "--sharing", "off"};
  const WhatIfReport a = whatif_of(found, "", args), b = whatif_of(none, "", args);
  CHECK(logged(a, "1 of the regions in the backward"));
  CHECK(logged(b, "the backward's expert GEMMs not found"));
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const TimeNs X = collective_time(hw, CollKind::AllToAll, 64ull << 20, 2).time_ns;
  const Trace t = load_trace(found);
  const auto work = estimate_work(t, hw);
  OpId dgrad = kNone;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].kind == OpKind::Kernel && t.name(t.ops[i]) == "sm90_gemm_bf16_nt_input_grad") dgrad = i;
  REQUIRE(dgrad != kNone);
  const double retimed = static_cast<double>(retime_by_work(t, dgrad, work[dgrad], 300 * kNsPerUs, hw, 2, 2, 2)) / 2;
  CHECK(static_cast<double>(a.predicted_ns - b.predicted_ns) == Approx(2.0 * static_cast<double>(X) + retimed - 300e3).margin(20));
  std::remove(found.c_str());
  std::remove(none.c_str());
}
