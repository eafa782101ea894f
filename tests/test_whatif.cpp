// What-ifs against measured what-if pairs (the core H200 set, and the extra folder's traces/h200 in
// the extended tests) and the text's examples.
#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <filesystem>

#include "helpers.hpp"
#include "sim/base/error.hpp"
#include "tools/views/whatif_view.hpp"
#include "models/collective.hpp"
#include "models/kernel_work.hpp"
#include "models/occupancy.hpp"
#include "models/whatif/error_bar.hpp"
#include <fstream>
#include <unistd.h>

using namespace bneck;
using namespace bneck::test;

namespace {

WhatIfReport whatif(const std::string& path, const std::string& range, std::vector<Transform> tr) {
  static std::deque<Trace> keep;  // the reports point at their traces
  Trace* t = &keep.emplace_back(load_trace(path));
  WhatIfOptions opt;
  if (!range.empty()) opt.range_regex = range;
  opt.transforms = std::move(tr);
  return run_whatif(*t, opt);
}

double rel(double a, double b) { return std::fabs(a - b) / b; }

}  // namespace

TEST_CASE("the text's examples: overlap and a 5 ms kernel 3x faster", "[whatif]") {
  // Serialized: 8 + 6 = 14 ms; overlapped from 4 ms: 10 ms with 6 - 4 = 2 ms exposed.
  Trace t = load_trace(source_dir() + "/tests/data/overlap_workload.json");
  auto r = replay(std::move(t));
  CHECK(r.sim.end[0] == 8 * kNsPerMs);
  OpId over = 0, serial = 0;
  for (OpId i = 0; i < r.trace.ops.size(); ++i) {
    if (r.trace.name(r.trace.ops[i]) == "ncclAllReduce overlapped") over = i;
    if (r.trace.name(r.trace.ops[i]) == "ncclAllReduce serialized") serial = i;
  }
  CHECK(r.sim.end[serial] == 14 * kNsPerMs);
  CHECK(r.sim.end[over] == 10 * kNsPerMs);
  Overlap ov = compute_overlap(r.graph, sim_schedule(r.sim), [&](OpId o) { return o != serial; });
  CHECK(ov.exposed_communication_ns == 2 * kNsPerMs);
  // 100 ms serial, the 5 ms kernel 3x faster: 100 - 5 + 5/3 = 96.667 ms, 3.33 ms saved; Amdahl agrees
  // on a serial run (fraction 0.05).
  WhatIfReport w = whatif(source_dir() + "/tests/data/serial_100ms.json", "", {parse_transform("scale", "3:name~hot_kernel")});
  CHECK(w.baseline_ns == 100 * kNsPerMs);
  CHECK(w.predicted_ns == Approx(96'666'667).margin(1));
  CHECK(w.amdahl_fraction == Approx(0.05));
  CHECK(w.amdahl_ns == Approx(96'666'667).margin(1));
  WhatIfReport gone = whatif(source_dir() + "/tests/data/serial_100ms.json", "", {parse_transform("remove", "name~hot_kernel")});
  CHECK(gone.predicted_ns == 95 * kNsPerMs);
}

namespace {

void streams_pair(TracePath at) {
  double fast = measured_median(at("streams_fast.sqlite"), "round[1-5]");
  WhatIfReport w = whatif(at("streams_base.sqlite"), "round[1-5]", {parse_transform("scale", "2:name~k_compute")});
  INFO("predicted " << w.predicted_ns << " measured fast " << fast);
  CHECK(rel(static_cast<double>(w.predicted_ns), fast) <= 0.03);
  REQUIRE(w.has_amdahl);
  // Amdahl: k_compute is about half the busy time; 2x would give ~9.2 ms, not the ~9.7 ms measured.
  CHECK(rel(static_cast<double>(w.amdahl_ns), static_cast<double>(w.predicted_ns)) > 0.03);
  // Kernel names as the trace spells them ("k_aux(long long, int *)").
  auto has_aux = [](const std::vector<std::string>& v) {
    return std::any_of(v.begin(), v.end(), [](const std::string& n) { return n.rfind("k_aux", 0) == 0; });
  };
  CHECK(has_aux(w.onto_cp));
  for (const auto& r : w.ranges) {
    INFO(r.name);
    CHECK(has_aux(r.cp_after));
    CHECK_FALSE(has_aux(r.cp_before));
  }
}

void chain_pairs(TracePath at) {
  for (std::string p : {"fp32", "bf16"})
    for (std::string n : {"2", "4"}) {
      std::string chain = p + "_chain" + n, fused = p + "_fused" + n;
      WhatIfReport w = whatif(at("chain.sqlite"), chain, {parse_transform("fuse", "range~" + chain)});
      double truth = measured_median(at("chain.sqlite"), fused);
      INFO(chain << " predicted " << w.predicted_ns << " measured " << fused << " " << truth);
      CHECK(rel(static_cast<double>(w.predicted_ns), truth) <= 0.10);
    }
}

// block_bf16 is the same program under bf16 autocast (--precision autocast-bf16). Both sides ran
// under Nsight Systems with emit_nvtx: the measured bf16 step carries the same profiler, so the
// forecast keeps it (--unprofile off), its casts' recorded events too. Without it the forecast is
// the program unprofiled: faster than the profiled bf16 run, whose host the profiler slows.
// Forecasts: the core pair 13.3 ms against 15.6 measured (-14.7 %; 13.5 before its LayerNorms'
// phantom casts went: the residual add before each is fp32), the extra folder's 16.4 against 16.2
// (+1.2 %).
void block_pair(TracePath at) {
  double bf16 = measured_median(at("block_bf16.sqlite"), "step.*");
  WhatIfReport w =
      whatif(at("block_fp32.sqlite"), "step.*", {parse_transform("unprofile", "off"), parse_transform("precision", "autocast-bf16")});
  INFO("predicted " << w.predicted_ns << " measured bf16 " << bf16);
  CHECK(rel(static_cast<double>(w.predicted_ns), bf16) <= 0.15);
  WhatIfReport u = whatif(at("block_fp32.sqlite"), "step.*", {parse_transform("precision", "autocast-bf16")});
  CHECK(u.unprofiled.find("emit_nvtx") != std::string::npos);
  CHECK(u.predicted_ns < w.predicted_ns);
}

void decode_pair(TracePath at) {
  double graph = measured_median(at("decode_graph.sqlite"), "tok.*");
  WhatIfReport w = whatif(at("decode_eager.sqlite"), "tok.*", {parse_transform("cuda-graph", "")});
  INFO("predicted " << w.predicted_ns << " measured graph " << graph);
  CHECK(rel(static_cast<double>(w.predicted_ns), graph) <= 0.15);
}

}  // namespace

TEST_CASE("streams: k_compute 2x faster predicts streams_fast, the path moves to k_aux", "[whatif][e2e]") { streams_pair(core); }
TEST_CASE("streams pair of the extra traces", "[whatif][extended]") { streams_pair(h200); }
TEST_CASE("chain: fusing each chain predicts the fused kernel's span", "[whatif][e2e]") { chain_pairs(core); }
TEST_CASE("chain pairs of the extra traces", "[whatif][extended]") { chain_pairs(h200); }
TEST_CASE("block_fp32 with --precision autocast-bf16 predicts block_bf16", "[whatif][e2e]") { block_pair(core); }
TEST_CASE("block pair of the extra traces", "[whatif][extended]") { block_pair(h200); }
TEST_CASE("decode_eager with --cuda-graph predicts decode_graph", "[whatif][e2e]") { decode_pair(core); }
TEST_CASE("decode pair of the extra traces", "[whatif][extended]") { decode_pair(h200); }

