// Tensor- and pipeline-parallel what-ifs: hand-computed graphs, and the two-GPU ground truth
// measured on H200s (validate/reference/h200/parallel, made by validate/reference/h200/parallel/run_parallel.sh).
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <deque>
#include <filesystem>
#include <fstream>

#include "helpers.hpp"
#include "models/collective.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "tools/views/whatif_view.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {

WhatIfReport run(const std::string& path, const std::string& range, const std::vector<std::string>& args) {
  return whatif_of(path, range, args);
}

const std::string kPar = std::string(BNECK_SOURCE_DIR) + "/validate/reference/h200/parallel/";

// The fixed part F of a bf16 GEMM's modelled time (the GEMM fit's overhead, or the kernel tail):
// with its work inferred from the measured time d, model(k work) / model(work) makes it
// F + k (d - F).
double Fg() {
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  auto fit = hw.gpu.gemm_fit.find(Dtype::BF16);
  return static_cast<double>(std::max(hw.gpu.kernel_tail, fit != hw.gpu.gemm_fit.end() ? fit->second.overhead : 0));
}

}  // namespace

TEST_CASE("companion options follow their transform on the command line and in scenarios", "[whatif][parallel]") {
  std::string sc;
  auto tr = parse_transform_args({"--tensor-parallel", "2", "--tp-comm", "name~gemm", "--tp-bytes=16 MiB", "--scale", "2:name~x"}, sc);
  REQUIRE(tr.size() == 2);
  CHECK(tr[0]->text == "--tensor-parallel 2 --tp-comm=name~gemm --tp-bytes=16 MiB");
  CHECK(tr[1]->text == "--scale 2:name~x");
  // A companion without its transform, an empty microbatch regex, a bad schedule (a pipeline
  // without --microbatch-range takes the structure's microbatches: tested below).
  CHECK_THROWS_AS(parse_transform_args({"--tp-comm", "name~gemm"}, sc), InputError);
  CHECK_NOTHROW(parse_transform_args({"--pipeline-parallel", "2"}, sc));
  CHECK_THROWS_WITH(parse_transform_args({"--pipeline-parallel", "2", "--microbatch-range", ""}, sc),
                    Catch::Contains("--microbatch-range"));
  CHECK_THROWS_WITH(parse_transform_args({"--pipeline-parallel", "2", "--microbatch-range", "mb.*", "--schedule", "zigzag"}, sc),
                    Catch::Contains("gpipe or 1f1b"));
  std::string p =
      write_temp(R"({"name": "pp", "transforms": [{"pipeline-parallel": 4, "microbatch-range": "mb.*", "schedule": "1f1b"}]})", "pp_sc");
  Scenario s = load_scenario(p);
  REQUIRE(s.transforms.size() == 1);
  CHECK(s.transforms[0]->text == "--pipeline-parallel 4 --microbatch-range=mb.* --schedule=1f1b");
  std::ofstream(p) << R"({"transforms": [{"pipeline-parallel": 4, "tp-comm": "x"}]})";
  CHECK_THROWS_WITH(load_scenario(p), Catch::Contains("neither a transform nor an option"));
  std::remove(p.c_str());
}

