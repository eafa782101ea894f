// Calibration on the committed H200 measurements (validate/reference/h200/measurements.json).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "helpers.hpp"
#include "sim/base/error.hpp"
#include "models/collective.hpp"
#include "validate/calibrate.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {
std::string reference() { return source_dir() + "/validate/reference/h200/measurements.json"; }
}  // namespace

TEST_CASE("calibration on the H200 measurements predicts the held-out half", "[validate]") {
  Measurements m = load_measurements(reference());
  REQUIRE(m.items.size() > 150);
  std::size_t train = 0;
  for (const auto& x : m.items) train += x.train;
  CHECK(train * 2 >= m.items.size() - 10);  // about half
  Calibration c = calibrate(m, "h200-sxm", "h200-sxm-calibrated");
  // The overlay `extends` its base: load it through a file, as users do.
  std::string path = "/tmp/bneck_test_overlay_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << c.overlay.dump();
  HwSpec cal = load_hw(path);
  std::remove(path.c_str());
  CHECK(unsourced_fields(cal).empty());
  AccuracyReport r = accuracy(m, cal);
  INFO("median " << r.median_error << " p90 " << r.p90_error << " held out " << r.held_out);
  CHECK(r.held_out > 60);
  CHECK(r.median_error <= 0.05);
  // Every prediction runs through the replay's models and engine (validate/describe.hpp). The 90th
  // percentile is set by CUDA-graph launches of empty kernels (launch/graph_gpu, about 2x): the
  // engine charges each node the kernel tail plus the graph node gap, both calibrated to the same
  // 749 ns slope (the empty kernel's own device time is not measured yet).
  CHECK(r.p90_error <= 0.25);
  for (const auto& f : r.families) {
    INFO(f.family << " median " << f.median);
    if (f.family == "stream" || f.family == "fused") CHECK(f.median <= 0.02);
    if (f.family == "launch" || f.family == "memcpy" || f.family == "l2") CHECK(f.median <= 0.05);
  }
  // Plausible against what this H200 showed: D2D about 4.3 TB/s (read + written), bf16 8192^3
  // GEMMs about 770-800 TFLOP/s.
  auto d2d = cal.node.copy_paths.at("d2d");
  CHECK(d2d.bandwidth > 3.9e12);
  CHECK(d2d.bandwidth < 4.6e12);
  auto bf16 = cal.gpu.gemm_fit.at(Dtype::BF16);
  double rate = bf16.efficiency * cal.gpu.peak_of(Dtype::BF16, ComputeUnit::Tensor);
  CHECK(rate > 740e12);
  CHECK(rate < 840e12);
}

TEST_CASE("the committed calibrated overlay is what calibrate writes from the committed measurements", "[validate]") {
  // The single-GPU suite and NCCL collectives on two H200s (the validate target on nvidia-h200-x2).
  Measurements m =
      load_measurements(std::vector<std::string>{reference(), source_dir() + "/validate/reference/h200/collectives_2gpu.json"});
  Calibration c = calibrate(m, "h200-sxm", "h200-sxm-calibrated");
  std::ifstream in(source_dir() + "/hw/calibrated/h200-sxm-calibrated.json");
  REQUIRE(in);
  auto committed = nlohmann::json::parse(in);
  // gpu.gemm_samples: GEMM shapes measured apart (validate/reference/h200/gemm), merged into the
  // overlay by its fit_gemm.py after calibration.
  REQUIRE(committed["gpu"].contains("gemm_samples"));
  committed["gpu"].erase("gemm_samples");
  committed["gpu"].erase("gemm_samples_unaligned");
  CHECK(committed["gpu"] == c.overlay["gpu"]);
  CHECK(committed["node"] == c.overlay["node"]);
  // And an H200 trace's GPU resolves to it by default.
  CHECK(load_hw("h200-sxm-calibrated").chain.front() == "h200-sxm-calibrated");
}

TEST_CASE("malformed measurements are rejected naming the file", "[validate][errors]") {
  std::string path = "/tmp/bneck_bad_meas_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << R"({"format": "bneck-measurements", "measurements": [{"family": "stream"}]})";
  CHECK_THROWS_WITH(load_measurements(path), Catch::Contains(path) && Catch::Contains("measurements[0]"));
  std::ofstream(path) << R"({"something": 1})";
  CHECK_THROWS_WITH(load_measurements(path), Catch::Contains("not a bneck-measurements file"));
  std::remove(path.c_str());
}

