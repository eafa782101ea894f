// bneck structure TRACE... [--json FILE] [--limit N]: the repeating units of a run, found from the
// trace alone (sim/analysis/structure.hpp); each level is usable as --range @LEVEL.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "sim/analysis/structure.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "tools/trace_options.hpp"
#include "tools/views/structure_view.hpp"

namespace bneck {

void add_structure(CLI::App& sub, Action& action) {
  static std::vector<std::string> trace;
  static std::string json_out;
  static std::size_t limit = 20;
  sub.add_option("TRACE", trace, "trace file(s); several files (or a directory) = one trace per rank")->required();
  sub.add_option("--json", json_out, "write the levels and every instance as JSON to FILE ('-' for stdout)");
  sub.add_option("--limit", limit, "instances listed per level in the text view")->capture_default_str();
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.callback([&action] {
    action = [] {
      auto t0 = std::chrono::steady_clock::now();
      Trace t = load_with_options(trace, topt);
      auto t1 = std::chrono::steady_clock::now();
      Structure s = find_structure(t);
      auto t2 = std::chrono::steady_clock::now();
      if (!json_out.empty()) {
        nlohmann::json j = structure_json(s, true);
        j["timing_s"] = {{"import", std::chrono::duration<double>(t1 - t0).count()},
                         {"structure", std::chrono::duration<double>(t2 - t1).count()}};
        write_output(json_out, [&](std::ostream& o) { o << json_text(j, 1) << "\n"; });
      }
      if (json_out != "-") print_structure_text(s, std::cout, limit);
      return 0;
    };
  });
}

}  // namespace bneck