TEST_CASE("pipeline-parallel what-if: gpipe on 2 stages of a 2-microbatch step (hand-computed)", "[whatif][parallel]") {
  // One GPU runs microbatch m as forward kernels f0, f1 (1 ms each) and backward kernels b0, b1
  // (2 ms each), back to back: 12 ms. On 2 stages, the forward cut at half its time puts f0 on
  // stage 0 and f1 on stage 1; the backward runs the layers in reverse: b0 (the first half) on
  // stage 1, b1 on stage 0. Each transfer takes X (16 MiB point to point). gpipe:
  //   stage 0: F0.f0 [0,1], send a0 [1,1+X]; F1.f0 waits for it (blocking send) [1+X,2+X]
  //   stage 1: F0.f1 [1+X,2+X]; send a1 [2+X,2+2X] (stage 1 ready at 2+X); F1.f1 [2+2X,3+2X];
  //            B0.b0 [3+2X,5+2X]; send g0 [5+2X,5+3X]; B1.b0 waits for it [5+3X,7+3X]; send g1
  //            [7+3X,7+4X]
  //   stage 0: B0.b1 [5+3X,7+3X], B1.b1 [7+4X,9+4X]: the step spans 9 ms + 4X (12 ms on one GPU).
  std::string ops, ranges;
  double launch_us = 0, kernel_us = 100;
  int id = 0;
  for (int m = 0; m < 2; ++m) {
    double mb_start = launch_us;
    for (int k = 0; k < 4; ++k) {
      const bool bwd = k >= 2;
      const double d = bwd ? 2000 : 1000;
      ops += std::string(ops.empty() ? "" : ",\n") + R"({"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": ")" +
             std::to_string(launch_us) + R"( us", "duration": "5 us", "api_class": "launch"},)" + R"({"kind": "kernel", "name": ")" +
             (bwd ? "sm90_xmma_gemm_bf16bf16_bf16f32 bwd" : "sm90_xmma_gemm_bf16bf16_bf16f32 fwd") + R"(", "lane": 1, "start": ")" +
             std::to_string(kernel_us) + R"( us", "duration": ")" + std::to_string(d) + R"( us", "launched_by": )" + std::to_string(id) +
             "}";
      id += 2;
      if (k == 1)
        ranges += R"({"name": "forward", "lane": 0, "start": ")" + std::to_string(mb_start) + R"( us", "end": ")" +
                  std::to_string(launch_us + 6) + R"( us"},)";
      if (k == 3)
        ranges += R"({"name": "backward", "lane": 0, "start": ")" + std::to_string(mb_start + 12) + R"( us", "end": ")" +
                  std::to_string(launch_us + 6) + R"( us"},)";
      launch_us += 6;
      kernel_us += d;
    }
    ranges += R"({"name": "microbatch)" + std::to_string(m) + R"(", "lane": 0, "start": ")" + std::to_string(mb_start) +
              R"( us", "end": ")" + std::to_string(launch_us) + R"( us"},)";
    launch_us += 10;
  }
  const std::string w = R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "host"}, {"kind": "stream", "name": "s", "device": 0}],
    "ops": [)" + ops + R"(], "ranges": [)" +
                        ranges + R"({"name": "step0", "lane": 0, "start": "0 us", "end": "13 ms"}]})";
  const std::string path = write_temp(w, "pp");
  WhatIfReport r =
      run(path, "step0", {"--pipeline-parallel", "2", "--microbatch-range", "microbatch.*", "--pp-bytes", "16 MiB", "--sharing", "off"});
  REQUIRE(r.ranges.size() == 1);
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const TimeNs X = collective_time(hw, CollKind::SendRecv, 16ull << 20, 2).time_ns;
  INFO("X = " << X << " ns");
  CHECK(r.ranges[0].baseline_ns == 12 * kNsPerMs);
  CHECK(r.ranges[0].predicted_ns == 9 * kNsPerMs + 4 * X);
  // 1f1b: stage 0 runs F0 F1 B0 B1 (one warm-up forward), stage 1 F0 B0 F1 B1:
  //   stage 0: F0.f0 [0,1], send a0 [1,1+X], F1.f0 [1+X,2+X]
  //   stage 1: F0.f1 [1+X,2+X], B0.b0 [2+X,4+X]; send a1 waits for stage 1 to be ready for F1
  //            (4+X) [4+X,4+2X], send g0 [4+X,4+2X] beside it; F1.f1 [4+2X,5+2X], B1.b0
  //            [5+2X,7+2X], send g1 [7+2X,7+3X]
  //   stage 0: B0.b1 [4+2X,6+2X], B1.b1 [7+3X,9+3X]: 9 ms + 3X.
  WhatIfReport r2 = run(
      path, "step0",
      {"--pipeline-parallel", "2", "--microbatch-range", "microbatch.*", "--pp-bytes", "16 MiB", "--schedule", "1f1b", "--sharing", "off"});
  CHECK(r2.ranges[0].predicted_ns == 9 * kNsPerMs + 3 * X);
  CHECK(has_line(r, "strong scaling: the global batch is the traced microbatches"));
  // --scaling weak: each microbatch twice the traced one: f' = F + 2 (1 ms - F) and
  // b' = F + 2 (2 ms - F) (bf16 GEMMs), sends of 32 MiB (X2); the gpipe schedule above with these
  // times spans 3 f' + 3 b' + 4 X2 = 18 ms - 6 F + 4 X2.
  WhatIfReport wk = run(
      path, "step0",
      {"--pipeline-parallel", "2", "--microbatch-range", "microbatch.*", "--pp-bytes", "16 MiB", "--scaling", "weak", "--sharing", "off"});
  const TimeNs X2 = collective_time(hw, CollKind::SendRecv, 32ull << 20, 2).time_ns;
  CHECK(static_cast<double>(wk.ranges[0].predicted_ns) == Approx(18e6 - 6 * Fg() + 4 * static_cast<double>(X2)).epsilon(0.002));
  CHECK(has_line(wk, "weak scaling: each microbatch 2 times the traced one"));
  std::remove(path.c_str());
}

