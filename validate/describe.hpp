// A microbenchmark described as the ops it ran, so that the accuracy report times it through the
// replay's own models and engine (one model code path, docs/design.md):
// - each kernel is a trace op with its launch geometry (grid, block, shared memory) and its work
//   (FLOPs, bytes read and written, access width, memory level, precision and unit), timed by
//   models/kernel_work.hpp's model_kernel as `replay --durations model` times a trace's kernels;
// - each copy is a copy op with its path, timed by the transfer model;
// - each launch is a host call lasting the spec's host_launch_overhead (a cuBLAS call: its
//   calibrated `submit`), its kernel starting launch_latency after the call began;
// - a CUDA-graph launch goes through the `--cuda-graph` what-if transform;
// - the engine schedules the ops; the measurement's window (what CUDA events, the host clock or
//   CUPTI saw) is read off the simulated schedule.
// Families with nothing to describe yet (tiled_gemm) return nullopt.
#pragma once
#include <optional>

#include "models/kernel_work.hpp"
#include "validate/calibrate.hpp"

namespace bneck {

struct MicrobenchWorkload {
  enum class Window : std::uint8_t {
    Events,  // first host call's start to the last device op's end (CUDA events around the calls)
    Host,    // first host call's start to the last one's end (a host clock around the calls)
    Device,  // the device ops alone (CUPTI)
  };
  Trace trace;                       // finalized; op durations are the models' times
  std::vector<KernelWork> work;      // per op
  std::vector<TimeNs> launch_delay;  // per op: a device op starts this long after its call began
  Window window = Window::Events;
  double per = 1;           // the measurement is the window divided by this (repeats in one timing)
  bool cuda_graph = false;  // the calls are captured into one CUDA graph
};

// The workload of measurement `m` on `hw`, or nullopt when no description exists for its family.
std::optional<MicrobenchWorkload> describe_microbenchmark(const Measurement& m, const HwSpec& hw);

// The simulated time (ns) of the workload's measurement window on `hw`.
double simulate_microbenchmark(const MicrobenchWorkload& w, const HwSpec& hw);

// The factor by which the launch geometry `describe_microbenchmark` gives a GEMM stretches its math
// time on `g` (wave quantization; what calibrate() fits the GEMM efficiency against).
double gemm_grid_factor(const Measurement& m, const GpuSpec& g);

}  // namespace bneck
