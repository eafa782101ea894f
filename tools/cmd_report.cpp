// bneck report TRACE... [--range REGEX] [--hw SPEC] [TRANSFORMS...] -o report.html
// One self-contained HTML file (no network: the data and the script are inline): the measured and
// simulated timelines per device and stream (wheel to zoom, drag to pan, hover for the op's name,
// duration, slack and whether it is critical), the critical path and its breakdown, overlap and
// idle per rank, ranges measured vs simulated, the roofline of the trace's kernels and, with
// transforms, baseline vs forecast vs Amdahl with what moved on the path. The page draws itself
// with plain SVG and JavaScript (tools/views/report.js, embedded at build time).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "models/kernel_roofline.hpp"
#include "models/kernel_work.hpp"
#include "models/replay.hpp"
#include "models/retarget.hpp"
#include "models/whatif/run.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "models/advise.hpp"
#include "tools/commands.hpp"
#include "tools/views/advise_view.hpp"
#include "tools/trace_options.hpp"
#include "tools/output.hpp"
#include "tools/report_js.hpp"
#include "tools/views/replay_view.hpp"
#include "tools/views/whatif_view.hpp"
#include "traces/importer.hpp"

namespace bneck {
using nlohmann::json;

namespace {

constexpr std::size_t kMaxTimelineOps = 200000;  // per timeline; past it the window shrinks

// Device ops of the trace on a schedule, in [lo, hi): [lane index, start, end, op id].
json timeline(const Schedule& s, const std::vector<NodeId>& nodes, TimeNs t0) {
  json rows = json::array();
  for (NodeId n : nodes) rows.push_back({n, s.start(n) - t0, s.end(n) - s.start(n)});
  return rows;
}

// "</script>" inside the embedded JSON would end the script element.
std::string script_safe(std::string s) {
  for (std::size_t p = 0; (p = s.find("</", p)) != std::string::npos; p += 3) s.replace(p, 2, "<\\/");
  return s;
}

}  // namespace

void add_report(CLI::App& sub, Action& action) {
  static std::string trace, out, range, hw;
  sub.add_option("TRACE", trace, "the trace (a file, or a directory of one per rank)")->required();
  sub.add_option("-o,--output", out, "the HTML file to write")->required();
  sub.add_option("--range", range, "the NVTX ranges to report (measured vs simulated, what-if per range)");
  static bool whole_run = false;
  sub.add_flag("--whole-run", whole_run, "the advice of the whole run even where the structure's iterations are a small part of it");
  sub.add_option("--hw", hw, "replay retargeted to this GPU (the timelines then compare measured with it)");
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.allow_extras();
  sub.footer("Transforms (as for bneck whatif) after the options add the what-if section: bneck report T -o r.html --scale 2:name~gemm");
  sub.callback([&action, self = &sub] {
    std::vector<std::string> extras = self->remaining();
    action = [extras] {
      Trace t = load_with_options({trace}, topt, structure_texts(extras, range));
      if (said_no_device_work(t, "report", "")) return 0;  // an execution trace without timings: no timeline to draw
      ReplayOptions ro;
      if (!range.empty()) ro.range_regex = range;
      ro.hw = hw;
      ReplayReport rep = run_replay(t, ro);
      json data;
      {  // The report opens with the advice: what holds the run back and what to change.
        AdviseOptions ao;
        std::optional<Structure> found;
        std::string scope;
        if (!range.empty()) {
          ao.range_regex = range;
        } else if (!whole_run) {  // the steady state where a set-up outweighs the iterations, as bneck advise
          scope = steady_state_scope(t, found.emplace(find_structure(t)), ao);
        }
        Advice a = advise(t, ao);
        if (!scope.empty()) a.scope = scope;
        data["advice"] = advice_json(a);
      }
      data["replay"] = replay_json(rep, ro);
      data["trace"] = t.source;
      // Timelines: device ops of the measured trace (the window: all of them, or the first
      // kMaxTimelineOps by start) on both schedules.
      const Graph& g = *rep.graph;
      std::vector<NodeId> dev;
      for (OpId i = 0; i < t.ops.size(); ++i)
        if (g.is_device(i)) dev.push_back(i);
      std::sort(dev.begin(), dev.end(),
                [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start || (t.ops[a].start == t.ops[b].start && a < b); });
      const bool cut = dev.size() > kMaxTimelineOps;
      if (cut) dev.resize(kMaxTimelineOps);
      const Schedule ms = measured_schedule(t), ss = sim_schedule(rep.sim);
      TimeNs t0 = std::numeric_limits<TimeNs>::max();
      for (NodeId n : dev) t0 = std::min({t0, ms.start(n), ss.start(n)});
      if (dev.empty()) t0 = 0;
      json lanes = json::array();
      std::vector<int> lane_row(t.lanes.size(), -1);
      for (NodeId n : dev) {
        const LaneId l = t.ops[n].lane;
        if (lane_row[l] < 0) {
          lane_row[l] = static_cast<int>(lanes.size());
          lanes.push_back(t.lane_label(l));
        }
      }
      std::vector<bool> on_cp(t.ops.size(), false);
      for (OpId n : rep.critical_path)
        if (n < on_cp.size()) on_cp[n] = true;
      json ops = json::array();  // per op: name, lane row, class, critical, slack
      json names = json::array();
      std::map<std::string, int> name_ix;
      for (NodeId n : dev) {
        std::string nm = t.name(t.ops[n]);
        auto [it, fresh] = name_ix.emplace(nm, static_cast<int>(names.size()));
        if (fresh) names.push_back(nm);
        ops.push_back({it->second, lane_row[t.ops[n].lane], to_string(op_class(t.ops[n])), on_cp[n] ? 1 : 0,
                       n < rep.slack.size() ? rep.slack[n] : 0});
      }
      data["timeline"] = {{"lanes", lanes},
                          {"names", names},
                          {"ops", ops},
                          {"measured", timeline(ms, dev, t0)},
                          {"simulated", timeline(ss, dev, t0)},
                          {"window_ops", dev.size()},
                          {"device_ops", t.device_op_count()},
                          {"cut", cut}};
      // Roofline: each kernel's arithmetic intensity and achieved rate on the trace's GPU.
      // A trace whose GPU is not known (no preset, no properties to build one from) keeps the
      // report; its roofline section says what it lacks.
      std::optional<HwSpec> spec;
      try {
        spec = source_spec(t, "");
      } catch (const InputError&) {
        data["roofline"] = {{"gpu", "the trace does not say which GPU ran it: no roofs, no kernels placed"},
                            {"bandwidth", 0},
                            {"peak_fp32", 0},
                            {"peak_tensor", 0},
                            {"kernels", json::array()}};
      }
      if (spec) {
        WorkTable work = estimate_work(t, *spec);
        json pts = json::array();  // per kernel name (kernel_roofline.hpp), those with work to plot
        for (const KernelPoint& p : kernel_points(t, work, spec->gpu))
          if (p.flops > 0 && p.bytes > 0 && p.time_ns > 0) pts.push_back({p.name, p.intensity(), p.achieved_flop_per_s(), p.time_ns});
        double peak = 0;
        for (int d = 0; d < kDtypeCount; ++d) peak = std::max(peak, spec->gpu.peak_of(static_cast<Dtype>(d), ComputeUnit::Tensor));
        data["roofline"] = {{"gpu", spec->name},
                            {"bandwidth", spec->gpu.memory_bandwidth},
                            {"peak_fp32", spec->gpu.peak_of(Dtype::FP32, ComputeUnit::Simt)},
                            {"peak_tensor", peak},
                            {"kernels", pts}};
      }
      if (!extras.empty()) {
        WhatIfOptions wo;
        if (!range.empty()) wo.range_regex = range;
        wo.transforms = parse_transform_args(extras, wo.scenario_name);
        WhatIfReport wr = run_whatif(t, wo);
        data["whatif"] = whatif_json(wr);
      }
      const std::string text = script_safe(json_text(data, -1));
      write_output(out, [&](std::ostream& o) {
        o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>bneck report</title>\n<style>\n"
          << kReportCss << "\n</style></head><body>\n<script type=\"application/json\" id=\"bneck-data\">" << text
          << "</script>\n<script>\n"
          << kReportJs << "\n</script>\n</body></html>\n";
      });
      std::cout << "bneck report: " << out << " (" << dev.size() << " device ops on the timelines" << (cut ? ", cut" : "") << ", "
                << data["roofline"]["kernels"].size() << " kernels on the roofline" << (extras.empty() ? "" : ", a what-if") << ")\n";
      return 0;
    };
  });
}

}  // namespace bneck