TEST_CASE("transforms parse, compose, and reject bad input", "[whatif]") {
  CHECK_THROWS_AS(parse_transform("scale", "fast:name~x"), InputError);
  CHECK_THROWS_AS(parse_transform("scale", "2"), InputError);
  CHECK_THROWS_AS(parse_transform("precision", "fp7"), InputError);
  CHECK_THROWS_AS(parse_transform("hw", "imaginary-gpu"), InputError);
  CHECK_THROWS_AS(parse_transform("remove", "speed>3"), InputError);
  Scenario s = load_scenario(source_dir() + "/tests/data/scenario_fast_compute.json");
  CHECK(s.name == "fast-compute");
  REQUIRE(s.transforms.size() == 1);
  CHECK(s.transforms[0]->text == "--scale 2:name~k_compute");
  // Scaling by 2 then by 0.5 is the baseline again.
  WhatIfReport w = whatif(demo_trace(), "iter.*", {parse_transform("scale", "2:kind=kernel"), parse_transform("scale", "0.5:kind=kernel")});
  CHECK(w.predicted_ns == Approx(static_cast<double>(w.baseline_ns)).epsilon(1e-4));
}

TEST_CASE("data-parallel what-if: a 1-rank DDP step gets its bucket all-reduces (hand-computed)", "[whatif][parallel]") {
  // One host thread (lane 0) and one stream (lane 1). The backward kernel g (0.1..4 ms) makes the
  // gradients; DDP then calls an all-reduce of 64 MiB fp32 (in_nelems 16777216) at 4.1 ms, which a
  // 1-rank run launches no kernel for; at 5 ms the bucket copy back (copy_bucket_to_grad) launches
  // c (5.01..5.11 ms). On 2 GPUs the all-reduce is launched by the host call before the range (the
  // launch of g, ended at 0.05 ms: gap 4.05 ms + the launch latency), waits for g (4 ms), and takes
  // the collective model's time T; c waits for it.
  const char* w = R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "host"}, {"kind": "stream", "name": "s", "device": 0}],
    "ops": [
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 ms", "duration": "50 us", "api_class": "launch"},
      {"kind": "kernel", "name": "sm80_gemm_backward", "lane": 1, "start": "100 us", "end": "4 ms", "launched_by": 0},
      {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "5 ms", "duration": "10 us", "api_class": "launch"},
      {"kind": "kernel", "name": "vectorized_elementwise_kernel copy", "lane": 1, "start": "5010 us", "duration": "100 us", "launched_by": 2}],
    "ranges": [
      {"name": "step0", "lane": 0, "start": "0 ms", "end": "6 ms"},
      {"name": "record_param_comms, collective = allreduce, in_nelems = 16777216, out_nelems = 16777216, dtype = Float, group = 0, group_ranks = [0], group_size = 1",
       "lane": 0, "start": "4100 us", "end": "4130 us"},
      {"name": "torch.distributed.ddp.reducer::copy_bucket_to_grad, sizes = [[4096]]", "lane": 0, "start": "4990 us", "end": "5020 us"}]})";
  std::string path = "/tmp/bneck_dp_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << w;
  // `--host-speed 1`: both ranks' hosts at the traced pace (not the slowest of two: test_host.cpp).
  WhatIfReport r = whatif(path, "step0", {parse_transform("host-speed", "1"), parse_transform("data-parallel", "2")});
  REQUIRE(r.ranges.size() == 1);
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const TimeNs T = collective_time(hw, CollKind::AllReduce, 64ull << 20, 2).time_ns;
  // c10d's call on two ranks costs the host 20 us more (data_parallel.cpp's kCallHost), in the
  // call before the range: every later host call moves 20 us. The all-reduce starts at max(4 ms
  // after g, 0.05 + 0.02 + 4.05 ms + launch latency) and ends T later; c then starts (it was at
  // 5.01 ms, now 5.03) and runs 0.1 ms: the step's device span ends there.
  const TimeNs ar_start = std::max<TimeNs>(4 * kNsPerMs, 4120 * kNsPerUs + hw.gpu.launch_latency);
  const TimeNs c_end = std::max<TimeNs>(5030 * kNsPerUs, ar_start + T) + 100 * kNsPerUs;
  INFO("T = " << T << " ns, all-reduce from " << ar_start << " ns");
  CHECK(T > 200 * kNsPerUs);  // 64 MiB over NVLink at ~290 GB/s bus bandwidth: about 0.25 ms
  CHECK(r.ranges[0].predicted_ns == c_end - 100 * kNsPerUs);
  std::remove(path.c_str());
}

TEST_CASE("a measured unprofiled time scales the profiler's host cost (whatif --unprofiled-time)", "[whatif][unprofile]") {
  // decode_eager is launch-bound (the GPU busy 12 % of a token): its host time sets each token's
  // span. Told the unprofiled token takes 0.9 ms, the per-event costs are scaled until the
  // baseline's median token is 0.9 ms (bisection: within 0.5 %); by default (measured costs) it is
  // longer; with --unprofile off it is the profiled replay.
  Trace t = load_trace(core("decode_eager.sqlite"));
  WhatIfOptions o;
  o.range_regex = "tok.*";
  o.transforms = {parse_transform("cuda-graph", "")};
  const WhatIfReport def = run_whatif(t, o);
  o.unprofiled_time = 500 * kNsPerUs;
  const WhatIfReport scaled = run_whatif(t, o);
  CHECK(std::abs(static_cast<double>(scaled.baseline_ns) / 500e3 - 1) < 0.005);
  CHECK(def.baseline_ns > scaled.baseline_ns);
  CHECK_THAT(scaled.unprofile_log, Catch::Contains("scaled to the measured unprofiled time 500.000 us"));
  o.unprofiled_time = 0;
  o.unprofile = false;
  const WhatIfReport off = run_whatif(t, o);
  CHECK(off.baseline_ns == off.measured_ns);
  CHECK(off.unprofiled.empty());
}

TEST_CASE("a larger batch (whatif --batch K): every kernel does K times its work, the host's calls stay (hand-computed)",
          "[whatif][batch]") {
  // One 1 ms kernel launched at 0: with twice the work its time is tail + 2 (1 ms - tail) (its work
  // read from its measured time); the host call is unchanged.
  const std::string path = write_temp(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ops": [{"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "k", "lane": 1, "start": "10 us", "end": "1010 us", "launched_by": 0}]})",
                                      "batch");
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const TimeNs tail = hw.gpu.kernel_tail;
  WhatIfReport r = whatif_of(path, "", {"--batch", "2", "--sharing", "off"});
  CHECK(r.baseline_ns == kNsPerMs);
  CHECK(std::llabs(r.predicted_ns - (tail + 2 * (kNsPerMs - tail))) <= 1);
  CHECK_THROWS_WITH(whatif_of(path, "", {"--batch", "0"}), Catch::Contains("--batch 0"));
  std::remove(path.c_str());
}

// The fixed excess, by hand: an fp32 GEMM of 128 x 768 x 768 (aten::mm with its shapes) measured at
// 100 us, far over the model's time m1 for it (6.392 us on the calibrated H200): with --batch 4 it
// takes m4 + (100 us - m1) = 18.334 + 93.608 = 111.942 us, m4 the model's time of 512 x 768 x 768
// (the rows x 4: the measured GEMM surface's efficiency of the larger shape); the ratio rule would
// have given 100 us x m4 / m1 = 286.8 us. A kernel within 1.25x of its model scales by the ratio
// (the 1 ms kernel above).
TEST_CASE("a larger batch keeps a kernel's time beyond its model fixed (hand-computed)", "[whatif][batch]") {
  const std::string path = write_temp(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ops": [{"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "sgemm_128x64_nn", "lane": 1, "start": "10 us", "end": "110 us", "launched_by": 0}],
    "ranges": [{"name": "aten::mm, sizes = [[128, 768], [768, 768]]", "lane": 0, "start": "0 us", "end": "6 us"}]})",
                                      "batch_fixed");
  const Trace t = load_trace(path);
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  const WorkTable work = estimate_work(t, hw);
  OpId k = 0;
  while (t.ops[k].kind != OpKind::Kernel) ++k;
  REQUIRE(work[k].from_shapes);
  REQUIRE(work[k].out_rows == 128);
  KernelWork w4 = work[k];
  w4.out_rows *= 4;
  w4.flops *= 4;
  w4.bytes *= 4;
  const TimeNs m1 = model_kernel(nullptr, work[k], hw).time_ns, m4 = model_kernel(nullptr, w4, hw).time_ns;
  INFO("model " << m1 << " ns at 128 rows, " << m4 << " ns at 512");
  REQUIRE(100 * kNsPerUs > 2 * m1);
  const WhatIfReport r = whatif_of(path, "", {"--batch", "4", "--sharing", "off"});
  CHECK(r.baseline_ns == 100 * kNsPerUs);
  CHECK(std::llabs(r.predicted_ns - (m4 + 100 * kNsPerUs - m1)) <= 1);
  CHECK(r.predicted_ns < 100 * kNsPerUs * m4 / m1);  // what scaling the excess gave
  std::remove(path.c_str());
}