TEST_CASE("collective calibration recovers latency and bus bandwidth from NCCL measurements", "[validate][collectives]") {
  // Synthetic all_reduce on 8 GPUs: t = 20 us + S x 1.75 / 360 GB/s, S = 8 B .. 1 GiB in x4 steps.
  nlohmann::json ms = {{"format", "bneck-measurements"}, {"version", 1}, {"device", {{"name", "NVIDIA H200"}, {"gpus", 8}}}};
  nlohmann::json items = nlohmann::json::array();
  for (double s = 8; s <= 1073741824.0; s *= 4)
    items.push_back({{"family", "collective"},
                     {"name", "all_reduce"},
                     {"kind", "all_reduce"},
                     {"ranks", 8},
                     {"size", s},
                     {"bytes", s},
                     {"flops", 0},
                     {"time_ns", 20000.0 + s * 1.75 / 360e9 * 1e9},
                     {"repeats", 11}});
  ms["measurements"] = items;
  std::string path = "/tmp/bneck_test_coll_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << ms.dump();
  Measurements m = load_measurements(path);
  Calibration c = calibrate(m, "h200-sxm", "h200-sxm-calibrated");
  REQUIRE(c.overlay["node"].contains("collectives"));
  auto ar = c.overlay["node"]["collectives"]["all_reduce"];
  CHECK(parse_duration(ar["latency"].get<std::string>()) == Approx(20000).margin(2));
  CHECK(parse_bandwidth(ar["bus_bandwidth"].get<std::string>()) == Approx(360e9).epsilon(1e-3));
  CHECK(ar["ranks"] == 8);
  std::ofstream(path) << c.overlay.dump();
  HwSpec cal = load_hw(path);
  std::remove(path.c_str());
  // 256 MiB on 8 GPUs: 20 us + 268435456 x 1.75 / 360 GB/s = 20 us + 1.304894 ms (held out: 4^k x 8 B
  // sizes alternate between the halves).
  CollectiveEstimate e = collective_time(cal, CollKind::AllReduce, 268435456, 8);
  CHECK(e.algorithm == "calibrated");
  CHECK(e.time_ns == Approx(20000 + 1304894).margin(3));
  // On 4 GPUs the latency scales with the ring's steps (6 of 14): 8.571 us + S x 1.5 / 360 GB/s.
  CHECK(collective_time(cal, CollKind::AllReduce, 268435456, 4).time_ns == Approx(8571 + 1118481).margin(3));
}

TEST_CASE("repeated runs of one configuration share a half, and the copy curve takes their median", "[validate]") {
  // h2d_pinned, device-timed, sizes 1, 4, 16, 64 MiB, two runs each: the training half is sizes 1 and
  // 16 MiB (both runs), the held-out half 4 and 64 MiB. Curve points: the median (here the mean) of
  // the two runs: 1 MiB (20 + 24) / 2 = 22 us, 16 MiB (300 + 310) / 2 = 305 us.
  nlohmann::json items = nlohmann::json::array();
  const double sizes[] = {1 << 20, 4 << 20, 16 << 20, 64 << 20};
  const double run_a[] = {20000, 80000, 300000, 1200000}, run_b[] = {24000, 78000, 310000, 1220000};
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 4; ++i)
      items.push_back({{"family", "memcpy"},
                       {"name", "h2d_pinned"},
                       {"path", "h2d_pinned"},
                       {"size", sizes[i]},
                       {"bytes", sizes[i]},
                       {"event_ns", 1e9},
                       {"device_records", 21},
                       {"flops", 0},
                       {"time_ns", r ? run_b[i] : run_a[i]},
                       {"repeats", 21}});
  nlohmann::json ms = {{"format", "bneck-measurements"}, {"version", 1}, {"device", {{"name", "NVIDIA H200"}}}, {"measurements", items}};
  std::string path = "/tmp/bneck_test_runs_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << ms.dump();
  Measurements m = load_measurements(path);
  std::remove(path.c_str());
  for (const auto& x : m.items) {
    double s = x.params["size"].get<double>();
    CHECK(x.train == (s == (1 << 20) || s == (16 << 20)));
  }
  Calibration c = calibrate(m, "h200-sxm", "h200-sxm-calibrated");
  auto curve = c.overlay["node"]["copy_paths"]["h2d_pinned"]["curve"];
  REQUIRE(curve.size() == 2);
  CHECK(curve[0][1] == "22000 ns");
  CHECK(curve[1][1] == "305000 ns");
}

