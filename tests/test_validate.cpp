// Calibration on the committed H200 measurements (validate/reference/h200/measurements.json).
#include <catch2/catch.hpp>
#include <fstream>
#include <unistd.h>

#include "helpers.hpp"
#include "sim/base/error.hpp"
#include "validate/calibrate.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {
std::string reference() { return source_dir() + "/validate/reference/h200/measurements.json"; }
}

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
  CHECK(r.p90_error <= 0.15);
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
  Measurements m = load_measurements(reference());
  Calibration c = calibrate(m, "h200-sxm", "h200-sxm-calibrated");
  std::ifstream in(source_dir() + "/hw/calibrated/h200-sxm-calibrated.json");
  REQUIRE(in);
  auto committed = nlohmann::json::parse(in);
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
