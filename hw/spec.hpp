// Hardware specs: GPU, node and cluster, read from JSON whose values carry units ("4.8 TB/s",
// "50 us"), with an `extends` mechanism and a source for every number. Presets are compiled into
// the binary from hw/presets/*.json; `--hw` takes a preset name or a JSON file.
#pragma once
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/base/units.hpp"

namespace bneck {

enum class Dtype : std::uint8_t { FP64 = 0, FP32 = 1, TF32 = 2, BF16 = 3, FP16 = 4, FP8 = 5, INT8 = 6 };
inline constexpr int kDtypeCount = 7;
enum class ComputeUnit : std::uint8_t { Simt = 0, Tensor = 1 };
const char* to_string(Dtype d);
std::optional<Dtype> dtype_from_string(std::string_view s);  // "fp32", "bf16", "float", "half", ...
const char* to_string(ComputeUnit u);
double dtype_bytes(Dtype d);

struct GpuSpec {
  std::string name;
  std::uint32_t sm_count = 0;
  double clock_hz = 0;
  Bytes memory_bytes = 0;
  double memory_bandwidth = 0;  // bytes/s, datasheet
  Bytes l2_bytes = 0;
  double l2_bandwidth = 0;  // bytes/s
  std::uint32_t registers_per_sm = 65536, max_registers_per_thread = 255, register_allocation_unit = 256;
  std::uint32_t warp_allocation_granularity = 4;
  std::uint32_t max_threads_per_sm = 2048, max_blocks_per_sm = 32, max_threads_per_block = 1024, warp_size = 32;
  Bytes shared_memory_per_sm = 0, shared_memory_per_block = 0, reserved_shared_memory_per_block = 0;
  Bytes shared_memory_allocation_unit = 128;
  std::array<std::array<double, 2>, kDtypeCount> peak{};  // [dtype][unit] op/s, dense; 0: unsupported
  TimeNs launch_latency = 0;                              // GPU-side: submission to kernel start on an idle GPU
  TimeNs host_launch_overhead = 0;                        // CPU time of one cudaLaunchKernel
  TimeNs graph_node_latency = 0;                          // gap between consecutive kernels of a CUDA graph
  TimeNs graph_launch_overhead = 0;                       // CPU time of one cudaGraphLaunch
  TimeNs kernel_tail = 0;                                 // fixed per-kernel cost besides the roofline (ramp, drain)
  // Memory-level parallelism: the latency of a loaded HBM access as a thread sees it. With it, a
  // kernel whose occupancy keeps fewer accesses in flight than a full SM's moves its bytes slower
  // (Little's law with queueing, models/kernel_work.hpp). 0: no occupancy effect on memory time.
  TimeNs memory_latency = 0;
  // Cycles between dependent arithmetic instructions of one thread (an FMA chain), at `clock`: the
  // time of a latency-bound loop is its chain length x this / clock.
  double dependent_op_cycles = 4;
  // Bandwidth split during a drain (sim/engine/sharing.hpp): a draining kernel's weight against the
  // kernels taking its SMs (1: even).
  double drain_weight = 1;
  double memory_efficiency = 1;  // achievable fraction of memory_bandwidth (streaming)
  // Achievable fraction of memory_bandwidth by the bytes one thread accesses at once (2, 4, 8, 16);
  // empty: memory_efficiency for every width.
  std::map<Bytes, double> access_efficiency;
  // Calibrated, optional: the same for the bytes written; where empty, writes use
  // access_efficiency. With it, access_efficiency is the effective rate of reads, which can exceed
  // 1 where narrow loads overlap the store stream (effective, not physical; up to 4).
  std::map<Bytes, double> write_efficiency;
  double write_efficiency_for(Bytes width) const {
    if (write_efficiency.empty()) return access_efficiency_for(width);
    auto it = write_efficiency.lower_bound(width);
    if (it == write_efficiency.end()) return std::prev(it)->second;
    return it->second;
  }
  // For a kernel's total bytes when only the total is known: a kernel that reads as much as it
  // writes (harmonic mean of the read and write efficiencies).
  double streaming_efficiency_for(Bytes width) const {
    if (write_efficiency.empty()) return access_efficiency_for(width);
    return 2.0 / (1.0 / access_efficiency_for(width) + 1.0 / write_efficiency_for(width));
  }
  double access_efficiency_for(Bytes width) const {
    if (access_efficiency.empty()) return memory_efficiency;
    auto it = access_efficiency.lower_bound(width);
    if (it == access_efficiency.end()) return std::prev(it)->second;
    return it->second;
  }
  double compute_efficiency = 1;  // achievable fraction of a peak rate
  // Calibrated GEMM fits per precision: time = overhead + FLOPs / (peak x efficiency).
  struct GemmFit {
    TimeNs overhead = 0;  // device-side fixed cost of one GEMM kernel, as traces record it
    double efficiency = 0;
    TimeNs submit = 0;  // what a host-timed call adds (library and launch), microbenchmarks only
  };
  std::map<Dtype, GemmFit> gemm_fit;
  // Measured GEMM efficiency by shape, per precision (an overlay fitted to published kernels): a
  // GEMM of known shape runs at the median efficiency of the `nearest` measured shapes nearest its
  // (log2 batch, log2 output rows, log2 inner, log2 output columns), which carries that GPU's
  // kernel choice, tile padding, wave quantization and split-K as measured. A shape more than two
  // octaves from every sample has no figure (the GemmFit applies).
  struct GemmSurface {
    std::vector<std::array<double, 5>> samples;  // log2 batch, rows, inner, columns; efficiency; sorted by rows
    std::size_t nearest = 7;
    // Who measured it ("source"; empty: unnamed). Surfaces of one source were timed by one program
    // with one library, so the ratio of two of them is one measurement's; two sources' ratio mixes
    // libraries (model_kernel_pair prefers a sibling GPU's one-source pair, models/kernel_work.hpp).
    std::string source;
    std::optional<double> efficiency(double batch, double rows, double inner, double columns) const;
  };
  std::map<Dtype, GemmSurface> gemm_samples;
  // The same for GEMMs whose inner or output dimension is not a multiple of 16 bytes of elements (a
  // vocabulary of 50257): libraries run them on other, often much slower, kernels.
  std::map<Dtype, GemmSurface> gemm_samples_unaligned;
  // Median |error| of the model on held-out kernels per class ("gemm", "memory"), where measured:
  // the error bar a forecast for this GPU carries.
  std::map<std::string, double> held_out_error;
  double peak_of(Dtype d, ComputeUnit u) const { return peak[static_cast<int>(d)][static_cast<int>(u)]; }
  // The best unit for a dtype (tensor cores where they support it).
  ComputeUnit best_unit(Dtype d) const { return peak_of(d, ComputeUnit::Tensor) > 0 ? ComputeUnit::Tensor : ComputeUnit::Simt; }
};

struct NodeSpec {
  std::uint32_t gpus = 1;
  double nvlink_bandwidth = 0;  // bytes/s per GPU, one direction
  TimeNs nvlink_latency = 0;
  std::uint32_t pcie_generation = 0;
  double pcie_bandwidth = 0;  // bytes/s per direction (pinned memory copies)
  // bytes/s both directions together (an H2D beside a D2H); 0: full duplex, each direction its own
  double pcie_bidirectional_bandwidth = 0;
  TimeNs pcie_latency = 0;
  double pageable_bandwidth = 0;  // bytes/s host<->device through a pageable staging buffer
  Bytes pageable_chunk = 0;       // pageable copies up to this size go at the pinned rate
  std::string host;
  // Calibrated copy paths ("h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable", "d2d"):
  // time = latency + bytes / bandwidth (d2d: bytes read plus written), or, where a measured curve
  // is given, piecewise linear between its points (each segment its own latency and bandwidth;
  // past the last point at the last segment's bandwidth). Overrides the link fields.
  struct CopyPath {
    TimeNs latency = 0;
    double bandwidth = 0;
    TimeNs submit = 0;                            // what a host-timed copy adds besides the device-side latency
    std::vector<std::pair<Bytes, TimeNs>> curve;  // (copy size, device time), sizes ascending
  };
  std::map<std::string, CopyPath> copy_paths;
  // Calibrated collectives inside the node (validate/nccl): per kind ("all_reduce", ...), measured
  // on `ranks` GPUs: t = latency x steps(n) / steps(ranks) + S x busfactor(n) / bus_bandwidth, or,
  // where a measured curve is given, the curve's time at S on `ranks` GPUs (piecewise linear: NCCL
  // changes protocol and channel count with the size, which one line cannot follow), its first
  // point's time (the latency) scaled by steps(n) / steps(ranks) and the rest by
  // busfactor(n) / busfactor(ranks).
  struct CollectivePath {
    TimeNs latency = 0;
    double bus_bandwidth = 0;
    std::uint32_t ranks = 0;
    std::vector<std::pair<Bytes, TimeNs>> curve;  // (size per rank, time), sizes ascending
  };
  std::map<std::string, CollectivePath> collectives;
};

struct ClusterSpec {
  std::uint32_t nodes = 1;
  double nic_bandwidth = 0;  // bytes/s per GPU
  TimeNs nic_latency = 0;
};

struct HwSpec {
  std::string name, description;
  std::vector<std::string> chain;  // the preset and the ones it extends, most derived first
  GpuSpec gpu;
  NodeSpec node;
  ClusterSpec cluster;
  nlohmann::json resolved;                     // the merged JSON
  std::map<std::string, std::string> sources;  // field path ("gpu.memory_bandwidth") -> source
  std::string from_trace;                      // non-empty: built from a trace's device properties (what it rests on)
};

// A preset name ("h200-sxm") or a path to a JSON file. Throws InputError naming the file/field.
HwSpec load_hw(const std::string& name_or_path);
// A spec built from a trace's device properties (spec_from_trace_device), loadable by its name for
// the rest of the process (the replay's own roofline names its source GPU).
void remember_trace_spec(const HwSpec& h);
// The GPU to forecast on: a preset name with a calibrated overlay ("h200-sxm" ->
// "h200-sxm-calibrated", made by `bneck calibrate` on that GPU) loads the overlay, since measured
// figures beat the datasheet's; files and other presets load as they are. (For the datasheet alone,
// pass a file that says {"extends": "h200-sxm"}.)
HwSpec load_target_hw(const std::string& name_or_path);
HwSpec parse_hw(const nlohmann::json& j, const std::string& origin);
// A spec given as JSON (no file), `extends` resolved.
HwSpec load_hw_json(const nlohmann::json& j, const std::string& origin);
std::vector<std::string> hw_preset_names();
// The preset whose own `match` terms all occur in the device name (case-insensitive; the one with
// the most terms wins: "NVIDIA H100 PCIe" -> h100-pcie over h100-sxm), or "".
std::string preset_for_device_name(const std::string& device_name);
// The same, preferring its calibrated overlay ("h200-sxm-calibrated") where there is one.
std::string preset_for_device(const std::string& device_name);
const char* hw_preset_text(const std::string& name);  // nullptr if none
// Installed specs (`bneck hw install`, the validate target): $BNECK_HW_DIR, else
// $XDG_DATA_HOME/bneck/hw, else ~/.local/share/bneck/hw. A name resolves there first
// (NAME.json), then among the presets, then as a path; device matching reads their `match` too.
std::string user_hw_dir();
std::vector<std::string> installed_hw_names();           // NAME of each NAME.json there, sorted
std::string installed_hw_path(const std::string& name);  // "" when not installed
// Field paths that carry a number but have no source (empty when every number is sourced).
std::vector<std::string> unsourced_fields(const HwSpec& h);

}  // namespace bneck
