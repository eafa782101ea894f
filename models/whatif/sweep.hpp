// The sweep driver: many what-if cases (hardware x scenario) over one shared baseline graph, in
// threads; each case's figure is the GPU span, or the median span of the matching NVTX ranges.
#pragma once
#include <optional>
#include "sim/base/regex.hpp"
#include <string>
#include <vector>

#include "models/whatif/transform.hpp"

namespace bneck {

struct SweepCase {
  std::string hw, scenario, vary_value;
  std::vector<Transform> transforms;
  // results
  TimeNs baseline = 0, predicted = 0;
  TimeNs by_bound[4] = {0, 0, 0, 0};  // predicted device time by bound on the target
  std::string error;
};

// Runs the cases with index % stride == offset (all by default; a distributed sweep gives each
// process its share), errors kept per case. `jobs` 0: one thread per core. Progress on stderr.
void run_sweep(const Trace& t, const std::string& source_hw, const std::optional<Regex>& range, unsigned jobs,
               std::vector<SweepCase>& cases, std::size_t offset = 0, std::size_t stride = 1, bool progress = true);

}  // namespace bneck
