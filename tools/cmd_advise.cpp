// bneck advise TRACE... [--range R] [--json FILE]: what holds the run back and what to change,
// ranked by forecast (models/advise.hpp).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "models/advise.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "tools/trace_options.hpp"
#include "tools/views/advise_view.hpp"

namespace bneck {

void add_advise(CLI::App& sub, Action& action) {
  static std::vector<std::string> trace;
  static std::string json_out, range, source_hw, sharing = "on";
  sub.add_option("TRACE", trace, "trace file(s); several files (or a directory) = one trace per rank")->required();
  sub.add_option("--range", range, "judge by the median span of the NVTX (or @LEVEL) ranges matching REGEX");
  sub.add_option("--json", json_out, "write the advice as JSON to FILE ('-' for stdout)");
  sub.add_option("--source-hw", source_hw, "the trace's GPU (preset or spec file) if its device name does not tell");
  sub.add_option("--sharing", sharing, "on|off: concurrent device ops share their GPU")->capture_default_str();
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.callback([&action] {
    action = [] {
      Trace t = load_with_options(trace, topt);
      if (said_no_device_work(t, "advise on", json_out)) return 0;
      AdviseOptions o;
      if (!range.empty()) {
        add_structure_ranges_if_named(t, range);
        o.range_regex = range;
      }
      o.source_hw = source_hw;
      if (sharing != "on" && sharing != "off") throw InputError("--sharing " + sharing + ": expected on or off");
      o.sharing = sharing == "on";
      const Advice a = advise(t, o);
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& out) { out << json_text(advice_json(a), 1) << "\n"; });
      if (json_out != "-") print_advice_text(a, t.source, std::cout);
      return 0;
    };
  });
}

}  // namespace bneck
