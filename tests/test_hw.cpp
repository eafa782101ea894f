// hw/: the GPU presets (every number sourced, extends resolved, errors named) and the measured
// GEMM efficiency surfaces of the calibrated overlays (hand-computed).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "models/kernel_work.hpp"
#include "sim/base/error.hpp"
#include "tools/views/replay_view.hpp"

using namespace bneck;
using namespace bneck::test;

TEST_CASE("hardware presets: every number sourced, extends resolved, errors named", "[hw]") {
  auto names = hw_preset_names();
  for (const char* want : {"h200-sxm", "h100-sxm", "h100-pcie", "a100-sxm-80gb", "b200", "l40s", "rtx3090", "rtx2080ti", "v100-sxm2",
                           "hypothetical-120tf-2tbs"})
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  for (const auto& n : names) {
    INFO(n);
    HwSpec h = load_hw(n);
    CHECK(unsourced_fields(h).empty());
    CHECK(h.gpu.sm_count > 0);
    CHECK(h.gpu.peak_of(Dtype::FP32, ComputeUnit::Simt) > 0);
  }
  HwSpec h200 = load_hw("h200-sxm");
  CHECK(h200.chain == std::vector<std::string>{"h200-sxm", "h100-sxm"});
  CHECK(h200.gpu.memory_bandwidth == Approx(4.8e12));                             // its own
  CHECK(h200.gpu.peak_of(Dtype::BF16, ComputeUnit::Tensor) == Approx(989.4e12));  // inherited
  CHECK(h200.gpu.l2_bytes == 62914560);
  // An H800 is an H100 SXM5 with FP64 at 1 TFLOP/s and NVLink at 400 GB/s both ways (200 each).
  HwSpec h800 = load_hw("h800-sxm");
  CHECK(h800.gpu.peak_of(Dtype::BF16, ComputeUnit::Tensor) == Approx(989.4e12));
  CHECK(h800.gpu.peak_of(Dtype::FP64, ComputeUnit::Simt) == Approx(1e12));
  CHECK(h800.node.nvlink_bandwidth == Approx(200e9));
  CHECK_THROWS_WITH(load_hw("h300-imaginary"), Catch::Contains("no such hardware preset"));
  // Device names find their preset through the presets' own `match` terms (the most specific wins).
  CHECK(preset_for_device_name("NVIDIA H200") == "h200-sxm");
  CHECK(preset_for_device_name("NVIDIA H100 PCIe") == "h100-pcie");
  CHECK(preset_for_device_name("NVIDIA H100 80GB HBM3") == "h100-sxm");
  CHECK(preset_for_device_name("NVIDIA GeForce RTX 2080 Ti") == "rtx2080ti");
  CHECK(preset_for_device_name("Tesla V100-SXM2-32GB") == "v100-sxm2");
  // The names NeuSight's and other public traces record, each to its own preset (a term is a token:
  // "a10" is not inside "A100", "l4" not inside "L40S", "h200" not inside "GH200").
  CHECK(preset_for_device_name("NVIDIA A100-PCIE-40GB") == "a100-pcie-40gb");
  CHECK(preset_for_device_name("NVIDIA A100 80GB PCIe") == "a100-pcie-80gb");
  CHECK(preset_for_device_name("NVIDIA A100-SXM4-80GB") == "a100-sxm-80gb");
  CHECK(preset_for_device_name("Tesla V100-PCIE-32GB") == "v100-pcie-32gb");
  CHECK(preset_for_device_name("NVIDIA L4") == "l4");
  CHECK(preset_for_device_name("NVIDIA L40S") == "l40s");
  CHECK(preset_for_device_name("Tesla T4") == "t4");
  CHECK(preset_for_device_name("Tesla P100-PCIE-16GB") == "p100-pcie-16gb");
  CHECK(preset_for_device_name("NVIDIA A10") == "a10");
  CHECK(preset_for_device_name("NVIDIA GeForce RTX 4090") == "rtx4090");
  CHECK(preset_for_device_name("NVIDIA H100 NVL") == "h100-nvl");
  CHECK(preset_for_device_name("NVIDIA GH200 480GB") == "gh200");
  CHECK(preset_for_device_name("NVIDIA H800") == "h800-sxm");  // DeepSeek's published profiles
  CHECK(preset_for_device_name("AMD Instinct MI300X").empty());
  CHECK(preset_for_device("NVIDIA H200") == "h200-sxm-calibrated");
  nlohmann::json bad = nlohmann::json::parse(
      R"({"name": "x", "gpu": {"sm_count": 10, "memory_bandwidth": "fast", "peak": {"fp32": {"simt": "1 TFLOP/s"}}}})");
  CHECK_THROWS_WITH(parse_hw(bad, "x.json"), Catch::Contains("x.json") && Catch::Contains("gpu.memory_bandwidth"));
  // A GEMM surface names who measured it (a string), which a precision change's ratio compares.
  nlohmann::json src = nlohmann::json::parse(
      R"({"name": "x", "extends": "h100-sxm", "gpu": {"gemm_samples": {"fp32": {"source": "my sweep", "rows": [[0, 10, 10, 10, 0.7]]},
          "tf32": {"source": 7, "rows": [[0, 10, 10, 10, 0.7]]}}}})");
  CHECK_THROWS_WITH(load_hw_json(src, "x.json"), Catch::Contains("gpu.gemm_samples.tf32.source"));
  src["gpu"]["gemm_samples"]["tf32"]["source"] = "my sweep";
  CHECK(load_hw_json(src, "x.json").gpu.gemm_samples.at(Dtype::TF32).source == "my sweep");
  CHECK(load_hw("h100-sxm-calibrated").gpu.gemm_samples.at(Dtype::FP32).source == "NeuSight");
  CHECK(load_hw("h100-sxm-calibrated").gpu.gemm_samples.at(Dtype::BF16).source == "Vidur");
}

