// Calibration of the hardware model from measured microbenchmarks, and the accuracy report.
//
// Each (family, name) group is sorted by size; even positions are the training half, odd ones the
// held-out half (repeated runs of one configuration share a position; their median is fitted). calibrate() fits on the training half only
// (Eigen least squares, relative residuals) and writes an overlay that `extends` the base preset:
//   stream    -> gpu.kernel_tail and gpu.access_efficiency per access width (t = tail + bytes / (BW e_w))
//   l2        -> gpu.l2_bandwidth
//   gemm      -> gpu.gemm_fit per precision (t = overhead + FLOPs / (peak e))
//   launch    -> gpu.host_launch_overhead, gpu.graph_node_latency
//   memcpy    -> node.copy_paths (t = latency + bytes / bandwidth per path)
// strided, fused and reduction are not fitted: the models (coalescing sectors, fusion bytes, the
// stream efficiencies) must explain them. predict() is the model's time for a measurement.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hw/spec.hpp"

namespace bneck {

struct Measurement {
  std::string family, name;
  nlohmann::json params;
  double bytes = 0, flops = 0, time_ns = 0;
  bool train = false;
};

struct Measurements {
  std::string source;
  nlohmann::json device;
  nlohmann::json stability;  // the run's reference copy at its start and end (bneck_validate), if recorded
  std::vector<Measurement> items;
};

// The size a measurement's group is ordered by (array bytes, copy size, GEMM m, elements, ...).
double measurement_size(const Measurement& m);

// Throws InputError naming the file and record on malformed input.
Measurements load_measurements(const std::string& path);
// Several files (e.g. the single-GPU suite and the NCCL collectives) as one set.
Measurements load_measurements(const std::vector<std::string>& paths);

struct Calibration {
  nlohmann::json overlay;        // a spec file extending the base preset
  std::vector<std::string> log;  // what was fitted, with residuals
};
Calibration calibrate(const Measurements& m, const std::string& base_preset, const std::string& overlay_name);

// The model's time (ns) for a measurement on `hw`; < 0 if the model has nothing for it.
double predict(const Measurement& m, const HwSpec& hw);

struct FamilyStats {
  std::string family;
  std::size_t n = 0, held_out = 0;
  double mape = 0, median = 0, p90 = 0;  // over the held-out measurements, fractions
  bool modelled = true;                  // false: measured, but no model predicts it yet
};
struct AccuracyReport {
  std::vector<double> predicted;  // per measurement
  std::vector<FamilyStats> families;
  double median_error = 0, p90_error = 0;  // held-out, fractions
  std::size_t held_out = 0;
};
AccuracyReport accuracy(const Measurements& m, const HwSpec& hw);

}  // namespace bneck
