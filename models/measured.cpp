#include "models/measured.hpp"

namespace bneck {

TimeNs MeasuredCostModel::duration(OpId n, const Graph& g) const {
  const Op& o = g.trace->ops[n];
  if (!g.alone.empty()) {  // overlapped ops: their time alone (sharing calibration)
    auto it = g.alone.find(n);
    if (it != g.alone.end()) return it->second;
  }
  if (!g.intrinsic.empty()) {  // blocking calls' own time; collective members' part after the last arrival
    auto it = g.intrinsic.find(n);
    if (it != g.intrinsic.end()) return it->second;
  }
  return o.duration();
}

}  // namespace bneck
