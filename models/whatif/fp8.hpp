#pragma once
// FP8 recipes of the precision what-if (--precision fp8-tensor | fp8-row | fp8-block) and what they
// share with the autocast recipe.
#include <memory>
#include <string>

#include "models/whatif/transform.hpp"

namespace bneck {

// The thread that launches the trace's first kernel: the forward's (autograd runs the backward's
// GEMMs on a thread of its own).
LaneId forward_lane(const Trace& t);

// scaling: "tensor", "row" or "block"; sel: the ops it applies to (empty: all); host: host time of
// one quantization kernel's launch.
std::unique_ptr<TransformStep> make_fp8_step(const std::string& scaling, std::string sel, TimeNs host);

}  // namespace bneck