TEST_CASE("tensor-parallel what-if: a column/row-parallel block split 2 ways (hand-computed)", "[whatif][parallel]") {
  // One stream: a column-parallel GEMM (1 ms), an activation between (200 us), a row-parallel GEMM
  // (1 ms, inside a range `row_parallel`), a residual add (100 us). On 2 GPUs the first three
  // take model(work / 2) / model(work) of their time: work inferred from the measured time, the
  // model is linear beyond its fixed part F, so d -> F + (d - F) / 2. An all-reduce of 16 MiB
  // (T by the collective model) follows the row-parallel GEMM; the add waits for it and keeps its
  // 100 us.
  const char* w = R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "host"}, {"kind": "stream", "name": "s", "device": 0}],
    "ops": [
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "lane": 1, "start": "100 us", "duration": "1000 us", "launched_by": 0},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "10 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "vectorized_elementwise_kernel gelu", "lane": 1, "start": "1100 us", "duration": "200 us", "launched_by": 2},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "20 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "lane": 1, "start": "1300 us", "duration": "1000 us", "launched_by": 4},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "30 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "vectorized_elementwise_kernel add", "lane": 1, "start": "2300 us", "duration": "100 us", "launched_by": 6}],
    "ranges": [
      {"name": "step0", "lane": 0, "start": "0 us", "end": "3 ms"},
      {"name": "row_parallel", "lane": 0, "start": "19 us", "end": "26 us"}]})";
  const std::string path = write_temp(w, "tp");
  WhatIfReport r = run(path, "step0", {"--tensor-parallel", "2", "--tp-bytes", "16 MiB", "--sharing", "off"});
  REQUIRE(r.ranges.size() == 1);
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const TimeNs T = collective_time(hw, CollKind::AllReduce, 16ull << 20, 2).time_ns;
  // Fixed parts: the GEMM fit's overhead for bf16 GEMMs (or the kernel tail), the tail for the
  // elementwise kernel.
  auto fit = hw.gpu.gemm_fit.find(Dtype::BF16);
  const double Fg = static_cast<double>(std::max(hw.gpu.kernel_tail, fit != hw.gpu.gemm_fit.end() ? fit->second.overhead : 0));
  const double Fe = static_cast<double>(hw.gpu.kernel_tail);
  const double expect = 2 * (Fg + (1e6 - Fg) / 2) + (Fe + (2e5 - Fe) / 2) + static_cast<double>(T) + 1e5;
  INFO("T = " << T << " ns, GEMM fixed part " << Fg << " ns");
  CHECK(r.ranges[0].baseline_ns == 2300 * kNsPerUs);
  CHECK(static_cast<double>(r.ranges[0].predicted_ns) == Approx(expect).epsilon(0.01));
  CHECK(has_line(r, "strong scaling: the global batch is the traced one, which every GPU sees"));
  // --scaling weak: the batch twice the traced one, each GPU's work as traced: the split kernels
  // keep their time (twice the work over 2), the replicated add does twice its work
  // (Fe + 2 (100 us - Fe)), the all-reduce moves 32 MiB (T2): 2.2 ms + T2 + the add.
  WhatIfReport wk = run(path, "step0", {"--tensor-parallel", "2", "--tp-bytes", "16 MiB", "--scaling", "weak", "--sharing", "off"});
  const TimeNs T2 = collective_time(hw, CollKind::AllReduce, 32ull << 20, 2).time_ns;
  CHECK(static_cast<double>(wk.ranges[0].predicted_ns) == Approx(2.2e6 + static_cast<double>(T2) + Fe + 2 * (1e5 - Fe)).epsilon(0.002));
  CHECK(has_line(wk, "weak scaling: the batch is 2 times the traced one"));
  // No row-parallel GEMM selected: a clear error.
  CHECK_THROWS_WITH(run(path, "step0", {"--tensor-parallel", "2", "--tp-comm", "name~nothing"}), Catch::Contains("selects no kernel"));
  std::remove(path.c_str());
}

// Ground truth (validate/reference/h200/parallel/*.log, unprofiled CUDA-event medians, the slower
// rank; two runs on 2026-11-30): DP 1 GPU 4.76-4.82 ms, 2 GPUs 6.06-6.25 ms; TP 4.87-4.91 ->
// 3.36-3.53 ms; PP 23.13-23.37 -> gpipe 14.45-14.50 ms, 1f1b 14.38 ms. The forecasts from the
// one-GPU Kineto traces are checked within 10 % of the first run's two-GPU medians.
TEST_CASE("parallel what-ifs forecast the measured two-GPU steps from one-GPU traces (H200)", "[whatif][parallel][e2e]") {
  struct Case {
    std::vector<std::string> args;
    double measured_ms;
  } cases[] = {
      {{"--data-parallel", "2"}, 6.06},
      {{"--tensor-parallel", "2"}, 3.36},
      {{"--pipeline-parallel", "2", "--microbatch-range", "microbatch.*"}, 14.45},
      {{"--pipeline-parallel", "2", "--microbatch-range", "microbatch.*", "--schedule", "1f1b"}, 14.38},
  };
  const char* traces[] = {"dp_1gpu_rank0.json.gz", "tp_1gpu_rank0.json.gz", "pp_1gpu_rank0.json.gz", "pp_1gpu_rank0.json.gz"};
  for (std::size_t k = 0; k < 4; ++k) {
    WhatIfReport r = run(kPar + traces[k], "step.*", cases[k].args);
    const double ms = static_cast<double>(r.predicted_ns) / 1e6;
    INFO(cases[k].args[0] << " " << cases[k].args[1] << ": predicted " << ms << " ms, measured " << cases[k].measured_ms << " ms");
    CHECK(std::abs(ms / cases[k].measured_ms - 1) < 0.10);
  }
}

