// bneck replay TRACE [--range REGEX] [--hw SPEC] [--json FILE] [--chrome-trace FILE]
#include <iomanip>
#include <chrono>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>

#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/trace_options.hpp"
#include "tools/output.hpp"
#include "tools/views/replay_view.hpp"
#include "tools/views/structure_view.hpp"
#include "traces/importer.hpp"

namespace bneck {

constexpr std::size_t kStructureInReplayOps = 1'000'000;

void add_replay(CLI::App& sub, Action& action) {
  static std::vector<std::string> trace;
  static std::string json_out, chrome_out, range, hw, source_hw, durations, sharing = "on";
  static std::size_t top = 15;
  sub.add_option("TRACE", trace,
                 "trace file(s): nsys .sqlite (or .nsys-rep, with nsys), Kineto .json[.gz], bneck JSON; several files (or a directory) = "
                 "one trace per rank")
      ->required();
  sub.add_option("--range", range,
                 "report the NVTX ranges whose name matches REGEX in full (@iteration, @layer...: structure levels, bneck structure)");
  sub.add_option("--hw", hw, "retarget to this GPU: a preset (bneck hw list) or a spec file");
  sub.add_option("--durations", durations, "measured | model | hybrid (default: measured; hybrid with --hw)");
  sub.add_option("--source-hw", source_hw, "the trace's GPU, if its device name does not tell");
  sub.add_option("--sharing", sharing,
                 "on: concurrent device ops share their GPU's SMs and HBM (sim/engine/sharing.hpp); off: each keeps its time")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub.add_option("--json", json_out, "write the report as JSON to FILE ('-' for stdout)");
  sub.add_option("--chrome-trace", chrome_out, "write measured and simulated timelines (Perfetto UI) to FILE");
  sub.add_option("--top", top, "rows in the text tables")->capture_default_str();
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.callback([&action] {
    action = [] {
      ReplayOptions opt;
      opt.hw = hw;
      opt.source_hw = source_hw;
      if (!durations.empty()) {
        opt.durations = durations;
        opt.durations_explicit = true;
      }
      opt.top = top;
      opt.sharing = sharing == "on";
      if (!range.empty()) opt.range_regex = range;
      auto t0 = std::chrono::steady_clock::now();
      Trace t = load_with_options(trace, topt, {range});
      if (!opt.durations_explicit && said_no_device_work(t, "replay on a GPU", json_out)) return 0;
      double import_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double import_rss = peak_rss_mb();
      // The structure the trace shows (bneck structure), up to a million device ops (beyond, the
      // search would add about half the replay's time: bneck structure runs it alone), found on a
      // second thread while the replay runs (both only read the trace).
      double structure_s = 0;
      std::future<std::optional<Structure>> found;
      if (t.device_op_count() <= kStructureInReplayOps)
        found = std::async(std::launch::async, [&t, &structure_s] {
          const auto s0 = std::chrono::steady_clock::now();
          std::optional<Structure> r = find_structure(t);
          structure_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
          return r;
        });
      ReplayReport rep = run_replay(t, opt);
      std::optional<Structure> st;
      if (found.valid()) st = found.get();
      if (opt.range_regex && rep.ranges.empty())
        std::cerr << "bneck: warning: --range '" << *opt.range_regex << "' matches no range of " << t.source << " (it has "
                  << t.ranges.size() << "; bneck info lists their names)\n";
      rep.import_s = import_s;
      rep.import_rss_mb = import_rss;
      if (!json_out.empty()) {
        nlohmann::json j = replay_json(rep, opt);
        j["timing_s"] = {{"import", rep.import_s},
                         {"graph", rep.graph_s},
                         {"replay", rep.replay_s},
                         {"analysis", rep.analysis_s},
                         {"structure", structure_s}};
        if (st) j["structure"] = structure_json(*st, false);
        j["peak_rss_mb_after"] = {
            {"import", rep.import_rss_mb}, {"graph", rep.graph_rss_mb}, {"replay", rep.replay_rss_mb}, {"analysis", rep.analysis_rss_mb}};
        write_output(json_out, [&](std::ostream& o) { o << json_text(j, 1) << "\n"; });
      }
      if (!chrome_out.empty()) write_output(chrome_out, [&](std::ostream& o) { write_chrome_trace(rep, o); });
      if (json_out != "-") {
        print_replay_text(rep, opt, std::cout);
        if (st) {
          std::cout << "\nstructure (found from the trace; --range @LEVEL):\n";
          print_structure_summary(*st, std::cout);
        } else {
          std::cout << "\nstructure: more than " << kStructureInReplayOps << " device ops: bneck structure TRACE finds it\n";
        }
      }
      return 0;
    };
  });
}

}  // namespace bneck
