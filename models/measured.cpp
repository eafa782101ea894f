#include "models/measured.hpp"

namespace bneck {

TimeNs MeasuredCostModel::duration(OpId n, const Graph& g) const {
  const Op& o = g.trace->ops[n];
  if (!g.intrinsic.empty()) {  // blocking calls' own time; collective members' part after the last arrival
    auto it = g.intrinsic.find(n);
    if (it != g.intrinsic.end()) return it->second;
  }
  return o.duration();
}

}  // namespace bneck
