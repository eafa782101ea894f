// The what-if view: baseline and predicted replays side by side, per range, with the naive Amdahl
// forecast for --scale, what moved onto and off the critical path, and the ops whose slack changed.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/whatif/run.hpp"
#include "tools/views/replay_view.hpp"

namespace bneck {

void print_whatif_text(const WhatIfReport& r, const WhatIfOptions& opt, std::ostream& out);
nlohmann::json whatif_json(const WhatIfReport& r);
// {"low_ns", "high_ns", "basis": [reasons, the largest first]} (whatif, advise)
nlohmann::json error_bar_json(const ErrorBar& b);
void write_whatif_chrome_trace(const WhatIfReport& r, std::ostream& out);

}  // namespace bneck