TEST_CASE("a GEMM surface: the median efficiency of the nearest measured shapes, none far from all", "[hw][cross_gpu]") {
  // Four samples (log2 batch, rows, inner, columns, efficiency); nearest 3. A 1024 x 1024 x 1024
  // GEMM is (0, 10, 10, 10): distances^2 0 (0.8), 1 (0.6), 3 (0.4) and 27 (0.1): the median of the
  // three nearest, 0.6. A shape more than two octaves (distance^2 > 4) from every sample has none.
  GpuSpec::GemmSurface s;
  s.nearest = 3;
  s.samples = {{0, 7, 7, 7, 0.1}, {0, 9, 9, 9, 0.4}, {0, 10, 10, 10, 0.8}, {0, 11, 10, 10, 0.6}};
  REQUIRE(s.efficiency(1, 1024, 1024, 1024).has_value());
  CHECK(*s.efficiency(1, 1024, 1024, 1024) == Approx(0.6));
  CHECK_FALSE(s.efficiency(1, 1 << 14, 1 << 14, 1 << 14).has_value());  // 9 + 16 + 16 from (11, 10, 10) at the nearest
  CHECK_FALSE(s.efficiency(8, 1024, 1024, 1024).has_value());           // a batch of 8: 3^2 from every sample
  // In a kernel: 2 x 1024^3 FLOP at 0.6 of a 10 TFLOP/s FP32 peak = 357.9 us.
  HwSpec hw = load_target_hw("h100-sxm");
  hw.gpu.gemm_samples = {{Dtype::FP32, s}};
  hw.gpu.kernel_tail = 0;
  hw.gpu.gemm_fit.clear();
  hw.gpu.peak[static_cast<int>(Dtype::FP32)][static_cast<int>(ComputeUnit::Simt)] = 10e12;
  KernelWork w;
  w.cls = KernelClass::Gemm;
  w.flops = 2.0 * 1024 * 1024 * 1024;
  w.bytes = 3.0 * 4 * 1024 * 1024;
  w.out_rows = w.out_cols = 1024;
  CHECK(model_kernel(nullptr, w, hw).time_ns == Approx(2.0 * 1024 * 1024 * 1024 / (10e12 * 0.6) * 1e9).margin(2));
  // Output columns of 1023 (not a multiple of 4 fp32 elements, 16 bytes): the unaligned surface where
  // the GPU has one (one sample at 0.2: 2 x 1024 x 1024 x 1023 FLOP at 2 TFLOP/s = 1,072.7 us), the
  // aligned one where it has none. 1020 columns are aligned.
  GpuSpec::GemmSurface u;
  u.nearest = 1;
  u.samples = {{0, 10, 10, 10, 0.2}};
  KernelWork odd = w;
  odd.out_cols = 1023;
  odd.flops = 2.0 * 1024 * 1024 * 1023;
  CHECK(model_kernel(nullptr, odd, hw).time_ns == Approx(odd.flops / (10e12 * 0.6) * 1e9).margin(2));
  hw.gpu.gemm_samples_unaligned = {{Dtype::FP32, u}};
  CHECK(model_kernel(nullptr, odd, hw).time_ns == Approx(odd.flops / (10e12 * 0.2) * 1e9).margin(2));
  KernelWork even = w;
  even.out_cols = 1020;
  even.flops = 2.0 * 1024 * 1024 * 1020;
  CHECK(model_kernel(nullptr, even, hw).time_ns == Approx(even.flops / (10e12 * 0.6) * 1e9).margin(2));
}