// A host synchronization inside a CUDA-graph region cannot be captured: it splits the region into
// two graphs, and the 100 us the host spends after it (reading what it waited for) stays. Two launches,
// a device synchronization, 100 us of host time, two launches, a synchronization: each piece's last
// launch is a graph launch (G each); without the split the 100 us would be gone.
TEST_CASE("CUDA graphs split at host synchronizations, the host time after them kept", "[whatif][cuda-graph]") {
  const std::string path = write_temp(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ranges": [{"name": "step", "lane": 0, "start": "0 us", "end": "165 us"}],
    "ops": [{"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "a", "lane": 1, "start": "10 us", "end": "20 us", "launched_by": 0},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "10 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "b", "lane": 1, "start": "20 us", "end": "30 us", "launched_by": 2},
            {"kind": "api", "name": "cudaDeviceSynchronize", "lane": 0, "start": "20 us", "duration": "11 us", "api_class": "device_sync", "device": 0},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "131 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "c", "lane": 1, "start": "140 us", "end": "150 us", "launched_by": 5},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "140 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "d", "lane": 1, "start": "150 us", "end": "160 us", "launched_by": 7},
            {"kind": "api", "name": "cudaDeviceSynchronize", "lane": 0, "start": "150 us", "duration": "11 us", "api_class": "device_sync", "device": 0}]})",
                                      "graph_sync");
  const HwSpec hw = load_hw("h200-sxm-calibrated");
  WhatIfReport r = whatif_of(path, "step", {"--cuda-graph", "--sharing", "off", "--unprofile=off"});
  CHECK(has_line(r, "1 regions replayed as CUDA graphs (4 launch calls -> 2 graph launches, host synchronizations splitting regions"));
  // The first graph's launch (G), the synchronization after its kernels, the 100 us, then the second
  // graph's two 10 us kernels (its first starting the launch latency after its first call): within
  // 10 us of G + 100 us + 20 us.
  const TimeNs floor = hw.gpu.graph_launch_overhead + 120 * kNsPerUs;
  CHECK(r.predicted_ns >= floor);
  CHECK(r.predicted_ns <= floor + 10 * kNsPerUs);
}

// Setup no graph replays keeps its time: a step launches a, allocates (cudaMalloc, 1 ms: the
// caching allocator growing), launches b. Replayed as a graph the launches and the host time between
// them go, the allocation stays: b starts after it, about 1 ms + 20 us from a's start (it was about
// 30 us: the allocation went with the launches). A stream-ordered cudaMallocAsync is captured.
TEST_CASE("CUDA graphs keep setup calls (allocation, creation) a graph does not replay", "[whatif][cuda-graph]") {
  auto step = [](const char* alloc) {
    return std::string(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ranges": [{"name": "step", "lane": 0, "start": "0 us", "end": "1050 us"}],
    "ops": [{"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "a", "lane": 1, "start": "10 us", "end": "20 us", "launched_by": 0},
            {"kind": "api", "name": ")") +
           alloc + R"(", "lane": 0, "start": "10 us", "duration": "1000 us"},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "1015 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "b", "lane": 1, "start": "1025 us", "end": "1035 us", "launched_by": 3}]})";
  };
  const WhatIfReport kept =
      whatif_of(write_temp(step("cudaMalloc"), "graph_setup"), "step", {"--cuda-graph", "--sharing", "off", "--unprofile=off"});
  CHECK(has_line(kept, "1 setup calls a graph does not replay (allocation, creation, device queries) keep their 1.000 ms"));
  CHECK(kept.predicted_ns >= 1'000 * kNsPerUs);
  CHECK(kept.predicted_ns <= 1'030 * kNsPerUs);
  const WhatIfReport captured =
      whatif_of(write_temp(step("cudaMallocAsync"), "graph_setup_async"), "step", {"--cuda-graph", "--sharing", "off", "--unprofile=off"});
  CHECK(captured.predicted_ns < 100 * kNsPerUs);
}

TEST_CASE("CUDA graphs keep a stream capture in progress: the program builds its graph there", "[whatif][cuda-graph]") {
  // One thread: cudaStreamBeginCapture, four launches 100 us apart (the model's Python running in
  // capture mode: the launches record nodes, no kernel runs), cudaStreamEndCapture,
  // cudaGraphInstantiate, then one cudaGraphLaunch whose kernel runs 20 us. Replayed as a graph the
  // capture would shrink to nothing (vLLM's capture profile forecast 25x); it is the graph being
  // built and keeps its 400 us. A kernel launched eagerly before the capture (10 .. 20 us) opens the
  // GPU span, the replay's kernel (535 .. 555 us) closes it: about 545 us, at least 500.
  const std::string w = write_temp(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ranges": [{"name": "step", "lane": 0, "start": "0 us", "end": "600 us"}],
    "ops": [{"kind": "api", "name": "cudaStreamBeginCapture", "lane": 0, "start": "6 us", "duration": "2 us"},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "100 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "200 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "300 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "400 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "api", "name": "cudaStreamEndCapture", "lane": 0, "start": "410 us", "duration": "2 us"},
            {"kind": "api", "name": "cudaGraphInstantiate", "lane": 0, "start": "415 us", "duration": "100 us"},
            {"kind": "api", "name": "cudaGraphLaunch", "lane": 0, "start": "520 us", "duration": "10 us", "api_class": "graph_launch"},
            {"kind": "kernel", "name": "k", "lane": 1, "start": "535 us", "end": "555 us", "launched_by": 7},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "a", "lane": 1, "start": "10 us", "end": "20 us", "launched_by": 9}]})",
                                   "graph_capture");
  const WhatIfReport f = whatif_of(w, "step", {"--cuda-graph", "--sharing", "off", "--unprofile=off"});
  CHECK(has_line(f, "calls inside stream captures (the program building its graphs) keep their time"));
  CHECK(f.predicted_ns >= 500 * kNsPerUs);
}

// A kernel held by a stream wait the trace does not resolve (Kineto without the wait's event: an
// SGLang decode step's forward waited 463 ms for an event no op of the trace records) waited for
// something a CUDA graph waits for too: its measured delay stays. One thread launches a, b and c
// (5 us calls, 10 us apart) with a stream wait between a and b; a runs at once (10 .. 20 us), b
// starts 1,000 us after its call (1,025 us: nothing the trace shows ended then), c right after b.
// Replayed as one graph the calls take no time, a and b's calls both at 0: b starts 1,000 us after
// its call and c follows it: the GPU span about 1,000 + 20 us from a's start (it was about 30 us:
// the wait went with the launch overhead).
TEST_CASE("CUDA graphs keep the delay of a kernel held by a stream wait the trace does not resolve", "[whatif][cuda-graph]") {
  const std::string path = write_temp(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ranges": [{"name": "step", "lane": 0, "start": "0 us", "end": "1050 us"}],
    "ops": [{"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "a", "lane": 1, "start": "10 us", "end": "20 us", "launched_by": 0},
            {"kind": "api", "name": "cudaStreamWaitEvent", "lane": 0, "start": "15 us", "duration": "2 us", "api_class": "stream_wait"},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "25 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "b", "lane": 1, "start": "1025 us", "end": "1035 us", "launched_by": 3},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "35 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "c", "lane": 1, "start": "1035 us", "end": "1045 us", "launched_by": 5}]})",
                                      "graph_unknown_wait");
  WhatIfReport r = whatif_of(path, "step", {"--cuda-graph", "--sharing", "off", "--unprofile=off"});
  CHECK(has_line(r, "1 device ops that waited for something the trace does not show"));
  CHECK(r.predicted_ns >= 990 * kNsPerUs);
  CHECK(r.predicted_ns <= 1'030 * kNsPerUs);
}

