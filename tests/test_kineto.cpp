// PyTorch profiler (Kineto) import, multi-rank traces and collectives.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>

#include "helpers.hpp"
#include "sim/base/error.hpp"
#include "traces/collectives.hpp"
#include "traces/importer.hpp"
#include "traces/kineto/kineto_importer.hpp"
#include "models/collective.hpp"
#include "tools/views/replay_view.hpp"
#include "tools/views/whatif_view.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {

std::string tmp(const std::string& name) { return "/tmp/bneck_kineto_" + std::to_string(::getpid()) + "_" + name; }

// One rank of a data-parallel step: a GEMM of `gemm_us`, then an all-reduce on the same stream
// that ends at `end_us` (when the last rank arrived plus 500 us of transfer).
// With `comm_stream` != 7 the all-reduce runs on its own stream, launched at `launch_us`.
std::string rank_trace(int rank, double gemm_us, double end_us, int comm_stream = 7, double launch_us = 20) {
  const double k0 = 10;  // kernels start 10 us after their launch
  const double n0 = comm_stream == 7 ? k0 + gemm_us : launch_us + 10;
  nlohmann::json ev = nlohmann::json::array();
  auto api = [&](const char* name, double ts, double dur, int corr) {
    ev.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", name}, {"pid", 100 + rank}, {"tid", 100 + rank}, {"ts", ts}, {"dur", dur},
                  {"args", {{"correlation", corr}}}});
  };
  auto kernel = [&](const std::string& name, double ts, double dur, int corr, int stream) {
    ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", name}, {"pid", 0}, {"tid", stream}, {"ts", ts}, {"dur", dur},
                  {"args", {{"correlation", corr}, {"device", 0}, {"stream", stream}, {"grid", {132, 1, 1}}, {"block", {256, 1, 1}}}}});
  };
  ev.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#1"}, {"pid", 100 + rank}, {"tid", 100 + rank}, {"ts", 0},
                {"dur", end_us + 50}});
  ev.push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "record_param_comms"}, {"pid", 100 + rank}, {"tid", 100 + rank}, {"ts", launch_us - 1},
                {"dur", 15}, {"args", {{"Collective name", "allreduce"}, {"In msg nelems", 1048576}, {"Out msg nelems", 1048576},
                                       {"dtype", "Float"}, {"Process Group Name", "0"}, {"Process Group Ranks", "[0, 1]"}, {"Group size", 2}}}});
  api("cudaLaunchKernel", 0, 5, 1);
  api("cudaLaunchKernel", launch_us, 5, 2);
  api("cudaDeviceSynchronize", launch_us + 10, end_us + 10 - (launch_us + 10), 3);
  kernel("gemm_rank" + std::to_string(rank), k0, gemm_us, 1, 7);
  kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", n0, end_us - n0, 2, comm_stream);
  nlohmann::json j = {{"schemaVersion", 1},
                      {"deviceProperties", {{{"id", 0}, {"name", "NVIDIA H200"}, {"numSms", 132}}}},
                      {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
                      {"traceEvents", ev}};
  std::string path = tmp("rank" + std::to_string(rank) + ".json");
  std::ofstream(path) << j.dump();
  return path;
}

}  // namespace

