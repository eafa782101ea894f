// Order statistics, one rule for all of bneck: the q-quantile by linear interpolation between the
// closest ranks (numpy's default, and what `vllm bench serve` reports): position q x (n - 1) in the
// sorted values. The median is the 0.5-quantile (the mean of the middle two of an even count).
#pragma once
#include <vector>

#include "sim/base/units.hpp"

namespace bneck {

double quantile(std::vector<double> v, double q);  // q in [0, 1]; 0 for no values
TimeNs quantile(std::vector<TimeNs> v, double q);  // rounded to the nearest nanosecond

}  // namespace bneck