// Held out (validate/reference/h200/parallel_heldout/run_heldout_parallel.sh, 2026-11-30; other sizes, run after the
// models were frozen, nothing tuned on them; validate/reference/h200/parallel_heldout): DP bf16
// 16 x Linear(4096) 1 GPU 10.28 -> 2 GPUs 11.81 ms; TP 2 layers d 5120 8.10 -> 4.67 ms; PP 12 x
// Linear(4096), 8 microbatches, 34.82 -> gpipe 21.37, 1f1b 20.81 ms (slower rank). Forecasts at
// this commit: DP 10.41 (-11.9 %: the all-reduce beside the backward GEMMs is under-modelled),
// TP 4.63 (-0.9 %), PP 20.06 (-6.1 %), 1f1b 19.39 ms (-6.8 %). Checked within 15 %.
TEST_CASE("parallel what-ifs on held-out sizes (H200)", "[whatif][parallel][e2e]") {
  const std::string ho = std::string(BNECK_SOURCE_DIR) + "/validate/reference/h200/parallel_heldout/";
  struct Case {
    const char* trace;
    std::vector<std::string> args;
    double measured_ms;
  } cases[] = {
      {"dp_1gpu_rank0.json.gz", {"--data-parallel", "2"}, 11.81},
      {"tp_1gpu_rank0.json.gz", {"--tensor-parallel", "2"}, 4.67},
      {"pp_1gpu_rank0.json.gz", {"--pipeline-parallel", "2", "--microbatch-range", "microbatch.*"}, 21.37},
      {"pp_1gpu_rank0.json.gz", {"--pipeline-parallel", "2", "--microbatch-range", "microbatch.*", "--schedule", "1f1b"}, 20.81},
  };
  for (const auto& c : cases) {
    WhatIfReport r = run(ho + c.trace, "step.*", c.args);
    const double ms = static_cast<double>(r.predicted_ns) / 1e6;
    INFO(c.args[0] << " " << c.args[1] << ": predicted " << ms << " ms, measured " << c.measured_ms << " ms");
    CHECK(std::abs(ms / c.measured_ms - 1) < 0.15);
  }
}

TEST_CASE("two-GPU parallel traces replay exactly per rank", "[replay][parallel][e2e]") {
  for (const char* m : {"dp_2gpu", "tp_2gpu", "pp_gpipe_2gpu", "pp_1f1b_2gpu"}) {
    Trace t = load_traces({kPar + m + "_rank0.json.gz", kPar + m + "_rank1.json.gz"});
    ReplayOptions o;
    o.range_regex = "step.*";
    ReplayReport r = run_replay(t, o);
    INFO(m);
    REQUIRE(r.ranges.size() == 12);
    // Exact up to the sharing calibration's rounding (a few ns in a 6 ms step).
    for (const auto& rg : r.ranges) CHECK(std::abs(rg.simulated_span_ns - rg.measured_span_ns) <= 100);
  }
}

