// Model card: measured replay.
// Captures: each op takes exactly the time the trace measured (end - start); a blocking call that
//   waited for the GPU takes its wake-up time (see sim/graph/graph.hpp), so that it returns as
//   soon as the awaited work allows. Hand-written workloads give durations directly.
// Equation: duration(op) = op.end - op.start, or Graph::intrinsic[op] for calls that blocked.
// Valid: replaying the run that was traced; the baseline every other model is compared with.
// Source: the trace itself.
#pragma once
#include "sim/engine/cost_model.hpp"

namespace bneck {

class MeasuredCostModel : public CostModel {
 public:
  const char* name() const override { return "measured"; }
  const char* description() const override { return "replays the durations the trace measured"; }
  TimeNs duration(OpId n, const Graph& g) const override;
};

}  // namespace bneck
