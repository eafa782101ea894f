// bneck advise TRACE... [--range R | --whole-run] [--json FILE] [--window-ops N]: what holds the run back and what to change,
// ranked by forecast (models/advise.hpp).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>

#include "models/advise.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "tools/trace_options.hpp"
#include "traces/window.hpp"
#include "tools/views/advise_view.hpp"

namespace bneck {

void add_advise(CLI::App& sub, Action& action) {
  static std::vector<std::string> trace;
  static std::string json_out, range, source_hw, sharing = "on";
  sub.add_option("TRACE", trace, "trace file(s); several files (or a directory) = one trace per rank")->required();
  sub.add_option("--range", range, "judge by the median span of the NVTX (or @LEVEL) ranges matching REGEX");
  sub.add_option("--json", json_out, "write the advice as JSON to FILE ('-' for stdout)");
  static bool whole_run = false;
  sub.add_flag("--whole-run", whole_run,
               "advise on the whole run even where the structure's iterations are a small part of it (a set-up before them)");
  sub.add_option("--source-hw", source_hw, "the trace's GPU (preset or spec file) if its device name does not tell");
  sub.add_option("--sharing", sharing, "on|off: concurrent device ops share their GPU")->capture_default_str();
  static long long window_ops = -1;
  sub.add_option("--window-ops", window_ops,
                 "advise on about N ops in the middle of the run (0: the whole run); default: the whole run where this machine's "
                 "memory holds it (about 340 bytes an op), else the most ops it holds")
      ->check([](const std::string& v) { return !v.empty() && v[0] != '-' ? std::string() : "a number of ops, 0 or more"; });
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.callback([&action] {
    action = [] {
      Trace t = load_with_options(trace, topt);
      if (said_no_device_work(t, "advise on", json_out)) return 0;
      // A run too large for this machine's memory is advised on a stretch of it (traces/window.hpp).
      std::string window;
      const std::size_t n = t.ops.size();
      const double at_hand = available_memory_bytes(), fits = 0.85 * at_hand / kAdviseBytesPerOp;
      std::size_t want = n;
      std::string why;
      if (window_ops > 0) {
        want = static_cast<std::size_t>(window_ops);
        why = "--window-ops " + std::to_string(window_ops);
      } else if (window_ops < 0 && static_cast<double>(n) > fits) {
        want = static_cast<std::size_t>(std::max(fits, 1000.0));
        char b[200];
        std::snprintf(b, sizeof b, "advising on all of it would take about %.1f GiB (%.0f bytes an op), this machine has %.1f GiB at hand",
                      static_cast<double>(n) * kAdviseBytesPerOp / 1073741824.0, kAdviseBytesPerOp, at_hand / 1073741824.0);
        why = b;
      }
      if (want < n) {
        const WindowSpan w = middle_window(t, want);
        window = window_text(t, w) + "\n" + why + "; the figures below are the stretch's";
        t = trace_window(std::move(t), w);
      }
      AdviseOptions o;
      std::optional<Structure> found;
      std::string scope;
      if (!range.empty()) {
        add_structure_ranges_if_named(t, range);
        o.range_regex = range;
      } else if (!whole_run) {  // the steady state where a set-up outweighs the iterations (models/advise.hpp)
        scope = steady_state_scope(t, found.emplace(find_structure(t)), o);
      }
      o.source_hw = source_hw;
      if (sharing != "on" && sharing != "off") throw InputError("--sharing " + sharing + ": expected on or off");
      o.sharing = sharing == "on";
      Advice a = advise(t, o);
      a.window = window;
      if (!scope.empty()) a.scope = scope;
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& out) { out << json_text(advice_json(a), 1) << "\n"; });
      if (json_out != "-") print_advice_text(a, t.source, std::cout);
      return 0;
    };
  });
}

}  // namespace bneck
