#pragma once
// FP8 recipes of the precision what-if (--precision fp8-tensor | fp8-row | fp8-block) and what they
// share with the autocast recipe.
#include <memory>
#include <string>
#include <vector>

#include "models/whatif/transform.hpp"

namespace bneck {

// The thread that launches the trace's first kernel: the forward's (autograd runs the backward's
// GEMMs on a thread of its own).
LaneId forward_lane(const Trace& t);
// A kernel launched from another thread than the forward's: the trace holds a backward pass.
bool has_backward(const Trace& t);

// The precision recipe the trace already runs, from its kernels weighted by time: "fp32", "tf32",
// "autocast-bf16" (bf16 GEMMs, fp32 norms and softmax), "bf16" (the whole model), "fp8 GEMMs", ...
std::string recipe_in_use(const Trace& t, const WorkTable& work);
// Refuses (InputError naming the trace) a precision the forecast's GPU has no math for: fp8 on an
// A100 or MI210, bf16 on a V100 or T4, TF32 before Ampere. `what` is the transform as given.
void require_math(const Trace& t, const GpuSpec& g, Dtype d, const std::string& what);

// scaling: "tensor", "row" or "block"; sel: the ops it applies to (empty: all); host: host time of
// one quantization kernel's launch.
std::unique_ptr<TransformStep> make_fp8_step(const std::string& scaling, std::string sel, TimeNs host);

// --precision autocast-bf16 / autocast-fp16 (autocast.cpp): dtype the lower precision, sel the ops
// it applies to, host a cast's host time (negative: the measured default).
std::unique_ptr<TransformStep> make_autocast_step(Dtype dtype, std::string sel, TimeNs host);

}  // namespace bneck