TEST_CASE("microbenchmarks are timed through the replay's models and engine (hand-computed)", "[validate][describe]") {
  // A GPU of round numbers: 1 TB/s, 16-byte reads at half of it and writes at all of it; a launch
  // call takes the host 4 us, a kernel starts 5 us after its call began and costs 1 us besides
  // its roofline time.
  HwSpec hw = load_hw_json(nlohmann::json::parse(R"({"name": "round", "extends": "h100-sxm",
    "gpu": {"memory_bandwidth": "1 TB/s", "memory_efficiency": 1, "access_efficiency": {"16 B": 0.5}, "write_efficiency": {"16 B": 1.0},
            "launch_latency": "5 us", "host_launch_overhead": "4 us", "kernel_tail": "1 us",
            "clock": "2 GHz", "dependent_op_cycles": 4, "memory_latency": "1 us"},
    "sources": {"gpu": "test"}})"),
                           "round");
  auto measure = [](const char* family, const char* name, nlohmann::json params) {
    Measurement m;
    m.family = family;
    m.name = name;
    m.params = std::move(params);
    m.bytes = m.params.value("bytes", 0.0);
    m.time_ns = 1;
    return m;
  };
  // Copy of 1 GB with 16-byte accesses: 1 GB read at 0.5 TB/s (2 ms) + 1 GB written at 1 TB/s
  // (1 ms) + the tail (1 us), seen by events from the call: + 5 us of launch latency.
  Measurement copy =
      measure("stream", "copy_f32x4", {{"width_bytes", 16}, {"array_bytes", 1e9}, {"bytes", 2e9}, {"blocks", 244141}, {"threads", 256}});
  CHECK(predict(copy, hw) == Approx(3006000).margin(2));
  // Four chained kernels of 100 MB read + 100 MB written each (0.2 + 0.1 ms + 1 us = 301 us): the
  // host launches them 4 us apart, each waits for the one before: 5 us + 4 x 301 us = 1209 us.
  Measurement chain = measure("fused", "chain4", {{"width_bytes", 16}, {"elems", 2.5e7}, {"kernels", 4}, {"bytes", 8e8}});
  CHECK(predict(chain, hw) == Approx(1209000).margin(4));
  // Ten empty kernels: the host clock sees 10 calls of 4 us; events see the last kernel start
  // 5 us after the tenth call began (at 36 us) and end 1 us later.
  CHECK(predict(measure("launch", "eager_host", {{"kernels", 10}}), hw) == Approx(40000));
  CHECK(predict(measure("launch", "eager_gpu", {{"kernels", 10}}), hw) == Approx(42000));
  // Spin kernels (8 blocks of 64 threads, chains of 200,000 dependent FMAs): 200,000 x 4 cycles at
  // 2 GHz = 400 us + the tail = 401 us each (their 205 MFLOP take 3 us of math; they move no bytes,
  // so they do not share HBM, and 8 x 8 small blocks fit the SMs together). Kernel k is launched
  // at 4k us and may start 5 us later. On 2 streams each stream runs 4 in turn: stream 1's last
  // (k = 7) starts when k = 5 ends, 9 + 3 x 401 = 1212 us, and ends at 1613 us.
  Measurement spin2 = measure("concurrency", "spin_8_kernels", {{"streams", 2}, {"kernels", 8}});
  CHECK(predict(spin2, hw) == Approx(1613000).margin(4));
  // On 8 streams all run side by side: the last starts at 28 + 5 = 33 us and ends at 434 us.
  CHECK(predict(measure("concurrency", "spin_8_kernels", {{"streams", 8}, {"kernels", 8}}), hw) == Approx(434000).margin(4));
  // Occupancy: a copy of 100 MB (16-byte accesses, 256 threads a block) with 100 KiB of shared
  // memory a block holds 2 blocks (512 threads) per SM: 228 KiB / (100 + 1 KiB). Memory time at
  // full occupancy: 100 MB read at 0.5 TB/s + 100 MB written at 1 TB/s = 300 us. In flight: 132 SMs
  // x threads x 16 B; x = 1 TB/s x 1 us x 0.5 (reads) / in flight: 0.1156 at 2048 threads, 0.4624
  // at 512; factor sqrt(1 + 0.4624^2) / sqrt(1 + 0.1156^2) = 1.10173 / 1.00666 = 1.09445:
  // 328.3 us + 1 us tail + 5 us launch = 334.3 us.
  Measurement low = measure("occupancy", "copy_f32x4_smem",
                            {{"smem_kib", 100}, {"threads", 256}, {"width_bytes", 16}, {"array_bytes", 1e8}, {"bytes", 2e8}});
  CHECK(predict(low, hw) == Approx(334335).epsilon(0.0005));
  // At full occupancy (no shared memory) the factor is 1: 300 + 1 + 5 us.
  Measurement full = measure("occupancy", "copy_f32x4_smem",
                             {{"smem_kib", 0}, {"threads", 256}, {"width_bytes", 16}, {"array_bytes", 1e8}, {"bytes", 2e8}});
  CHECK(predict(full, hw) == Approx(306000).margin(4));
  // A family with no description yet.
  CHECK(predict(measure("tiled_gemm", "tiled_sgemm", {{"tile", 16}}), hw) < 0);
}
