// The interface through which the engine obtains op durations. The engine never names a
// concrete model; models/ implements this (measured replay, roofline, retargeting).
#pragma once
#include <cmath>

#include "sim/graph/graph.hpp"

namespace bneck {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual const char* name() const = 0;
  virtual const char* description() const = 0;
  // Intrinsic duration of trace op `n` (a node whose DurationSource is Op): how long it occupies
  // its lane once started, before any end-to-end dependency (a blocking call waiting for the GPU)
  // extends it.
  virtual TimeNs duration(OpId n, const Graph& g) const = 0;
};

// A node's intrinsic duration by its DurationSource: removed nodes take no time, fixed ones their
// fixed time, clones and splits the model's time of their origin op times their work fraction,
// trace nodes the model's time.
inline TimeNs node_duration(const CostModel& m, const Graph& g, NodeId n) {
  if (g.removed(n)) return 0;
  const SideInfo* sp = g.side_of(n);
  if (!sp) return m.duration(n, g);
  const SideInfo& s = *sp;
  switch (s.source) {
    case DurationSource::Fixed: return s.fixed_ns;
    case DurationSource::Origin: {
      OpId o = g.origin(n);
      if (o == kNone) return 0;
      return static_cast<TimeNs>(std::llround(static_cast<double>(m.duration(o, g)) * s.work_fraction));
    }
    case DurationSource::Op: break;
  }
  return m.duration(n, g);
}

}  // namespace bneck