TEST_CASE("Kineto timestamps: float microseconds to integer nanoseconds from the text", "[kineto]") {
  CHECK(kineto_us_to_ns("1694128201427784") == 1'694'128'201'427'784'000);
  // 16 significant digits: a double would round the last one.
  CHECK(kineto_us_to_ns("5080223672997.205") == 5'080'223'672'997'205);
  CHECK(kineto_us_to_ns("0.5") == 500);
  CHECK(kineto_us_to_ns("12.0004") == 12'000);  // below a nanosecond: rounded
  CHECK(kineto_us_to_ns("12.0005") == 12'001);
  CHECK(kineto_us_to_ns("1.5e3") == 1'500'000);
  CHECK_THROWS_AS(kineto_us_to_ns("12a"), InputError);
}

TEST_CASE("two ranks joined by an all-reduce: the collective ends when the last rank arrived", "[kineto][collectives]") {
  // Rank 0 computes 1 ms, rank 1 3 ms; the all-reduce moves data for 0.5 ms after rank 1 arrives at
  // 3.010 ms, so both end at 3.510 ms and rank 0 waits 2 ms inside its NCCL kernel.
  std::string r0 = rank_trace(0, 1000, 3510), r1 = rank_trace(1, 3000, 3510);
  Trace t = load_traces({r0, r1});
  REQUIRE(t.processes.size() == 2);
  REQUIRE(t.collectives.size() == 1);
  const Collective& c = t.collectives[0];
  CHECK(c.kind == CollKind::AllReduce);
  CHECK(c.bytes == 4 * 1048576);  // In msg nelems x 4-byte Float
  CHECK(c.group_size == 2);
  CHECK(c.members.size() == 2);
  ReplayReport rep = run_replay(t, ReplayOptions{});
  REQUIRE(rep.simulated_ranks.size() == 2);
  for (int r = 0; r < 2; ++r) {
    CHECK(rep.measured_ranks[r].span.length() == 3'500'000);  // 10 us .. 3.510 ms
    CHECK(rep.simulated_ranks[r].span.length() == 3'500'000);
  }
  CHECK(rep.simulated_ranks[0].waited_ns == 2'000'000);  // arrived at 1.010 ms, the last at 3.010 ms
  CHECK(rep.simulated_ranks[1].last_arrivals == 1);
  REQUIRE(rep.waits.size() == 1);
  CHECK(rep.waits[0].straggler == 1);
  // The critical path crosses from rank 0's all-reduce to rank 1's GEMM.
  std::set<std::uint32_t> ranks;
  for (OpId o : rep.critical_path) ranks.insert(t.rank_of(t.ops[o]));
  CHECK(ranks.size() == 2);
  // What if rank 1's GEMM ran 3x faster (1 ms)? Both arrive at 1.010 ms and end at 1.510 ms; rank 0's
  // 2 ms of waiting disappears. Amdahl on summed device time would promise less.
  WhatIfOptions wo;
  wo.transforms = {parse_transform("scale", "3:name~gemm_rank1")};
  WhatIfReport w = run_whatif(t, wo);
  CHECK(w.baseline.length() == 3'500'000);
  CHECK(w.predicted.length() == 1'500'000);
  // --scale on collectives halves the part after the last arrival: 3.010 + 0.25 ms.
  wo.transforms = {parse_transform("scale", "2:kind=collective")};
  CHECK(run_whatif(t, wo).predicted.length() == 3'250'000);
  // What if the same step ran on 8 ranks (weak scaling)? Only the 0.5 ms after the last arrival
  // scales, by the collective model's 8-rank over 2-rank time for the 4 MiB all-reduce: the span is
  // 3.0 ms (to the arrival) + 0.5 ms x t8 / t2.
  wo.transforms = {parse_transform("ranks", "8")};
  WhatIfReport w8 = run_whatif(t, wo);
  HwSpec h = load_target_hw("h200-sxm");
  double t2 = static_cast<double>(collective_time(h, CollKind::AllReduce, 4 << 20, 2).time_ns);
  double t8 = static_cast<double>(collective_time(h, CollKind::AllReduce, 4 << 20, 8).time_ns);
  CHECK(t8 > t2);
  CHECK(static_cast<double>(w8.predicted.length()) == Approx(3'000'000 + 500'000 * t8 / t2).margin(2));
  std::remove(r0.c_str());
  std::remove(r1.c_str());
}

TEST_CASE("overlap-comm what-if: an all-reduce launched late starts when its input is ready", "[kineto][collectives][whatif]") {
  // Both ranks: a 1 ms GEMM (10 us .. 1.010 ms), then the host launches the all-reduce on its own
  // stream at 2 ms; it starts at 2.010 ms and moves data for 0.5 ms: 2.510 ms. Started when its
  // input (the GEMM) is ready instead, it runs 1.010 .. 1.510 ms: the span drops from 2.5 to 1.5 ms.
  std::string r0 = rank_trace(0, 1000, 2510, 20, 2000), r1 = rank_trace(1, 1000, 2510, 20, 2000);
  Trace t = load_traces({r0, r1});
  REQUIRE(t.collectives.size() == 1);
  WhatIfOptions wo;
  wo.transforms = {parse_transform("overlap-comm", "")};
  WhatIfReport w = run_whatif(t, wo);
  CHECK(w.baseline.length() == 2'500'000);
  CHECK(w.predicted.length() == 1'500'000);
  // A faster link (the collective model's hybrid ratio) only shortens the 0.5 ms after arrival.
  std::remove(r0.c_str());
  std::remove(r1.c_str());
}

TEST_CASE("collective model: nccl-tests' bus factors and the alpha-beta time", "[models][collectives]") {
  // nccl-tests: busbw = algbw x 2(n-1)/n for AllReduce, (n-1)/n for AllGather, 1 for Broadcast.
  CHECK(bus_factor(CollKind::AllReduce, 8) == Approx(1.75));
  CHECK(bus_factor(CollKind::AllGather, 8) == Approx(0.875));
  CHECK(bus_factor(CollKind::Broadcast, 8) == Approx(1.0));
  HwSpec h = load_hw("h100-sxm");  // NVLink 450 GB/s per GPU and direction, 2 us per step, 8 GPUs a node
  // 1 GiB AllReduce on 8 ranks, ring: 14 steps x 2 us = 28 us, + 1.75 x 1073741824 B / 450 GB/s =
  // 4.175600 ms, + the kernel tail.
  CollectiveEstimate e = collective_time(h, CollKind::AllReduce, 1ull << 30, 8);
  CHECK(e.algorithm == "ring");
  CHECK(e.link == "nvlink");
  CHECK(e.time_ns == Approx(28'000 + 4'175'662 + h.gpu.kernel_tail).margin(2));
  // 8 bytes: latency-bound; tree: 2 x log2(8) = 6 steps x 2 us = 12 us beats the ring's 28 us.
  CollectiveEstimate s = collective_time(h, CollKind::AllReduce, 8, 8);
  CHECK(s.algorithm == "tree");
  CHECK(s.latency_ns == 12'000);
  // 16 ranks do not fit in a node of 8: the NIC (50 GB/s, 5 us) bounds the ring.
  CollectiveEstimate x = collective_time(h, CollKind::AllGather, 1ull << 30, 16);
  CHECK(x.link == "nic");
  CHECK(x.link_bandwidth == Approx(50e9));
}

TEST_CASE("ranks traced on different clocks are aligned on their collectives", "[kineto][collectives]") {
  // Three all-reduces per rank; rank 1's clock runs 5 s ahead. Each all-reduce k: both ranks launch at
  // 1000 k us, rank 0's starts at 1000 k + 10 us, rank 1's at 1000 k + 210 us (it computes longer),
  // both end at 1000 k + 700 us on the true clock.
  auto make = [&](int rank, double shift_us) {
    nlohmann::json ev = nlohmann::json::array();
    for (int k = 0; k < 3; ++k) {
      double t0 = 1000.0 * k + shift_us, start = t0 + (rank ? 210 : 10), end = t0 + 700;
      ev.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 1 + rank}, {"tid", 1}, {"ts", t0}, {"dur", 5},
                    {"args", {{"correlation", k + 1}}}});
      ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "ncclKernel_AllReduce_RING_LL_Sum_float"}, {"pid", 0}, {"tid", 20},
                    {"ts", start}, {"dur", end - start}, {"args", {{"correlation", k + 1}, {"device", 0}, {"stream", 20}}}});
    }
    nlohmann::json j = {{"distributedInfo", {{"rank", rank}, {"world_size", 2}}}, {"traceEvents", ev}};
    std::string path = tmp("clock" + std::to_string(rank) + ".json");
    std::ofstream(path) << j.dump();
    return path;
  };
  std::string a = make(0, 0), b = make(1, 5e6);
  Trace t = load_traces({a, b});
  REQUIRE(t.collectives.size() == 3);
  CHECK(t.anomalies.count("merge: rank clocks aligned on their collectives' ends") == 1);
  ReplayReport rep = run_replay(t, ReplayOptions{});
  // Aligned: every collective waited 200 us for rank 1, and the replay reproduces the spans.
  REQUIRE(rep.waits.size() == 3);
  for (const auto& w : rep.waits) {
    CHECK(w.straggler == 1);
    CHECK(w.arrival_spread_ns == 200'000);
  }
  CHECK(rep.simulated.length() == rep.measured.length());
  CHECK(rep.measured.length() == 2'690'000);  // 10 us .. 2700 us
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST_CASE("Kineto input errors name the file and the place", "[kineto][errors]") {
  std::string good = rank_trace(0, 100, 700);
  std::ifstream in(good);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string cut = tmp("cut.json");
  std::ofstream(cut) << text.substr(0, text.size() / 2);
  CHECK_THROWS_WITH(load_trace(cut), Catch::Contains(cut) && Catch::Contains("malformed JSON at byte"));
  // A gzip file cut short.
  std::string gz = tmp("t.json.gz");
  {
    gzFile f = gzopen(gz.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
  }
  std::ifstream gin(gz, std::ios::binary);
  std::string gtext((std::istreambuf_iterator<char>(gin)), std::istreambuf_iterator<char>());
  Trace ok = load_trace(gz);  // the whole gzip file imports as the plain one does
  CHECK(ok.ops.size() == load_trace(good).ops.size());
  std::string gcut = tmp("cut.json.gz");
  std::ofstream(gcut, std::ios::binary) << gtext.substr(0, gtext.size() * 2 / 3);
  CHECK_THROWS_WITH(load_trace(gcut), Catch::Contains(gcut));
  // Valid JSON that is no Kineto trace.
  std::string other = tmp("other.json");
  std::ofstream(other) << R"({"schemaVersion": 1, "something": []})";
  CHECK_THROWS_WITH(load_trace(other), Catch::Contains(other) && Catch::Contains("traceEvents"));
  // A timestamp that is not a number.
  std::string badts = tmp("badts.json");
  std::ofstream(badts) << R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon", "dur": 1}]})";
  CHECK_THROWS_WITH(load_trace(badts), Catch::Contains(badts) && Catch::Contains("event 1"));
  for (const auto& f : {good, cut, gz, gcut, other, badts}) std::remove(f.c_str());
}

TEST_CASE("canonical kernel names agree across nsys and Kineto spellings", "[kineto]") {
  CHECK(canonical_kernel_name("void at::native::vectorized_elementwise_kernel<(int)4, at::native::<unnamed>::f>(int, float)") ==
        canonical_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::f>(int, float)"));
  CHECK(canonical_kernel_name("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int)") ==
        "at::native::anon::vectorized_layer_norm_kernel");
  CHECK(canonical_kernel_name("Memset (Device)") == "memset");
  CHECK(canonical_kernel_name("memset") == "memset");
  CHECK(canonical_kernel_name("Memcpy DtoD (Device -> Device)") == "memcpy DtoD");
}

TEST_CASE("every Kineto and Chakra trace in ../shared imports", "[kineto][shared]") {
  const std::string k = shared_dir() + "/traces/kineto/";
  for (const char* f : {"hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz",
                        "hta/nccl_parser_config/nccl_data.json.gz", "hta/df_index_resolver/df_index_resolver.json.gz",
                        "hta/negative_queue_length_values_check/rank0.json.gz", "hta/trace_diff/control/control.json.gz",
                        "hta/trace_diff/test/test.json.gz", "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
                        "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
                        "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
                        "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
                        "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
                        "hta/execution_trace/benchmark_simple_add_trace.json.gz", "hta/triton_example/triton_example.json.gz",
                        "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", "param_single_gpu_rtx2080ti/linear_kineto.json.gz",
                        "param_single_gpu_rtx2080ti/resnet_kineto.json.gz"}) {
    INFO(f);
    Trace t;
    REQUIRE_NOTHROW(t = load_trace(k + f));
    CHECK(t.device_op_count() > 0);
    ReplayReport rep = run_replay(t, ReplayOptions{});
    double e = std::fabs(static_cast<double>(rep.simulated.length() - rep.measured.length())) / static_cast<double>(std::max<TimeNs>(1, rep.measured.length()));
    CHECK(e <= 0.02);
  }
}

TEST_CASE("the 8-rank DLRM step: every rank's span within 2 %, all collectives matched", "[kineto][shared][collectives]") {
  Trace t = load_traces({shared_dir() + "/traces/kineto/param_dlrm_8rank_v100/dlrm_kineto"});
  REQUIRE(t.processes.size() == 8);
  // Per rank 5 all_to_all (SendRecv kernels) and 3 all_reduce: 8 collectives of 8 members.
  REQUIRE(t.collectives.size() == 8);
  std::map<CollKind, int> kinds;
  for (const auto& c : t.collectives) {
    CHECK(c.members.size() == 8);
    kinds[c.kind]++;
    CHECK(c.bytes > 0);
  }
  CHECK(kinds[CollKind::AllToAll] == 5);
  CHECK(kinds[CollKind::AllReduce] == 3);
  ReplayReport rep = run_replay(t, ReplayOptions{});
  REQUIRE(rep.simulated_ranks.size() == 8);
  for (std::size_t r = 0; r < 8; ++r) {
    INFO("rank " << r);
    const auto& m = rep.measured_ranks[r];
    const auto& s = rep.simulated_ranks[r];
    CHECK(m.rank == r);
    CHECK(std::fabs(static_cast<double>(s.span.length() - m.span.length())) <= 0.02 * static_cast<double>(m.span.length()));
    CHECK(s.collectives == 8);
    CHECK(s.overlap.communication_ns > 0);
    CHECK(s.overlap.compute_ns > 0);
    CHECK(s.overlap.exposed_communication_ns <= s.overlap.communication_ns);
  }
  // The spans the README lists: 13-20 ms per rank.
  CHECK(rep.measured_ranks[0].span.length() == 13'009'000);
  // The critical path runs through a collective into the rank everyone waited for.
  std::set<std::uint32_t> ranks;
  for (OpId o : rep.critical_path) ranks.insert(t.rank_of(t.ops[o]));
  CHECK(ranks.size() >= 2);
}

TEST_CASE("block_fp32 from Kineto: step spans within 1 %, the same critical path as its nsys export", "[kineto][shared]") {
  Trace k = load_trace(h200("block_fp32.kineto.json.gz"));
  ReplayOptions opt;
  opt.range_regex = "step.*";
  ReplayReport rk = run_replay(k, opt);
  // Measured step spans (../shared/traces/h200/README.md): 109.64 / 109.52 / 109.56 ms.
  const double want[] = {109.64e6, 109.52e6, 109.56e6};
  REQUIRE(rk.ranges.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(rk.ranges[i].name);
    CHECK(std::fabs(static_cast<double>(rk.ranges[i].measured_span_ns) - want[i]) <= 0.0005 * want[i]);
    CHECK(std::fabs(static_cast<double>(rk.ranges[i].simulated_span_ns) - want[i]) <= 0.01 * want[i]);
  }
  // The nsys export of the same workload (a separate run): its step1's critical path has the same
  // device ops in the same order, once names are spelled alike.
  Trace n = load_trace(h200("block_fp32.sqlite"));
  opt.range_regex = "step1";
  ReplayReport rn = run_replay(n, opt);
  opt.range_regex = "step1";
  ReplayReport rk1 = run_replay(k, opt);
  auto device_path = [](const Trace& t, const std::vector<OpId>& p) {
    std::vector<std::string> v;
    for (OpId o : p)
      if (is_device_op(t.ops[o].kind)) v.push_back(canonical_kernel_name(t.name(t.ops[o])));
    return v;
  };
  REQUIRE(rn.ranges.size() == 1);
  REQUIRE(rk1.ranges.size() == 1);
  auto a = device_path(n, rn.ranges[0].critical_path), b = device_path(k, rk1.ranges[0].critical_path);
  CHECK(a.size() > 100);
  CHECK(a == b);
  // Model mode from the profiler's Input Dims: within 15 % of the measured steps (3.97 % here).
  ReplayOptions mo;
  mo.range_regex = "step.*";
  mo.hw = "h200-sxm";
  mo.durations = "model";
  mo.durations_explicit = true;
  ReplayReport rm = run_replay(k, mo);
  REQUIRE(rm.ranges.size() == 3);
  for (const auto& r : rm.ranges)
    CHECK(std::fabs(static_cast<double>(r.simulated_span_ns - r.measured_span_ns)) <= 0.15 * static_cast<double>(r.measured_span_ns));
}

TEST_CASE("Kineto Input Dims: a tensor list gives one shape per tensor", "[kineto]") {
  std::string p = tmp("dims.json");
  std::ofstream(p) << R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::_foreach_add_", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
     "args": {"Input Dims": [[[2048, 2048], [2048]], [[2048, 2048], [2048]]], "Input type": ["TensorList", "TensorList"]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20, "dur": 10,
     "args": {"Input Dims": [[64, 128], [128, 32]], "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 21, "dur": 2, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 25, "dur": 3, "args": {"correlation": 1, "stream": 7, "device": 0}}]})";
  Trace t = load_trace(p);
  std::vector<std::string> names;
  for (const auto& r : t.ranges) names.push_back(t.strings.str(r.name));
  CHECK(std::find(names.begin(), names.end(), "aten::_foreach_add_, sizes = [[2048, 2048], [2048], [2048, 2048], [2048]]") != names.end());
  CHECK(std::find(names.begin(), names.end(), "aten::mm, sizes = [[64, 128], [128, 32]]") != names.end());
  std::remove(p.c_str());
}

TEST_CASE("HTA's critical-path golden test: the same GPU ops, and the runtime calls explained", "[kineto][shared][critical]") {
  const std::string dir = shared_dir() + "/traces/kineto/hta/critical_path/end_to_end/simple_add";
  Trace t = load_trace(dir + "/input/trace.json.gz");
  ReplayReport rep = run_replay(t, ReplayOptions{});
  // HTA's expected output marks its critical events with args.critical.
  gzFile f = gzopen((dir + "/output/overlaid_critical_path_trace.json.gz").c_str(), "rb");
  REQUIRE(f);
  std::string text;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  auto j = nlohmann::json::parse(text);
  std::set<std::pair<std::string, TimeNs>> hta_dev, hta_api, ours_dev, ours_api;
  for (const auto& e : j["traceEvents"]) {
    if (!e.contains("args") || !e["args"].contains("critical") || e.value("ph", "") != "X") continue;
    std::string cat = e.value("cat", "");
    auto key = std::make_pair(e["name"].get<std::string>(), static_cast<TimeNs>(std::llround(e["ts"].get<double>())));
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") hta_dev.insert(key);
    if (cat == "cuda_runtime" || cat == "cuda_driver") hta_api.insert(key);
  }
  TimeNs first_gpu = rep.measured.begin, last_gpu = rep.measured.end;
  for (OpId o : rep.critical_path) {
    auto key = std::make_pair(t.name(t.ops[o]), t.ops[o].start / 1000);
    (is_device_op(t.ops[o].kind) ? ours_dev : ours_api).insert(key);
  }
  // GPU ops: identical (22: 16 copies, 5 kernels, 1 memset).
  CHECK(hta_dev.size() == 22);
  CHECK(ours_dev == hta_dev);
  // Runtime calls: every one of HTA's inside bneck's window (first to last GPU op; HTA's path also
  // covers the host work before and after it) is on bneck's path too. bneck's path has more: HTA's
  // graph walks cpu_op nodes and drops runtime calls that neither launch nor synchronize
  // (cudaDeviceGetAttribute, cudaStreamWaitEvent ...), which bneck keeps in host order.
  std::size_t inside = 0, common = 0;
  for (const auto& k : hta_api) {
    if (k.second * 1000 < first_gpu - 1000 || k.second * 1000 > last_gpu) continue;
    ++inside;
    common += ours_api.count(k);
  }
  CHECK(inside >= 230);
  CHECK(common == inside);
}

namespace {
// Protobuf wire format by hand: a varint, and a length-delimited field.
std::string varint(std::uint64_t v) {
  std::string s;
  do {
    unsigned char c = v & 0x7F;
    v >>= 7;
    s += static_cast<char>(c | (v ? 0x80 : 0));
  } while (v);
  return s;
}
std::string field_varint(int f, std::uint64_t v) { return varint(static_cast<std::uint64_t>(f) << 3) + varint(v); }
std::string field_bytes(int f, const std::string& b) { return varint((static_cast<std::uint64_t>(f) << 3) | 2) + varint(b.size()) + b; }
std::string et_node(std::uint64_t id, const std::string& name, int type, std::vector<std::uint64_t> data, std::uint64_t us, bool cpu) {
  std::string n = field_varint(1, id) + field_bytes(2, name) + field_varint(3, static_cast<std::uint64_t>(type));
  std::string packed;
  for (auto d : data) packed += varint(d);
  if (!data.empty()) n += field_bytes(5, packed);
  n += field_varint(7, us);
  n += field_bytes(10, field_bytes(1, "is_cpu_op") + field_varint(7, cpu ? 1 : 0));  // int32_val
  return varint(n.size()) + n;
}
}  // namespace

TEST_CASE("Chakra execution traces: JSON and protobuf nodes replay by their dependencies", "[chakra]") {
  // A CPU op (300 us) feeds a GPU GEMM (40 us) and a CPU c10d op (80 us); an all-reduce (25 us) needs
  // both. Independent CPU op 9 (500 us) runs beside them (the host runs any number at once). GPU span:
  // GEMM 300..340 us, all-reduce after the c10d op at 380 us .. 405 us: 105 us; the whole run ends at
  // 500 us (op 9).
  const char* json_text = R"({"workload_graph": [
    {"Id": 1, "Name": "aten::cat", "NodeType": 4, "runtime": 300, "data_deps": [], "is_cpu_op": true},
    {"Id": 2, "Name": "sm90_gemm", "NodeType": 4, "runtime": 40, "data_deps": [1], "is_cpu_op": false},
    {"Id": 3, "Name": "c10d::allreduce_", "NodeType": 7, "runtime": 80, "data_deps": [1], "is_cpu_op": true},
    {"Id": 4, "Name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "NodeType": 7, "runtime": 25, "data_deps": [2, 3], "is_cpu_op": false},
    {"Id": 9, "Name": "dataloader", "NodeType": 4, "runtime": 500, "data_deps": [], "is_cpu_op": true}]})";
  std::string jp = tmp("chakra.json");
  std::ofstream(jp) << json_text;
  std::string ep = tmp("chakra.0.et");
  {
    std::string meta = field_bytes(1, "0.0.4");
    std::ofstream f(ep, std::ios::binary);
    f << varint(meta.size()) << meta << et_node(1, "aten::cat", 4, {}, 300, true) << et_node(2, "sm90_gemm", 4, {1}, 40, false)
      << et_node(3, "c10d::allreduce_", 7, {1}, 80, true) << et_node(4, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7, {2, 3}, 25, false)
      << et_node(9, "dataloader", 4, {}, 500, true);
  }
  for (const auto& p : {jp, ep}) {
    INFO(p);
    Trace t = load_trace(p);
    CHECK(!t.measured);
    auto r = replay(std::move(t));
    TimeNs gpu_begin = std::numeric_limits<TimeNs>::max(), gpu_end = 0, end = 0;
    for (OpId i = 0; i < r.trace.ops.size(); ++i) {
      end = std::max(end, r.sim.end[i]);
      if (!is_device_op(r.trace.ops[i].kind)) continue;
      gpu_begin = std::min(gpu_begin, r.sim.start[i]);
      gpu_end = std::max(gpu_end, r.sim.end[i]);
    }
    CHECK(gpu_begin == 300'000);
    CHECK(gpu_end == 405'000);
    CHECK(end == 500'000);
    Overlap ov = compute_overlap(r.graph, sim_schedule(r.sim));
    CHECK(ov.communication_ns == 25'000);
  }
  // A cut protobuf names the file and the byte.
  std::string cut = tmp("cut.et");
  {
    std::ifstream in(ep, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << all.substr(0, all.size() - 7);
  }
  CHECK_THROWS_WITH(load_trace(cut), Catch::Contains(cut) && Catch::Contains("byte"));
  for (const auto& f : {jp, ep, cut}) std::remove(f.c_str());
}

TEST_CASE("the Chakra and PyTorch execution traces of ../shared import", "[chakra][shared]") {
  // chakra's test data: the same graph as JSON and as protobuf; both replay to the same span.
  std::string dir = tmp("chakra_tests");
  std::string cmd = "mkdir -p '" + dir + "' && tar xzf '" + shared_dir() + "/traces/chakra/mlcommons_chakra_tests/json_trace.tar.gz' -C '" + dir +
                    "' && tar xzf '" + shared_dir() + "/traces/chakra/mlcommons_chakra_tests/feeder_tests_trace.tar.gz' -C '" + dir + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto span = [](const std::string& p) {
    auto r = replay(load_trace(p));
    TimeNs e = 0;
    for (OpId i = 0; i < r.trace.ops.size(); ++i) e = std::max(e, r.sim.end[i]);
    return std::make_pair(r.trace.ops.size(), e);
  };
  auto js = span(dir + "/jsonData/chakra.0.json");
  auto pb = span(dir + "/tests/data/chakra.0.et");
  CHECK(js.first == 3664);
  CHECK(pb.first == 3664);
  CHECK(std::fabs(static_cast<double>(js.second - pb.second)) <= 0.001 * static_cast<double>(js.second));
  CHECK(span(dir + "/jsonData/small_chakra.0.json").first == 7);
  std::system(("rm -rf '" + dir + "'").c_str());
  // PyTorch execution traces: operators and their tensor dependencies (no durations in them).
  for (const char* f : {"/traces/chakra/param_pytorch_et/resnet_1gpu_et.json.gz", "/traces/chakra/param_pytorch_et/resnet_2gpu_et.json.gz",
                        "/traces/chakra/param_pytorch_et/resnet_et.json.gz", "/traces/kineto/param_dlrm_8rank_v100/dlrm_pytorch_et/dlrm_eg_0.json",
                        "/traces/kineto/hta/execution_trace/benchmark_simple_add_et.json.gz",
                        "/traces/kineto/param_single_gpu_rtx2080ti/linear_et.json.gz"}) {
    INFO(f);
    Trace t = load_trace(shared_dir() + f);
    CHECK(t.ops.size() > 10);
    CHECK(t.deps.size() > 0);
    CHECK(t.format.rfind("pytorch-et", 0) == 0);
  }
}