// The SGLang decode profile of thirdparty/tracelens (Qwen3-8B on an MI300X, decode already a CUDA
// graph): its forward's first kernels waited 463 ms on stream 3 (a stream wait without its event;
// the GPU idle, the host in a blocking copy) before 10 ms of work. --cuda-graph forecast 47x (the
// wait taken for launch overhead); the wait stays: within 1 % of the baseline.
TEST_CASE("CUDA graphs on an SGLang decode step held by an unresolved stream wait gain nothing", "[whatif][cuda-graph][extended]") {
  const std::string f = extra_dir() + "/traces/thirdparty/tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz";
  if (!std::ifstream(f).good()) {
    WARN("no " << f << ": skipped");
    return;
  }
  const WhatIfReport r = whatif_of(f, "", {"--cuda-graph"});
  CHECK(has_line(r, "device ops that waited for something the trace does not show"));
  CHECK(std::fabs(static_cast<double>(r.predicted_ns) / static_cast<double>(r.baseline_ns) - 1) < 0.01);
  CHECK(r.baseline_ns > 400'000'000);
}

// --batch-copies by hand. One thread: a 20 MB pageable copy (2,000 us: 10 GB/s, the trace's rate; over
// 16 MiB, not batched), then four 50,000-byte pageable copies issued 50 us apart (call 20 us, copy
// 10 us from 5 us into the call, its stream synchronization 1 us after the call), then a launch
// (27 us after the last synchronization) of a 100 us kernel starting 10 us after its launch. Each
// small copy is 5 us of latency plus 5 us of bytes, so the batched copy takes 5 + 200,000 B / 10 GB/s
// = 25 us. The first three calls, their synchronizations and the host time after each go: the last
// call starts where the first did (2,100 us), its copy runs 2,105 .. 2,130 us, the call returns 5 us
// after it (as traced), the synchronization 1 us later (2,136 .. 2,138), the launch 27 us after
// (2,165), the kernel 2,175 .. 2,275 us. GPU span from the first copy (5 us): 2,270 us (was 2,405).
TEST_CASE("batched copies (whatif --batch-copies): a run of small copies becomes one (hand-computed)", "[whatif][copies]") {
  const std::string path = write_temp(R"J({"format": "bneck-workload", "measured": true,
 "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
 "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
 "ops": [{"kind": "api", "name": "cudaMemcpyAsync", "lane": 0, "start": "0 us", "duration": "2010 us", "api_class": "memcpy_sync"},
            {"kind": "memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "lane": 1, "start": "5 us", "duration": "2000 us", "launched_by": 0, "bytes": 20000000, "copy_kind": "HtoD", "src_kind": "pageable", "dst_kind": "device"},
            {"kind": "api", "name": "cudaStreamSynchronize", "lane": 0, "start": "2011 us", "duration": "2 us", "api_class": "stream_sync", "stream_lane": 1},
            {"kind": "api", "name": "cudaMemcpyAsync", "lane": 0, "start": "2100 us", "duration": "20 us", "api_class": "memcpy_sync"},
            {"kind": "memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "lane": 1, "start": "2105 us", "duration": "10 us", "launched_by": 3, "bytes": 50000, "copy_kind": "HtoD", "src_kind": "pageable", "dst_kind": "device"},
            {"kind": "api", "name": "cudaStreamSynchronize", "lane": 0, "start": "2121 us", "duration": "2 us", "api_class": "stream_sync", "stream_lane": 1},
            {"kind": "api", "name": "cudaMemcpyAsync", "lane": 0, "start": "2150 us", "duration": "20 us", "api_class": "memcpy_sync"},
            {"kind": "memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "lane": 1, "start": "2155 us", "duration": "10 us", "launched_by": 6, "bytes": 50000, "copy_kind": "HtoD", "src_kind": "pageable", "dst_kind": "device"},
            {"kind": "api", "name": "cudaStreamSynchronize", "lane": 0, "start": "2171 us", "duration": "2 us", "api_class": "stream_sync", "stream_lane": 1},
            {"kind": "api", "name": "cudaMemcpyAsync", "lane": 0, "start": "2200 us", "duration": "20 us", "api_class": "memcpy_sync"},
            {"kind": "memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "lane": 1, "start": "2205 us", "duration": "10 us", "launched_by": 9, "bytes": 50000, "copy_kind": "HtoD", "src_kind": "pageable", "dst_kind": "device"},
            {"kind": "api", "name": "cudaStreamSynchronize", "lane": 0, "start": "2221 us", "duration": "2 us", "api_class": "stream_sync", "stream_lane": 1},
            {"kind": "api", "name": "cudaMemcpyAsync", "lane": 0, "start": "2250 us", "duration": "20 us", "api_class": "memcpy_sync"},
            {"kind": "memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "lane": 1, "start": "2255 us", "duration": "10 us", "launched_by": 12, "bytes": 50000, "copy_kind": "HtoD", "src_kind": "pageable", "dst_kind": "device"},
            {"kind": "api", "name": "cudaStreamSynchronize", "lane": 0, "start": "2271 us", "duration": "2 us", "api_class": "stream_sync", "stream_lane": 1},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "2300 us", "duration": "5 us", "api_class": "launch"},
            {"kind": "kernel", "name": "k", "lane": 1, "start": "2310 us", "end": "2410 us", "launched_by": 15}]
})J",
                                      "batch_copies");
  WhatIfReport r = whatif_of(path, "", {"--batch-copies", "--sharing", "off"});
  CHECK(r.baseline_ns == 2'405'000);
  CHECK(r.predicted_ns == 2'270'000);
  CHECK(has_line(r, "4 copies in 1 runs (the longest 4) each made one copy, 40.000 us -> 25.000 us (the trace's copies' rate)"));
  // A kernel launch between copies ends a run; only the copies a selector picks are batched.
  CHECK_THROWS_WITH(whatif_of(path, "", {"--batch-copies=name~nothing"}), Catch::Contains("no run of two or more"));
}

// Copy-bound remedies against their measured programs (validate/reference/h200/loops, 2026-12-02):
// 64 MiB of pageable host memory copied to the GPU each step before 4 bf16 GEMMs, unprofiled
// median of three processes 5.15 ms, the same loop from pinned memory with non_blocking copies
// 1.945 ms (1.949 / 1.945 / 1.942); a 32 MiB pinned batch copied in series with its compute
// (1.38 ms) against the same loop prefetching the next batch on a side stream, 0.806 ms (0.885 /
// 0.806 / 0.790). Forecasts from the Kineto traces of the slow loops: --pin-memory 1.961 ms
// (+0.8 %: the copies at the spec's pinned path, the blocking .to()'s stream synchronization
// gone); --overlap-copies 0.837 ms (+3.8 %; the first step, the loop's prologue, stays serial;
// +1.4 % when the profiler's cost was taken per input: this trace's launches ran at 19.5 us, past
// the paces the per-event cost was measured at). The core memcpy trace's pageable copies pinned,
// against its pinned ones: 256 MiB 5.06 vs 4.85 ms (+4.2 %), 16 MiB 0.319 vs 0.316 ms (+0.8 %).
// Checked: 10 % and 5 % (the loops), 10 %.
TEST_CASE("copy remedies: pinned memory and prefetched copies forecast their measured loops", "[whatif][e2e]") {
  const std::string k = std::string(BNECK_TEST_DATA) + "/loops/k/";
  WhatIfReport pin = whatif_of(k + "copy.pageable.json.gz", "step.*", {"--pin-memory"});
  INFO("pinned: forecast " << pin.predicted_ns);
  CHECK(rel(static_cast<double>(pin.predicted_ns), 1.945e6) <= 0.10);
  CHECK(has_line(pin, "20 pageable copies pinned"));
  CHECK(has_line(pin, "20 stream synchronizations right after them gone"));
  WhatIfReport pre = whatif_of(k + "stage.serial.json.gz", "step.*", {"--overlap-copies"});
  INFO("prefetched: forecast " << pre.predicted_ns);
  CHECK(rel(static_cast<double>(pre.predicted_ns), 0.806e6) <= 0.05);
  // Pageable copies cannot overlap the host's work: said, not moved.
  CHECK_THROWS_WITH(whatif_of(k + "copy.pageable.json.gz", "step.*", {"--overlap-copies"}), Catch::Contains("--pin-memory first"));
  CHECK_THROWS_WITH(whatif_of(k + "copy.pinned.json.gz", "step.*", {"--pin-memory"}),
                    Catch::Contains("no host<->device copy touching pageable"));
  for (const char* size : {"268435456", "16777216"}) {
    const double pinned = measured_median(core("memcpy.sqlite"), std::string("h2d_pinned_") + size);
    WhatIfReport w = whatif_of(core("memcpy.sqlite"), std::string("h2d_pageable_") + size, {"--pin-memory"});
    INFO(size << ": forecast " << w.predicted_ns << ", pinned measured " << pinned);
    CHECK(rel(static_cast<double>(w.predicted_ns), pinned) <= 0.10);
  }
}

// --fill-waves: B blocks on S SMs; the busiest SM runs ceil(B / S). Hand computation on the H200's
// 132 SMs: 136 blocks -> 2 on the busiest, 136 / 264 = 0.515; 132 and 100 blocks -> 1 (whole, or
// an underfilled GPU: not this remedy); 400 = 4 x 100 -> ceil(400 / 132) = 4, 400 / 528 = 0.758.
TEST_CASE("fill-waves: the busiest SM's load against the average", "[whatif][waves]") {
  LaunchConfig lc;
  lc.set_grid(0, 8);
  lc.set_grid(2, 17);
  CHECK(sm_fill(&lc, 132) == Approx(136.0 / 264));
  lc.set_grid(0, 132);
  lc.set_grid(2, 1);
  CHECK(sm_fill(&lc, 132) == 1);
  lc.set_grid(0, 100);
  CHECK(sm_fill(&lc, 132) == 1);
  lc.set_grid(1, 4);
  CHECK(sm_fill(&lc, 132) == Approx(400.0 / 528));
  CHECK(sm_fill(nullptr, 132) == 1);
}

// validate/reference/h200/waves: three kernels swept over grids on one H200 (each grid's median of 5
// runs, CUPTI). The truth for a grid of B blocks: B x the kernel's median time per block at the grids
// that fill whole waves of resident blocks (B / (slots x ceil(B / slots)) >= 0.93, slots = 132 x the
// blocks an SM holds). Forecast from each grid's own trace kernels with --fill-waves. Fit on
// FlashAttention forward and the convolution (median |error| 2.5 and 3.1 %, measured); held out:
// cutlass memory-efficient attention, 7.6 % median, 26 of 33 inside the family's 80 % interval.
TEST_CASE("fill-waves: swept grids of three H200 kernels against their filled grids", "[whatif][waves][e2e]") {
  const std::string dir = std::string(BNECK_TEST_DATA) + "/waves/";
  const HwSpec h200 = load_hw("h200-sxm");
  const ErrorBar fam = error_bar({parse_transform("fill-waves", "")}, ErrorContext{}, 1000000);
  struct Case {
    const char* file;
    const char* kernel;
    double max_median;
    std::size_t grids;
  };
  for (const Case& c : {Case{"flash.json", "pytorch_flash::flash_fwd_kernel", 0.04, 29}, Case{"conv.json", "implicit_gemm", 0.05, 14},
                        Case{"effic.json", "fmha_cutlassF", 0.10, 33}}) {
    INFO(c.file);
    const WhatIfReport r = whatif_of(dir + c.file, "", {"--fill-waves"});
    const Trace& t = *r.trace;
    std::map<std::uint64_t, std::vector<double>> measured, forecast;
    std::uint32_t slots = 0;
    for (OpId o = 0; o < t.ops.size(); ++o) {
      const Op& op = t.ops[o];
      const LaunchConfig* lc = t.launch(op);
      if (op.kind != OpKind::Kernel || !lc || t.strings.str(op.name).find(c.kernel) == std::string::npos) continue;
      if (std::string(c.file) == "conv.json" && lc->registers != 255) continue;  // cuDNN's other kernel at small batches
      const std::uint64_t b = std::uint64_t{lc->grid(0)} * lc->grid(1) * lc->grid(2);
      const std::uint32_t threads = std::uint32_t{lc->block[0]} * lc->block[1] * lc->block[2];
      slots = 132 * occupancy(h200.gpu, {threads, lc->registers, Bytes{lc->static_smem} + lc->dynamic_smem}).blocks_per_sm;
      measured[b].push_back(static_cast<double>(op.duration()));
      forecast[b].push_back(static_cast<double>(r.pred_sim.end[o] - r.pred_sim.start[o]));
    }
    REQUIRE(slots > 0);
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::vector<double> per_block;
    for (const auto& [b, v] : measured) {
      const double waves = std::ceil(static_cast<double>(b) / slots);
      if (b >= slots && static_cast<double>(b) / (waves * slots) >= 0.93) per_block.push_back(median(v) / static_cast<double>(b));
    }
    REQUIRE_FALSE(per_block.empty());
    const double ref = median(per_block);
    std::vector<double> err;
    std::size_t inside = 0;
    for (const auto& [b, v] : measured) {
      const double fill = static_cast<double>(b) / (132.0 * std::ceil(static_cast<double>(b) / 132));
      if (b <= 132 || fill >= 0.95) continue;
      const double e = median(forecast[b]) / (ref * static_cast<double>(b)) - 1;
      err.push_back(std::abs(e));
      inside += std::abs(e - fam.bias) <= fam.half_width;
    }
    CHECK(err.size() == c.grids);
    INFO("median |error| " << median(err) << ", inside " << inside << " of " << err.size());
    CHECK(median(err) < c.max_median);
    CHECK(static_cast<double>(inside) >= 0.7 * static_cast<double>(err.size()));
    CHECK(has_line(r, "grids filled to whole multiples of the 132 SMs"));
  }
}

// Fusion on host-bound programs (validate/reference/h200/fusion_host), eager fp32 against
// torch.compile, unprofiled in three processes. The 48-layer loop at batch 1 (LayerNorm, Linear,
// GELU, add a layer; 192 launches a step eager, 97 compiled): compile / eager 1.193 / 2.511, 1.325 /
// 2.431, 1.981 / 3.087 ms = 0.475, 0.545, 0.642 (median 0.545); the forecast from a fourth
// process's profiled eager trace over its own baseline: 0.555 (+2 %; with the host kept, before,
// 1.00: nothing fused across the GPU's idle gaps). Hugging Face models at batch 1, each process's
// forecast from its own eager trace against its own compiled steps (ms): BERT-base 1x128 3.736 /
// 3.367, 3.885 / 3.667, 3.773 / 5.870 (a process whose host ran slow); GPT-2 medium 1x64 (held
// out: the wrapper's 13.65 us a launch was fitted on the loop and BERT-base) 11.787 / 8.517 (its
// trace's baseline is 51 % above its eager run: the profiler's cost under-removed), 7.773 / 6.549,
// 5.073 / 4.727: |error| 11, 6, 36, 38, 19, 7 %, median 15 %.
TEST_CASE("a fused kernel never takes longer than the kernels it replaces", "[whatif][fuse]") {
  // A 2 us fill of one block (vLLM's capture steps: a FillFunctor<long> of a few elements) and then a
  // 20 us elementwise kernel over 132 x 256 threads on one stream. Fused: half the fill's bytes plus
  // half the large kernel's, on the large kernel's launch, calibrated by the pair's measured over
  // modelled time: at most their 22 us. On the fill's launch of 128 threads the same bytes were
  // timed as 128 threads moving them: milliseconds (vLLM's piecewise capture: 0.83 -> 71 ms).
  const std::string w = write_temp(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ranges": [{"name": "step", "lane": 0, "start": "0 us", "end": "40 us"}],
    "ops": [{"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "2 us", "api_class": "launch"},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "3 us", "duration": "2 us", "api_class": "launch"},
            {"kind": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<long>>", "lane": 1,
             "start": "10 us", "end": "12 us", "launched_by": 0, "grid": [1, 1, 1], "block": [128, 1, 1]},
            {"kind": "kernel", "name": "void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>>",
             "lane": 1, "start": "12 us", "end": "32 us", "launched_by": 1, "grid": [132, 1, 1], "block": [256, 1, 1]}]})",
                                   "fuse_small_first");
  const WhatIfReport f = whatif_of(w, "step", {"--fuse", "kind=kernel", "--sharing", "off", "--unprofile=off"});
  CHECK(has_line(f, "2 kernels in 1 fused runs"));
  CHECK(f.predicted_ns <= f.baseline_ns);
  CHECK(f.predicted_ns <= 40 * kNsPerUs);
}

TEST_CASE("defer-syncs: the host no longer waits at a synchronization, the next step's launch runs ahead", "[whatif][host]") {
  // Four steps on one thread: a launch (2 us) at 0, 200, 400, 600 us, its 100 us kernel 5 us after,
  // a cudaStreamSynchronize from 3 us that returns when the kernel ends (102 us), then 95 us of the
  // host's own work. The GPU span: 5 .. 705 us = 700 us. Deferred, the syncs take no time and wait
  // for nothing: a step's host time is 2 + 1 + 95 = 98 us, so the launches come at 0, 98, 196, 294
  // us and the kernels run back to back from 5 us: 4 x 100 = 400 us. With --remove the calls keep
  // their waits (their dependencies order the rest): 700 us, the baseline.
  std::string ops;
  for (int k = 0; k < 4; ++k) {
    const int t = 200 * k;
    ops += std::string(k ? ", " : "") + R"({"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": ")" + std::to_string(t) +
           R"( us", "duration": "2 us", "api_class": "launch"},
            {"kind": "api", "name": "cudaStreamSynchronize", "lane": 0, "start": ")" +
           std::to_string(t + 3) + R"( us", "duration": "102 us", "api_class": "stream_sync"},
            {"kind": "kernel", "name": "k", "lane": 1, "start": ")" +
           std::to_string(t + 5) + R"( us", "duration": "100 us", "launched_by": )" + std::to_string(3 * k) + "}";
  }
  const std::string w = write_temp(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}], "ops": [)" +
                                       ops + "]}",
                                   "defer_syncs");
  const WhatIfReport d = whatif_of(w, "", {"--defer-syncs", "--sharing", "off", "--unprofile=off"});
  CHECK(d.baseline_ns == 700 * kNsPerUs);
  CHECK(d.predicted_ns == 400 * kNsPerUs);
  CHECK(has_line(d, "4 host synchronizations no longer wait for the device"));
  const WhatIfReport r = whatif_of(w, "", {"--remove", "kind=api&name~ynchronize", "--sharing", "off", "--unprofile=off"});
  CHECK(r.predicted_ns == 700 * kNsPerUs);
}

