// bneck whatif TRACE [--range REGEX] [TRANSFORM...] [--scenario FILE] [--json FILE] [--chrome-trace FILE]
// Transforms apply in the order given: --scale FACTOR:SEL, --remove SEL, --fuse SEL,
// --precision DTYPE[:SEL], --cuda-graph[=SEL], --hw SPEC; a --scenario file's transforms expand in place.
#include <iostream>
#include <nlohmann/json.hpp>

#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "tools/views/whatif_view.hpp"
#include "traces/importer.hpp"

namespace bneck {

std::vector<Transform> parse_transform_args(const std::vector<std::string>& args, std::string& scenario_name) {
  std::vector<Transform> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], val;
    bool has_val = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_val = true;
    }
    auto next = [&]() -> std::string {
      if (has_val) return val;
      if (i + 1 >= args.size()) throw InputError(a + " needs a value");
      return args[++i];
    };
    if (a == "--scale") out.push_back(parse_transform("scale", next()));
    else if (a == "--remove") out.push_back(parse_transform("remove", next()));
    else if (a == "--fuse") out.push_back(parse_transform("fuse", next()));
    else if (a == "--precision") out.push_back(parse_transform("precision", next()));
    else if (a == "--cuda-graph") out.push_back(parse_transform("cuda-graph", has_val ? val : ""));
    else if (a == "--hw") out.push_back(parse_transform("hw", next()));
    else if (a == "--overlap-comm") out.push_back(parse_transform("overlap-comm", has_val ? val : ""));
    else if (a == "--ranks") out.push_back(parse_transform("ranks", next()));
    else if (a == "--scenario") {
      Scenario s = load_scenario(next());
      scenario_name += (scenario_name.empty() ? "" : "+") + s.name;
      out.insert(out.end(), s.transforms.begin(), s.transforms.end());
    } else {
      throw InputError("whatif: unknown option or stray argument '" + args[i] +
                       "' (transforms: --scale F:SEL --remove SEL --fuse SEL --precision T[:SEL] --cuda-graph[=SEL] --hw SPEC --overlap-comm --ranks N --scenario FILE; TRACE comes first)");
    }
  }
  return out;
}

void add_whatif(CLI::App& sub, Action& action) {
  static std::string trace, json_out, chrome_out, range, source_hw;
  static std::size_t top = 12;
  sub.add_option("TRACE", trace, "trace file (first): nsys .sqlite, Kineto .json[.gz], bneck JSON, or a directory with one trace per rank")->required();
  sub.add_option("--range", range, "report the NVTX ranges whose name matches REGEX in full (top-level figures: medians)");
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.add_option("--chrome-trace", chrome_out, "write the baseline and predicted timelines to FILE");
  sub.add_option("--source-hw", source_hw, "the trace's GPU, if its device name does not tell");
  sub.add_option("--top", top, "rows in the text tables")->capture_default_str();
  sub.footer("Transforms, applied in order: --scale FACTOR:SEL  --remove SEL  --fuse SEL  --precision DTYPE[:SEL]\n"
             "  --cuda-graph[=SEL]  --hw SPEC  --scenario FILE (JSON list of transforms). SEL: DESIGN.md selectors.");
  sub.allow_extras();
  CLI::App* self = &sub;
  sub.callback([&action, self] {
    std::vector<std::string> extras = self->remaining();
    action = [extras] {
      WhatIfOptions opt;
      opt.transforms = parse_transform_args(extras, opt.scenario_name);
      if (opt.transforms.empty()) throw InputError("whatif: give at least one transform (e.g. --scale 2:name~gemm)");
      if (!range.empty()) opt.range_regex = range;
      opt.source_hw = source_hw;
      opt.top = top;
      Trace t = load_traces({trace});
      WhatIfReport rep = run_whatif(t, opt);
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << whatif_json(rep).dump(1) << "\n"; });
      if (!chrome_out.empty()) write_output(chrome_out, [&](std::ostream& o) { write_whatif_chrome_trace(rep, o); });
      if (json_out != "-") print_whatif_text(rep, opt, std::cout);
      return 0;
    };
  });
}

}  // namespace bneck
