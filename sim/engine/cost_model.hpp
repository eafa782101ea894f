// The interface through which the engine obtains op durations. The engine never names a
// concrete model; models/ implements this (measured replay first; roofline, retargeting later).
#pragma once
#include "sim/graph/graph.hpp"

namespace bneck {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual const char* name() const = 0;
  virtual const char* description() const = 0;
  // Intrinsic duration of node `n`: how long it occupies its lane once started, before any
  // end-to-end dependency (a blocking call waiting for the GPU) extends it.
  virtual TimeNs duration(OpId n, const Graph& g) const = 0;
};

}  // namespace bneck