TEST_CASE("fuse auto: a device copy among the fused kernels is a member, the cap reaches through the runtime's calls", "[whatif][fuse]") {
  // One thread: launch of a (0-2 us), the runtime's own call (cudaPeekAtLastError, 30-31 us),
  // launch of b (60-62 us), a device-to-device copy's call (90-93 us); on the stream the
  // elementwise a and b and the 1 MiB copy. --fuse auto: one run of the three (the copy a member),
  // b's launch and the copy's call gone as the fused ones' are (2 calls). The compiled wrapper's cap
  // then holds between a's launch and b's through the runtime call: a's edge to it was zeroed (the
  // next fused op's dispatch), its 1 us and b's launch (now 0) inside the 13.65 us, so the 29 us
  // before b's launch are capped at 13.65 - 1 = 12.65 us: 16.35 us less.
  const std::string w = write_temp(R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}],
    "ranges": [{"name": "step", "lane": 0, "start": "0 us", "end": "100 us"}],
    "ops": [{"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "0 us", "duration": "2 us", "api_class": "launch"},
            {"kind": "api", "name": "cudaPeekAtLastError", "lane": 0, "start": "30 us", "duration": "1 us", "api_class": "other"},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": "60 us", "duration": "2 us", "api_class": "launch"},
            {"kind": "api", "name": "cudaMemcpyAsync", "lane": 0, "start": "90 us", "duration": "3 us", "api_class": "memcpy_async"},
            {"kind": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::launch_clamp_scalar>", "lane": 1,
             "start": "5 us", "end": "7 us", "launched_by": 0, "grid": [132, 1, 1], "block": [256, 1, 1]},
            {"kind": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "lane": 1,
             "start": "64 us", "end": "66 us", "launched_by": 2, "grid": [132, 1, 1], "block": [256, 1, 1]},
            {"kind": "memcpy", "name": "Memcpy DtoD", "lane": 1, "start": "95 us", "end": "97 us", "copy_kind": "DtoD", "size": "1 MiB",
             "launched_by": 3}]})",
                                   "fuse_copy_member");
  const WhatIfReport f = whatif_of(w, "step", {"--fuse", "auto", "--sharing", "off", "--unprofile=off"});
  CHECK(has_line(f, "3 kernels in 1 fused runs"));
  CHECK(has_line(f, "host: 2 launch calls"));
  CHECK(has_line(f, "16.350 us less"));
  CHECK(f.predicted_ns < f.baseline_ns);
}

