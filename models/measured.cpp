#include "models/measured.hpp"

#include <algorithm>

namespace bneck {

TimeNs MeasuredCostModel::duration(OpId n, const Graph& g) const {
  const Op& o = g.trace->ops[n];
  TimeNs d = o.duration();
  if (const TimeNs* in = g.intrinsic.find(n)) d = *in;  // blocking calls' own time; collective members' part after the last arrival
  // Ops that overlapped others in the trace: their time alone (sharing calibration).
  return std::max<TimeNs>(0, d - g.lost_to_sharing(n));
}

}  // namespace bneck
