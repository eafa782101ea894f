// bneck whatif TRACE [--range REGEX] [TRANSFORM...] [--scenario FILE] [--json FILE] [--chrome-trace FILE]
// Transforms (models/whatif/registry.cpp) apply in the order given; a --scenario file's transforms
// expand in place. `--list-transforms [markdown]` prints the table (the README's list).
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/trace_options.hpp"
#include "tools/output.hpp"
#include "tools/views/whatif_view.hpp"
#include "traces/importer.hpp"

namespace bneck {

void add_whatif(CLI::App& sub, Action& action) {
  static std::string trace, json_out, chrome_out, range, source_hw, list, sharing = "on", unprofiled_time;
  static std::size_t top = 12;
  sub.add_option(
      "TRACE", trace,
      "trace file (first): nsys .sqlite (or .nsys-rep, with nsys), Kineto .json[.gz], bneck JSON, or a directory with one trace per rank");
  sub.add_option("--list-transforms", list, "print the transforms ('text' or 'markdown') and exit")->expected(0, 1)->default_str("text");
  sub.add_option("--range", range,
                 "report the NVTX ranges whose name matches REGEX in full (top-level figures: their mean, warm-ups left out)");
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.add_option("--chrome-trace", chrome_out, "write the baseline and predicted timelines to FILE");
  sub.add_option("--source-hw", source_hw, "the trace's GPU, if its device name does not tell");
  sub.add_option("--unprofiled-time", unprofiled_time,
                 "the measured unprofiled step (\"182 ms\"; with --range, a range's median): the profiler's host cost scaled to reach it");
  sub.add_option("--sharing", sharing,
                 "on: concurrent device ops share their GPU's SMs and HBM (sim/engine/sharing.hpp); off: each keeps its time")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub.add_option("--top", top, "rows in the text tables")->capture_default_str();
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.footer("Transforms, applied in order (a --scenario FILE's JSON list expands in place; SEL: docs/design.md selectors):\n" +
             transform_help(false));
  sub.allow_extras();
  CLI::App* self = &sub;
  sub.callback([&action, self] {
    std::vector<std::string> extras = self->remaining();
    const bool listing = self->count("--list-transforms") > 0;
    action = [extras, listing] {
      if (listing) {
        if (list == "markdown")  // a document to paste: lines as markdown has them
          write_output("-", [](std::ostream& o) { o << transform_help(true); });
        else
          std::cout << transform_help(false);
        return 0;
      }
      if (trace.empty()) throw InputError("whatif: TRACE is required");
      WhatIfOptions opt;
      opt.transforms = parse_transform_args(extras, opt.scenario_name);
      if (opt.transforms.empty())
        throw InputError(opt.scenario_name.empty() ? std::string("whatif") : "whatif: scenario '" + opt.scenario_name + "'",
                         "give at least one transform (e.g. --scale 2:name~gemm); the scenario's list is empty");
      if (!range.empty()) opt.range_regex = range;
      opt.source_hw = source_hw;
      opt.sharing = sharing == "on";
      opt.top = top;
      if (!unprofiled_time.empty()) {
        opt.unprofiled_time = parse_duration(unprofiled_time);
        if (opt.unprofiled_time <= 0) throw InputError("--unprofiled-time " + unprofiled_time + ": must be positive");
      }
      Trace t = load_with_options({trace}, topt, structure_texts(extras, range));
      if (said_no_device_work(t, "forecast", json_out)) return 0;
      WhatIfReport rep = run_whatif(t, opt);
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(whatif_json(rep), 1) << "\n"; });
      if (!chrome_out.empty()) write_output(chrome_out, [&](std::ostream& o) { write_whatif_chrome_trace(rep, o); });
      if (json_out != "-") print_whatif_text(rep, opt, std::cout);
      return 0;
    };
  });
}

}  // namespace bneck