TEST_CASE("fuse auto on host-bound programs: the fused ops' dispatches and the modules' Python go", "[whatif][fuse][e2e]") {
  const std::string d = std::string(BNECK_TEST_DATA) + "/fusion_host/";
  const WhatIfReport r = whatif_of(d + "k/host.fp32.json.gz", "step.*", {"--fuse", "auto"});
  const double ratio = static_cast<double>(r.predicted_ns) / static_cast<double>(r.baseline_ns);
  // The loop's three processes: compiled / eager 0.475, 0.545, 0.642 (eager 2.43-3.09 ms, compiled
  // 1.19-1.98). Forecast: 0.445 (baseline 1.800 ms, fused 0.800); 0.555 while the profiler's cost
  // was taken per input (baseline 1.454, fused 0.806: the fused forecast's host is the compiled
  // code's 13.65 us a launch either way, the eager baseline now nearer the measured).
  INFO("loop: forecast / baseline " << ratio);
  CHECK(std::abs(ratio / 0.545 - 1) < 0.20);
  CHECK(has_line(r, "launch calls and their ops' dispatch gone"));
  CHECK(has_line(r, "the compiled code's calls between launches at most 13.650 us a launch"));
  // Each process's forecast from its own eager trace against its own compiled steps: every error
  // under 45 %, the median under 20 %; how many measured times the 80 % interval holds.
  auto compare = [](const std::string& dir, const std::vector<std::pair<std::string, double>>& runs) {
    std::vector<double> err;
    int inside = 0;
    for (const auto& [trace, compiled_ms] : runs) {
      const WhatIfReport w = whatif_of(dir + trace + ".fp32.kineto.json.gz", "step.*", {"--fuse", "auto"});
      err.push_back(std::abs(static_cast<double>(w.predicted_ns) / 1e6 / compiled_ms - 1));
      inside +=
          static_cast<double>(w.error_bar.low_ns) / 1e6 <= compiled_ms && compiled_ms <= static_cast<double>(w.error_bar.high_ns) / 1e6;
      INFO(trace << ": forecast " << static_cast<double>(w.predicted_ns) / 1e6 << " ms, compiled " << compiled_ms << " ms");
      CHECK(err.back() < 0.45);
    }
    std::sort(err.begin(), err.end());
    CHECK((err[2] + err[3]) / 2 < 0.20);
    return inside;
  };
  const int fit_inside = compare(d, {{"k1/bert_base-inf-1x128", 3.367},
                                     {"k2/bert_base-inf-1x128", 3.667},
                                     {"k3/bert_base-inf-1x128", 5.870},
                                     {"k1/gpt2_medium-inf-1x64", 8.517},
                                     {"k2/gpt2_medium-inf-1x64", 6.549},
                                     {"k3/gpt2_medium-inf-1x64", 4.727}});
  // Held out (run_fusion_host2.sh, captured after the wrapper's cost was fixed): Llama-style 1B and
  // OPT-1.3B at 1 x 64 tokens: 5.803 / 9.619, 5.790 / 7.548, 5.644 / 6.024; 10.876 / 10.299,
  // 10.317 / 8.372, 11.068 / 11.472 ms: |error| 40, 23, 6, 6, 23, 4 %, median 14.5 %.
  const int held_inside = compare(std::string(BNECK_TEST_DATA) + "/fusion_host2/", {{"k1/llama_1b-inf-1x64", 9.619},
                                                                                    {"k2/llama_1b-inf-1x64", 7.548},
                                                                                    {"k3/llama_1b-inf-1x64", 6.024},
                                                                                    {"k1/opt_1.3b-inf-1x64", 10.299},
                                                                                    {"k2/opt_1.3b-inf-1x64", 8.372},
                                                                                    {"k3/opt_1.3b-inf-1x64", 11.472}});
  CHECK(fit_inside >= 4);   // 5 of 6
  CHECK(held_inside >= 4);  // 4: Llama-style 1B process 1 ran slow (9.6 ms), OPT process 2 (busy over 85 %: the narrow interval)
}