TEST_CASE("data-parallel what-if without DDP in the trace: buckets from the backward pass (hand-computed)", "[whatif][parallel]") {
  // The main thread (lane 0) launches a forward GEMM F [0.1, 0.6 ms] and, after the backward, the
  // optimizer's kernel O [2.6, 2.7]; autograd's thread (lane 2) launches the backward GEMMs G1
  // [0.6, 1.6] and G2 [1.6, 2.6]. With --grad-bytes 64 MiB the two backward GEMMs make 32 MiB each:
  // each fills a 25 MiB bucket, so an all-reduce of 32 MiB (T) follows G1 and another G2; O waits
  // for both: it starts at 2.6 ms + T and the step spans 2.6 ms + T.
  const char* w = R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}, {"kind": "thread", "name": "autograd"}],
    "ops": [
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm90_gemm_fwd", "lane": 1, "start": "100 us", "end": "600 us", "launched_by": 0},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 2, "start": "20 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm90_gemm_bwd", "lane": 1, "start": "600 us", "end": "1600 us", "launched_by": 2},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 2, "start": "30 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm90_gemm_bwd", "lane": 1, "start": "1600 us", "end": "2600 us", "launched_by": 4},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "50 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "multi_tensor_apply_kernel sgd", "lane": 1, "start": "2600 us", "end": "2700 us", "launched_by": 6}],
    "ranges": [{"name": "step0", "lane": 0, "start": "0 us", "end": "3 ms"}]})";
  const std::string path = write_temp(w, "dp_bwd");
  WhatIfReport r = run(path, "step0", {"--data-parallel", "2", "--grad-bytes", "64 MiB", "--sharing", "off"});
  REQUIRE(r.ranges.size() == 1);
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const TimeNs T = collective_time(hw, CollKind::AllReduce, 32ull << 20, 2).time_ns;
  INFO("T = " << T << " ns");
  CHECK(r.ranges[0].baseline_ns == 2600 * kNsPerUs);
  CHECK(r.ranges[0].predicted_ns == 2600 * kNsPerUs + T);
  // Memory per GPU (memory_per_gpu in JSON): parameters and gradients 64 MiB each, DDP's buckets a
  // copy of the gradients; no Optimizer.step range names the optimizer, so its state is unknown
  // (null), as are the activations: total 3 x 64 = 192 MiB.
  const nlohmann::json m = memory_per_gpu_json(r);
  CHECK(m["parameters_bytes"] == 64ull << 20);
  CHECK(m["gradients_bytes"] == 64ull << 20);
  CHECK(m["buffers_bytes"] == 64ull << 20);
  CHECK(m["optimizer_bytes"].is_null());
  CHECK(m["activations_bytes"].is_null());
  CHECK(m["total_bytes"] == 192ull << 20);
  CHECK(m["capacity_bytes"] == hw.gpu.memory_bytes);
  // Without --grad-bytes and without shapes nothing sizes the gradients: a forecast without their
  // all-reduce would be the replicas' (it was: the baseline's time), so none is made, said.
  CHECK_THROWS_WITH(run(path, "step0", {"--data-parallel", "2"}), Catch::Contains("--grad-bytes") && Catch::Contains("backward passes"));
  std::remove(path.c_str());
}

TEST_CASE("DDP's finalize copies wait for the step's all-reduces, strong scaling halves the kernels (hand-computed)",
          "[whatif][parallel]") {
  // Backward bf16 GEMMs G1 [0.1, 1.1 ms] and G2 [1.1, 2.1] on stream s, each launch followed on the
  // host (which is ahead: all its calls by 70 us) by a DDP all-reduce call of 64 MiB fp32 (no
  // kernel on 1 rank): AR1 waits for G1, AR2 for G2, each
  // taking the collective model's T (about 0.25 ms). The finalize then copies bucket 1 (C1, 64 MiB,
  // 50 us) and bucket 2 (C2), both after the all-reduces pending at it (AR2 done at 2.1 ms + T): the
  // step (from G1's start) spans 2.1 ms + T. (DDP waits bucket k's work before copying bucket k;
  // first in, first out would give 2.05 ms + T, and is left out until the all-reduces' own slowdown
  // beside the backward GEMMs is modelled: docs/parallelism.md.)
  const char* ar =
      "record_param_comms, collective = allreduce, in_nelems = 16777216, out_nelems = 16777216, dtype = Float, "
      "group = 0, group_ranks = [0], group_size = 1";
  std::string w = R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "host"}, {"kind": "stream", "name": "s", "device": 0}],
    "ops": [
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "50 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "lane": 1, "start": "100 us", "end": "1100 us", "launched_by": 0},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "20 us", "duration": "5 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "lane": 1, "start": "1100 us", "end": "2100 us", "launched_by": 2},
      {"kind": "api", "name": "cudaMemcpyAsync", "lane": 0, "start": "41 us", "duration": "5 us", "api_class": "memcpy_async"},
      {"kind": "memcpy", "name": "Memcpy DtoD", "lane": 1, "start": "2100 us", "end": "2150 us", "copy_kind": "DtoD", "size": "64 MiB", "launched_by": 4},
      {"kind": "api", "name": "cudaMemcpyAsync", "lane": 0, "start": "61 us", "duration": "5 us", "api_class": "memcpy_async"},
      {"kind": "memcpy", "name": "Memcpy DtoD", "lane": 1, "start": "2150 us", "end": "2200 us", "copy_kind": "DtoD", "size": "64 MiB", "launched_by": 6}],
    "ranges": [
      {"name": "step0", "lane": 0, "start": "0 us", "end": "2300 us"},
      {"name": "AR", "lane": 0, "start": "10 us", "end": "15 us"},
      {"name": "AR", "lane": 0, "start": "30 us", "end": "35 us"},
      {"name": "torch.distributed.ddp.reducer::copy_bucket_to_grad", "lane": 0, "start": "40 us", "end": "50 us"},
      {"name": "torch.distributed.ddp.reducer::copy_bucket_to_grad", "lane": 0, "start": "60 us", "end": "70 us"}]})";
  std::string quoted = "\"";  // appended piecewise (GCC 12 warns falsely on one expression)
  quoted += ar;
  quoted += "\"";
  for (std::size_t p; (p = w.find("\"AR\"")) != std::string::npos;) w.replace(p, 4, quoted);
  const std::string path = write_temp(w, "ddp_fifo");
  WhatIfReport r = run(path, "step0", {"--data-parallel", "2", "--sharing", "off"});
  REQUIRE(r.ranges.size() == 1);
  const TimeNs T = collective_time(load_hw("h200-sxm-calibrated"), CollKind::AllReduce, 64ull << 20, 2).time_ns;
  INFO("T = " << T << " ns");
  CHECK(T < 1000 * kNsPerUs);  // AR1 is done before G2 ends
  CHECK(r.ranges[0].predicted_ns == 2100 * kNsPerUs + T);
  std::string log;
  for (const auto& l : r.log) log += l + "\n";
  CHECK_THAT(log, Catch::Contains("weak scaling: every GPU keeps the traced batch"));
  // --scaling strong: the global batch fixed, G1 and G2 (not in an Optimizer.* or DDP range) do
  // half their work: G' = F + (1 ms - F) / 2 (F: the bf16 GEMM fit's fixed part); the all-reduces
  // and copies stay. AR2 ends at 2 G' + T; C1 and C2 follow it: the step spans 2 G' + T + 100 us.
  WhatIfReport st = run(path, "step0", {"--data-parallel", "2", "--scaling", "strong", "--sharing", "off"});
  const double g2 = Fg() + (1e6 - Fg()) / 2;
  REQUIRE(static_cast<double>(T) < g2);
  CHECK(static_cast<double>(st.ranges[0].predicted_ns) == Approx(2 * g2 + static_cast<double>(T) + 100e3).epsilon(0.002));
  CHECK(has_line(st, "strong scaling: the global batch is the traced one, each GPU computes 1/2"));
  CHECK_THROWS_WITH(run(path, "step0", {"--data-parallel", "2", "--scaling", "huge"}), Catch::Contains("--scaling huge"));
  std::remove(path.c_str());
}

