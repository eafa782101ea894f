// Diffusion pipeline budget: latency = K x T_denoiser + T_fixed, from a trace's ranges.
//
// A generation is a range matching GEN_REGEX; its denoiser steps are the ranges matching
// STEP_REGEX inside it (same thread). On the GPU's timeline each step lasts from its first device
// op's start to the next step's (the last step: to its last device op's end), so a host-bound step
// counts its launch gaps and a GPU-bound one its queue; the steps add up to the denoising stretch.
// The generation's total is from its range's start to the later of its end and its last device
// op's end; the fixed part is the rest: by stage, each direct child range of the generation that
// holds no step, its device ops' span outside the denoising stretch, its GPU busy time (union of
// its device ops) and its host time (its range); what no stage covers is "other (host, gaps)".
#pragma once
#include <string>
#include <vector>

#include "traces/ir.hpp"

namespace bneck {

struct PipelineStage {
  std::string name;
  TimeNs ns = 0;        // on the timeline, outside the steps
  TimeNs gpu_busy = 0;  // union of its device ops
  TimeNs host_ns = 0;   // its range's duration on the host (0 for "other")
};

struct GenerationBudget {
  std::string name;
  std::size_t range = 0;
  std::vector<TimeNs> step_ns;
  TimeNs denoiser_step_ns = 0;  // median step
  TimeNs steps_total_ns = 0;    // the denoising stretch
  TimeNs fixed_ns = 0, total_ns = 0;
  TimeNs gpu_busy_ns = 0;  // the generation's device ops (union)
  std::vector<PipelineStage> stages;
  // K x median step + fixed over the total, minus 1.
  double formula_error() const {
    return total_ns > 0 ? (static_cast<double>(step_ns.size()) * static_cast<double>(denoiser_step_ns) + static_cast<double>(fixed_ns)) /
                                  static_cast<double>(total_ns) -
                              1
                        : 0;
  }
};

// Throws InputError naming the trace if no generation matches or one holds no step.
std::vector<GenerationBudget> pipeline_budget(const Trace& t, const std::string& gen_regex, const std::string& step_regex);

}  // namespace bneck