// A larger batch (validate/reference/h200/batch): Hugging Face models in fp32, each batch in its own
// process, two processes (unprofiled median step, ms): BERT-base x 128 tokens at batch 1 8.564 /
// 4.813, 4: 7.530 / 4.920 (host-bound), 16: 10.929 / 10.646, 64: 35.442 / 35.205; GPT-2 medium x
// 512 at 1: 21.213 / 23.649, 4: 43.036 / 43.832, 16: 160.972 / 160.744; Llama-style 1B x 1024 at 1:
// 57.423 / 56.345, 4: 212.247 / 212.174, 8: 421.558 / 421.208. Each process's trace at batch 1 or 4
// forecasts the larger batches (--batch K) against the mean of the two processes. Before the fixed
// excess (a kernel's time beyond 1.25x its model kept, not scaled), BERT-base's forecasts were
// +37-162 % (split-K GEMMs at 128 rows take 4x the model's time: scaled with the work, 64x of it);
// then -11 .. +22 % (the batch-1 trace host-bound), GPT-2 medium -3.5 .. 0 %, held out Llama -2.3 ..
// -4.0 %. Since the profiler's cost follows the trace's launch pace, the batch-1 BERT-base traces'
// baselines are 9.20 and 4.03 ms (their own processes' unprofiled 8.564 and 4.813; 7.46 and 3.84
// before) and the host-bound forecasts follow each process's host: at x4 9.21 and 5.67 ms against
// 7.530 and 4.920 measured in two other processes (+48 % against their mean). So the host-bound
// batch-1 BERT-base is checked against the two processes' range: within 25 % of it.
TEST_CASE("a larger batch on real models: small kernels' fixed time stays, GEMMs priced at the larger shape", "[whatif][batch][e2e]") {
  const std::string d = std::string(BNECK_TEST_DATA) + "/batch/";
  struct Pair {
    std::string source;
    int k;
    double a_ms, b_ms;  // the larger batch in two processes
    bool held_out;
    double measured_ms() const { return (a_ms + b_ms) / 2; }
  };
  const std::vector<Pair> pairs = {
      {"bert_base-inf-1x128", 4, 7.530, 4.920, false},        {"bert_base-inf-1x128", 16, 10.929, 10.646, false},
      {"bert_base-inf-1x128", 64, 35.442, 35.205, false},     {"bert_base-inf-4x128", 4, 10.929, 10.646, false},
      {"bert_base-inf-4x128", 16, 35.442, 35.205, false},     {"gpt2_medium-inf-1x512", 4, 43.036, 43.832, false},
      {"gpt2_medium-inf-1x512", 16, 160.972, 160.744, false}, {"gpt2_medium-inf-4x512", 4, 160.972, 160.744, false},
      {"llama_1b-inf-1x1024", 4, 212.247, 212.174, true},     {"llama_1b-inf-4x1024", 2, 421.558, 421.208, true}};
  int fit = 0, fit_inside = 0, held = 0, held_inside = 0;
  for (int r = 1; r <= 2; ++r)
    for (const Pair& p : pairs) {
      const WhatIfReport w =
          whatif_of(d + "k" + std::to_string(r) + "/" + p.source + ".fp32.kineto.json.gz", "step.*", {"--batch", std::to_string(p.k)});
      const double measured = p.measured_ms(), f = static_cast<double>(w.predicted_ns) / 1e6, e = f / measured - 1;
      const bool in =
          static_cast<double>(w.error_bar.low_ns) / 1e6 <= measured && measured <= static_cast<double>(w.error_bar.high_ns) / 1e6;
      INFO(p.source << " process " << r << " x" << p.k << ": forecast " << f << " ms, measured " << p.a_ms << " / " << p.b_ms << " ms");
      if (p.source.rfind("bert_base-inf-1x", 0) == 0) {  // host-bound: within 25 % of the processes' range
        CHECK(f > 0.75 * std::min(p.a_ms, p.b_ms));
        CHECK(f < 1.25 * std::max(p.a_ms, p.b_ms));
      } else
        CHECK(std::abs(e) < 0.08);
      if (p.held_out) {
        CHECK(std::abs(e) < 0.06);
        ++held, held_inside += in;
      } else
        ++fit, fit_inside += in;
      CHECK(std::any_of(w.error_bar.basis.begin(), w.error_bar.basis.end(),
                        [](const std::string& b) { return b.find("a larger batch: measured error") != std::string::npos; }));
    }
  CHECK(fit_inside >= 0.7 * fit);  // 12 of 16: three of the batch-1 BERT forecasts (+14 .. +22 %) and the host-bound -10.6 % lie outside
  CHECK(held_inside == held);
}

TEST_CASE("a forecast resumed after the first transforms is the forecast of them all", "[whatif]") {
  // WhatIfEngine::resume(prefix(a), b) is apply(a + b): what-ifs resume from the case after the
  // profiler's step. Here a scales the spin kernels (durations only), b fuses each iteration's
  // kernels (edits the graph) and scales axpy: the same durations, graph and makespan either way,
  // and the prefix's graph is left as it was (the resumed case edits its own copy).
  const Trace t = load_trace(demo_trace());
  auto g = std::make_shared<const Graph>(build_graph(t));
  WhatIfEngine e(t, g, load_hw("h200-sxm"));
  const std::vector<Transform> a = {parse_transform("scale", "2:name~spin")};
  const std::vector<Transform> b = {parse_transform("fuse", "range~iter.*"), parse_transform("scale", "3:name~axpy")};
  std::vector<Transform> ab = a;
  ab.insert(ab.end(), b.begin(), b.end());
  const WhatIfCase whole = e.apply(ab);
  REQUIRE(whole.graph != g);  // the fusion edited a copy of the graph
  REQUIRE(whole.log.size() >= 3);
  const WhatIfCase first = e.prefix(a);
  CHECK(first.graph == g);  // the scaling alone shares it
  const std::size_t edges_before = first.graph->num_edges();
  const WhatIfCase resumed = e.resume(first, b);
  CHECK(resumed.durations == whole.durations);
  CHECK(resumed.log == whole.log);
  CHECK(resumed.graph->num_nodes() == whole.graph->num_nodes());
  CHECK(resumed.graph->num_edges() == whole.graph->num_edges());
  CHECK(resumed.graph != first.graph);
  CHECK(first.graph->num_edges() == edges_before);
  const SimResult r1 = simulate(*resumed.graph, VectorCostModel(resumed.durations, "resumed"));
  const SimResult r2 = simulate(*whole.graph, VectorCostModel(whole.durations, "whole"));
  CHECK(r1.end == r2.end);
  CHECK(r1.start == r2.start);
}