// validate/concurrency/persistent_gemm.py on one H200 (2026-11-30): bf16 GEMMs alone and while a
// 24-SM blocker (an NCCL all-reduce's footprint) holds their SMs; the forecast without the blocker
// (whatif --remove) of each GEMM beside it against the same shape's GEMMs alone (medians of 5, the
// kernels themselves: the ranges also hold a memset and a launch gap, 20-25 us alone and 9 us
// beside, that the host set). Measured beside -> alone: 1024x4096x4096 (128 blocks, one wave: 2
// rounds on 108 SMs) 86.4 -> 44.3 us; 1024x6144x6144 (256 tiles, 2 -> 3 rounds + 0.6) 189.0 ->
// 104.1; 2048x8192x8192 and 4096^3 (512, 4 -> 5 + 0.6) 478.4 -> 338.6 and 249.7 -> 176.2;
// 6144x6144x1024 (1024, 8 -> 10 + 0.6) 148.1 -> 112.5; 8192^3 (1664, 13 -> 16 + 0.6) 1709 -> 1383
// (forecast 1338: -3.2 %). kShortRoundsLate (0.6 of a round) was measured on these kernels: this
// checks the model reproduces them; the DDP pair's GEMMs beside NCCL (187 and 150 us for 100 and
// 112 alone) are the independent check.
TEST_CASE("persistent GEMMs short of SMs: forecast alone from beside a blocker (H200)", "[whatif][sharing][e2e]") {
  const std::string f = std::string(BNECK_SOURCE_DIR) + "/validate/reference/h200/concurrency/persistent_gemm.json.gz";
  WhatIfReport w = run(f, "beside_.*", {"--remove", "name~blocker"});
  const Trace& t = *w.trace;
  // The GEMMs in time order: per shape (in the script's order), 5 rounds of alone then beside.
  std::vector<OpId> gemms;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].kind == OpKind::Kernel && t.name(t.ops[i]).rfind("nvjet", 0) == 0) gemms.push_back(i);
  std::sort(gemms.begin(), gemms.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
  const char* shapes[] = {"1024x6144x6144", "6144x6144x1024", "2048x8192x8192", "4096x4096x4096", "8192x8192x8192", "1024x4096x4096"};
  REQUIRE(gemms.size() == 60);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (std::size_t k = 0; k < 6; ++k) {
    std::vector<double> alone, forecast;
    for (std::size_t r = 0; r < 10; ++r) {
      const OpId op = gemms[10 * k + r];
      if (r % 2 == 0)
        alone.push_back(static_cast<double>(t.ops[op].duration()));
      else
        forecast.push_back(static_cast<double>(w.pred_sim.end[op] - w.pred_sim.start[op]));
    }
    INFO(shapes[k] << ": forecast alone " << median(forecast) << " ns, measured alone " << median(alone) << " ns");
    CHECK(std::abs(median(forecast) / median(alone) - 1) < 0.05);
  }
}

