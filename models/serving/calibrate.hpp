// Calibrating the step cost model from a trace of the real engine (and the log of its requests).
//
// The trace (nsys or Kineto) must mark each engine step: an NVTX/record_function range whose name
// starts with "forward" and carries the step's shape as key=value pairs ("forward q=512 kv=3119
// seqs=11 qkv=..."; q, kv and seqs are required), optionally inside a range "step" with sibling
// ranges "prepare" (before) and "update" (after). validate/workloads/serving.py shows how to add
// them to an engine (a few lines around its step functions). From each step bneck takes:
//   - gpu: the summed duration of the kernels and copies launched inside the forward range;
//     fitted to the hardware-model features (llm.hpp) by non-negative least squares, once with the
//     attention counted per sequence and once over the packed batch; the better fit wins;
//   - launch: from the forward's start to the end of its last launch call (the host's work to
//     issue the forward), fitted to [1, seqs, q]; lag (forward start to first kernel) and tail
//     (last launch to the forward's end) as medians; kernels per step as the median count;
//   - prepare and update: the durations of those ranges, fitted to [1, seqs, q, kv] and [1, seqs].
// Then the request log: the simulation of its requests with the fitted model is compared with its
// measured inter-token latency, and every host term is scaled so the two medians agree
// (host_scale). A log from the traced run itself gives a scale near 1; a log of the same requests
// served without the profiler removes the profiler's overhead (40 % of each step under Nsight
// Systems on the H200 machine here).
#pragma once
#include <string>
#include <vector>

#include "models/serving/serve.hpp"
#include "traces/ir.hpp"

namespace bneck::serve {

struct CalibrationReport {
  std::size_t steps = 0;
  double gpu_rms_ns = 0, launch_rms_ns = 0, prepare_rms_ns = 0;
  double measured_itl_ms = 0, simulated_itl_ms = 0;  // the log's median inter-token latency, after scaling
};

// Fits `model` (from hardware_step_model) to the trace's engine steps. Throws InputError naming the
// trace if it has no step ranges.
CalibrationReport calibrate_step_model(const Trace& trace, StepCostModel& model);

// Scales the host terms so the simulated median inter-token latency of `log` matches its measured one.
void fit_host_scale(const std::vector<Request>& log, const EngineConfig& eng, StepCostModel& model, CalibrationReport& rep,
                    const std::string& log_path);

}  // namespace bneck::serve