TEST_CASE("others' multi-thread profiles under --repeat: each profiler step twice", "[whatif][extended]") {
  // HTA's trace_diff test trace (3 threads, 4 streams, 6 ProfilerStep ranges: 752 ms replayed) and
  // negative_queue rank 0 (1,228 ms): kernels other threads launch sit between a step's own on its
  // streams, and a step's blocking copy waits for them. Each step run twice in all: the span grows
  // by about the steps' own work (the steps cover 745 of the first trace's 752 ms): 2.06x and 1.77x.
  // (Before: "dependency cycle", exit 2.)
  const std::string k = extra_dir() + "/traces/kineto/hta/";
  for (const char* f : {"trace_diff/test/test.json.gz", "negative_queue_length_values_check/rank0.json.gz"}) {
    INFO(f);
    WhatIfReport w;
    REQUIRE_NOTHROW(w = whatif_of(k + f, "", {"--repeat", "2:ProfilerStep#.*"}));
    const double x = static_cast<double>(w.predicted_ns) / static_cast<double>(w.baseline_ns);
    CHECK(x > 1.6);
    CHECK(x < 2.2);
  }
}

TEST_CASE("others' profiles under --fsdp and --overlap-comm: every rank forecast, no cycle", "[whatif][extended]") {
  // DLRM's 8 ranks (PARAM, V100): on ranks 1 and 3 a unit's first kernel (the optimizer's addcmul)
  // has no launching call in the trace, so its all-gather was issued "after" the op that waits for
  // it (a cycle, exit 2); now after the op before it on its stream. FSDP on 2 GPUs costs each rank
  // its gathers and scatters: +2.1 .. +7.7 % of a 6-15 ms step.
  const std::string dir = extra_dir() + "/traces/kineto/param_dlrm_8rank_v100/dlrm_kineto/";
  int ranks = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    INFO(e.path());
    WhatIfReport w;
    REQUIRE_NOTHROW(w = whatif_of(e.path().string(), "", {"--fsdp", "2"}));
    const double x = static_cast<double>(w.predicted_ns) / static_cast<double>(w.baseline_ns);
    CHECK(x > 1.0);
    CHECK(x < 1.1);
    ++ranks;
  }
  CHECK(ranks == 8);
  // HTA's multi-thread traces: a communication kernel's input was the last compute op submitted
  // before it even where that op was still running when it started (it waited, through an event,
  // for the communication kernel: a cycle). Now the last one that had ended: no cycle, and the
  // forecast within 1 % of the replay on trace_diff's, -4.5 % on negative_queue's rank 0, whose
  // 80 collectives are 185 ms of its 1.23 s exposed (-0.5 % while its kernels held on other
  // streams past the inference window kept their launches' delays: milliseconds nothing moved).
  const std::string k = extra_dir() + "/traces/kineto/hta/";
  for (const char* f : {"trace_diff/test/test.json.gz", "negative_queue_length_values_check/rank0.json.gz"}) {
    INFO(f);
    WhatIfReport w;
    REQUIRE_NOTHROW(w = whatif_of(k + f, "", {"--overlap-comm"}));
    const double x = static_cast<double>(w.predicted_ns) / static_cast<double>(w.baseline_ns);
    CHECK(x > (std::string(f).find("negative") != std::string::npos ? 0.94 : 0.99));
    CHECK(x <= 1.0);
  }
}

// A CPU that polls a count a kernel writes to mapped memory (DeepEP's notify_dispatch) waits for
// that kernel with no runtime call. One thread launches a 10 ms GEMM, then notify_dispatch on the
// same stream (it starts when the GEMM ends, at 10,020 us, and runs 100 us); the thread's next call
// comes at 10,110 us, after an idle gap (the count arrived 10 us before the kernel's last barrier
// ended), and launches the dispatch (500 us, at 10,130: 10 us after notify_dispatch). The replay is
// exact (10,610 us). Twice as fast a GEMM: it ends at 5,020, notify_dispatch runs 5,020-5,120, the
// host wakes 90 us after it started (5,110: the measured offset, start -> start), the dispatch
// starts at max(5,110 + 20 us launch, 5,120 + 10 us) = 5,130 and ends at 5,630: a span of 5,610 us.
// Kept as host time, the idle gap would hold the dispatch at 10,130 (10,610 us: no gain).
TEST_CASE("a host that polls a kernel's count waits for that kernel", "[whatif][graph]") {
  const std::string doc = R"J({"traceEvents":[
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":0,"dur":10,"args":{"correlation":1}},
    {"ph":"X","cat":"kernel","name":"gemm_kernel","pid":0,"tid":7,"ts":20,"dur":10000,"args":{"stream":7,"device":0,"correlation":1}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":20,"dur":10,"args":{"correlation":2}},
    {"ph":"X","cat":"kernel","name":"void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)","pid":0,"tid":7,"ts":10020,"dur":100,"args":{"stream":7,"device":0,"correlation":2}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":10110,"dur":10,"args":{"correlation":3}},
    {"ph":"X","cat":"kernel","name":"void deep_ep::intranode::dispatch<8, 768, 8192>(int4*)","pid":0,"tid":7,"ts":10130,"dur":500,"args":{"stream":7,"device":0,"correlation":3}}
  ]})J";
  const std::string f = write_temp(doc, "polled_signal");
  const WhatIfReport same = whatif_of(f, "", {"--unprofile=off", "--scale", "1:name~gemm"});
  CHECK(same.baseline_ns == 10'610'000);
  CHECK(same.predicted_ns == 10'610'000);
  const WhatIfReport fast = whatif_of(f, "", {"--unprofile=off", "--scale", "2:name~gemm"});
  CHECK(fast.predicted_ns == 5'610'000);
}

TEST_CASE("a kernel held on another stream past the inference window waits for that stream's last op, not for its launch",
          "[whatif][graph]") {
  // The host ran ahead (a GPU-bound profile): kernel_b on stream 13 was launched at 20 us, behind a
  // stream wait the trace does not resolve (no stream or event recorded), and started at 1,140 us,
  // 40 us after kernel_a (stream 7, 100 .. 1,100 us) ended: past the 20 us window in which an op on
  // another stream is taken for the event. Kept on its launch, the wait was a 1,120 us delay no
  // faster kernel_a could move (the span stayed 1,140 us); taken as waiting for kernel_a at its
  // measured 40 us, kernel_a twice as fast gives 100 + 500 + 40 + 100 = 740 us: a span of 640 us.
  const std::string p = tmp("held_wait.json");
  std::ofstream(p) << R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "step0", "pid": 1, "tid": 1, "ts": 0, "dur": 1300},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 4, "args": {"correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": 1, "tid": 1, "ts": 15, "dur": 1, "args": {"correlation": 2}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 1, "ts": 17, "dur": 1, "args": {"correlation": 3}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 4, "args": {"correlation": 4}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 30, "dur": 1215, "args": {"correlation": 5}},
    {"ph": "X", "cat": "kernel", "name": "kernel_a", "pid": 0, "tid": 7, "ts": 100, "dur": 1000,
     "args": {"correlation": 1, "stream": 7, "device": 0, "grid": [132, 1, 1], "block": [256, 1, 1]}},
    {"ph": "X", "cat": "kernel", "name": "kernel_b", "pid": 0, "tid": 13, "ts": 1140, "dur": 100,
     "args": {"correlation": 4, "stream": 13, "device": 0, "grid": [132, 1, 1], "block": [256, 1, 1]}}],
    "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "numSms": 132, "computeMajor": 9, "computeMinor": 0}]})";
  const WhatIfReport w = whatif_of(p, "step0", {"--unprofile=off", "--scale", "2:name~kernel_a"});
  INFO("baseline " << w.baseline_ns << " predicted " << w.predicted_ns);
  CHECK(w.baseline_ns == 1'140'000);
  CHECK(w.predicted_ns == Approx(640'000).margin(100));
  std::remove(p.c_str());
}