// The same one-GPU TP traces with the workload's own annotations removed (column_parallel,
// row_parallel, attention, layerN; the steps and the profiler's op ranges stay): the GEMM pairs are found from the kernels
// (infer_row_parallel) and the forecasts equal the named ones: 3.317 ms (measured 3.36 ms on two H200s, -1.3 %) and, held out, 4.626 ms
// (measured 4.67 ms, -0.9 %).
TEST_CASE("tensor-parallel from a trace with no TP naming: the GEMM pairs found from the kernels", "[whatif][parallel][e2e]") {
  const std::string root = std::string(BNECK_SOURCE_DIR) + "/validate/reference/h200/";
  for (const auto& [file, measured_ms] : std::vector<std::pair<std::string, double>>{{"parallel/tp_1gpu_rank0.json.gz", 3.36},
                                                                                     {"parallel_heldout/tp_1gpu_rank0.json.gz", 4.67}}) {
    WhatIfReport named = run(root + file, "step.*", {"--tensor-parallel", "2"});
    static std::deque<Trace> keep;
    Trace* t = &keep.emplace_back(load_trace(root + file));
    std::vector<Range> kept;
    for (const Range& r : t->ranges) {
      const std::string& n = t->strings.str(r.name);
      if (n.find("parallel") == std::string::npos && n != "attention" && n.rfind("layer", 0) != 0) kept.push_back(r);
    }
    REQUIRE(kept.size() < t->ranges.size());
    t->ranges = kept;
    WhatIfOptions opt;
    opt.range_regex = "step.*";
    std::string sc;
    opt.transforms = parse_transform_args({"--tensor-parallel", "2"}, sc);
    WhatIfReport bare = run_whatif(*t, opt);
    INFO(file << ": named " << named.predicted_ns << " ns, unnamed " << bare.predicted_ns << " ns, measured " << measured_ms << " ms");
    CHECK(std::abs(static_cast<double>(bare.predicted_ns) / static_cast<double>(named.predicted_ns) - 1) < 0.02);
    CHECK(std::abs(static_cast<double>(bare.predicted_ns) / 1e6 / measured_ms - 1) < 0.10);
    bool inferred = false;
    for (const auto& line : bare.log) inferred = inferred || line.find("row-parallel GEMMs by shapes") != std::string::npos;
    CHECK(inferred);
  }
}

// The one-GPU gradient-accumulation traces with their microbatch, forward and backward ranges
// removed: the structure's @microbatch (a forward and the backward the autograd thread launches
// after it) stands in for them; gpipe and 1f1b forecasts equal the named ones within 2 % (named:
// 14.57 / 14.41 ms, measured 14.45 / 14.38 ms; held out: measured 21.37 / 20.81 ms).
TEST_CASE("pipeline-parallel from a trace with no microbatch ranges: the structure's microbatches", "[whatif][parallel][structure][e2e]") {
  const std::string root = std::string(BNECK_SOURCE_DIR) + "/validate/reference/h200/";
  for (const char* file : {"parallel/pp_1gpu_rank0.json.gz", "parallel_heldout/pp_1gpu_rank0.json.gz"})
    for (const char* sched : {"gpipe", "1f1b"}) {
      WhatIfReport named =
          run(root + file, "step.*", {"--pipeline-parallel", "2", "--microbatch-range", "microbatch.*", "--schedule", sched});
      static std::deque<Trace> keep;
      Trace* t = &keep.emplace_back(load_trace(root + file));
      std::vector<Range> kept;
      for (const Range& r : t->ranges) {
        const std::string& n = t->strings.str(r.name);
        if (n.rfind("microbatch", 0) != 0 && n != "forward" && n != "backward") kept.push_back(r);
      }
      REQUIRE(kept.size() < t->ranges.size());
      t->ranges = kept;
      add_structure_ranges(*t, find_structure(*t));
      WhatIfOptions opt;
      opt.range_regex = "step.*";
      std::string sc;
      opt.transforms = parse_transform_args({"--pipeline-parallel", "2", "--schedule", sched}, sc);
      WhatIfReport bare = run_whatif(*t, opt);
      INFO(file << " " << sched << ": named " << named.predicted_ns << " ns, from the structure " << bare.predicted_ns << " ns");
      CHECK(std::abs(static_cast<double>(bare.predicted_ns) / static_cast<double>(named.predicted_ns) - 1) < 0.02);
    }
}

namespace {
// The two ranks of validate/reference/h200/ddp's DDP step (12 x Linear(4096) fp32 on two H200s).
Trace ddp2_trace() {
  const std::string d = source_dir() + "/validate/reference/h200/ddp/";
  return load_traces({d + "ddp2_rank0.json.gz", d + "ddp2_rank1.json.gz"});
}
}  // namespace

TEST_CASE("gradient all-reduces in 16 bits: half the bytes and two casts each (hand-computed)", "[whatif][parallel]") {
  // validate/reference/h200/ddp: DDP of 12 x Linear(4096) fp32 on two H200s, 72 all-reduces of
  // 64 MiB (16,781,312 fp32 elements) a profile, NCCL kernels ..._f32_RING_LL. In bf16 each moves
  // 32 MiB: its kernel takes T(32 MiB) / T(64 MiB) of its time, plus a cast down and one up of its
  // elements (6 bytes an element each way at the streaming rate, plus the kernel tail each).
  Trace t = ddp2_trace();
  REQUIRE(t.collectives.size() == 72);
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const Bytes b = t.collectives[0].bytes;
  CHECK(b == 67125248);
  const double ratio = static_cast<double>(collective_time(hw, CollKind::AllReduce, b / 2, 2).time_ns) /
                       static_cast<double>(collective_time(hw, CollKind::AllReduce, b, 2).time_ns);
  const TimeNs casts = grad_compress_casts(hw.gpu, b);
  // 2 x 16.78 M elements x 6 B = 201 MB at the streaming rate (about 4 TB/s): about 50 us.
  CHECK(casts > 30 * kNsPerUs);
  CHECK(casts < 80 * kNsPerUs);
  WhatIfOptions o;
  o.transforms = {parse_transform("grad-compress", "bf16")};
  o.range_regex = "step.*";
  const WhatIfReport w = run_whatif(t, o);
  bool said = false;
  for (const auto& l : w.log) said = said || l.find("72 fp32 all-reduces in bf16, half the bytes") != std::string::npos;
  CHECK(said);
  // Every member kernel: its time x ratio + the casts (one collective checked by hand).
  const OpId m = t.collectives[0].members[0];
  WhatIfEngine e(t, std::make_shared<const Graph>(build_graph(t)), hw);
  const WhatIfCase c = e.apply(o.transforms);
  const WhatIfCase base = e.baseline();
  CHECK(c.durations[m] == static_cast<TimeNs>(std::llround(static_cast<double>(base.durations[m]) * ratio)) + casts);
  CHECK(w.predicted_ns < w.baseline_ns);
  CHECK_THROWS_AS(parse_transform("grad-compress", "fp8"), InputError);
}

TEST_CASE("fewer and larger collectives: buckets of the trace's all-reduces (hand-computed)", "[whatif][parallel]") {
  // validate/reference/h200/ddp: 72 all-reduces of 64 MiB on two ranks, six a step in one group.
  // In buckets of at most 200 MiB three go together (192 MiB): 24 buckets. Each bucket's kept kernel
  // (its last member) takes the three members' times x T(192 MiB) / (3 T(64 MiB)); the others none.
  Trace t = ddp2_trace();
  REQUIRE(t.collectives.size() == 72);
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const Bytes b = t.collectives[0].bytes;
  const double ratio = static_cast<double>(collective_time(hw, CollKind::AllReduce, 3 * b, 2).time_ns) /
                       (3.0 * static_cast<double>(collective_time(hw, CollKind::AllReduce, b, 2).time_ns));
  CHECK(ratio < 1);
  WhatIfOptions o;
  o.transforms = {parse_transform("bucket-comm", "200 MiB")};
  o.range_regex = "step.*";
  const WhatIfReport w = run_whatif(t, o);
  bool said = false;
  for (const auto& l : w.log)
    said = said || l.find("72 of 72 collectives coalesced into 24 buckets of at most 200 MiB") != std::string::npos;
  CHECK(said);
  // The first bucket in the group's order: collectives of seq 0, 1, 2 (by group order), kept: the third.
  std::vector<std::size_t> order(t.collectives.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return t.collectives[x].seq < t.collectives[y].seq; });
  WhatIfEngine e(t, std::make_shared<const Graph>(build_graph(t)), hw);
  const WhatIfCase c = e.apply(o.transforms);
  const WhatIfCase base = e.baseline();
  for (std::size_t r = 0; r < 2; ++r) {
    TimeNs sum = 0;
    for (std::size_t k = 0; k < 3; ++k) sum += base.durations[t.collectives[order[k]].members[r]];
    CHECK(c.durations[t.collectives[order[2]].members[r]] == static_cast<TimeNs>(std::llround(static_cast<double>(sum) * ratio)));
    CHECK(c.durations[t.collectives[order[0]].members[r]] == 0);
  }
  // 64 MiB buckets hold one each: nothing to coalesce, said so; a size is required.
  CHECK_THROWS_WITH(run_whatif(t,
                               [&] {
                                 WhatIfOptions x = o;
                                 x.transforms = {parse_transform("bucket-comm", "64 MiB")};
                                 return x;
                               }()),
                    Catch::Contains("no two consecutive collectives"));
  CHECK_THROWS_AS(parse_transform("bucket-comm", "lots"), InputError);
}
