#include "tools/views/whatif_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <unordered_set>

#include "sim/base/error.hpp"

namespace bneck {
using nlohmann::json;

namespace {
std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.2f%%", x * 100);
  return b;
}
}  // namespace

void print_whatif_text(const WhatIfReport& r, const WhatIfOptions& opt, std::ostream& out) {
  const Trace& t = *r.trace;
  out << "bneck whatif: " << t.source << (opt.scenario_name.empty() ? "" : "  (scenario " + opt.scenario_name + ")") << "\n";
  out << "  trace's GPU " << r.source_hw << (r.target_hw != r.source_hw ? ", target " + r.target_hw : "") << "\n";
  if (!r.unprofile_log.empty()) out << "  " << r.unprofile_log << "\n";
  for (const auto& l : r.log) out << "  " << l << "\n";
  out << "\n";
  const char* what = opt.range_regex ? "mean over ranges" : "GPU span";
  out << "Forecast (" << what << ")\n";
  out << "  measured  " << format_duration(r.measured_ns) << "\n  baseline  " << format_duration(r.baseline_ns)
      << (r.unprofiled.empty() ? "  (replay of the trace)" : "  (replay without the profiler's host cost: " + r.unprofiled + ")")
      << "\n  predicted " << format_duration(r.predicted_ns) << "  (speedup " << r.speedup << "x, "
      << pct(static_cast<double>(r.predicted_ns - r.baseline_ns) / static_cast<double>(std::max<TimeNs>(1, r.baseline_ns))) << ")\n";
  if (r.error_bar.valid()) {
    out << "  interval  " << bar_text(r.error_bar) << "  (80 %: the measured time lies inside 4 times in 5)\n";
    for (const auto& b : r.error_bar.basis) out << "            " << b << "\n";
  }
  if (r.ranges.size() > 1) {  // repeated steps: their spread is the profiled run's own noise (the host's pace varies)
    TimeNs lo = r.ranges[0].predicted_ns, hi = lo;
    for (const auto& w : r.ranges) lo = std::min(lo, w.predicted_ns), hi = std::max(hi, w.predicted_ns);
    out << "  spread    " << format_duration(lo) << " .. " << format_duration(hi) << "  (predicted over the " << r.ranges.size()
        << " ranges)\n";
  }
  if (const std::string h = r.host_after.note(); !h.empty())
    out << "  host      after the change" << (r.ranges.empty() ? "" : " (" + r.ranges.front().name + ")") << ": " << h << "\n";
  if (r.has_amdahl) {
    char b[200];
    std::snprintf(b, sizeof b, "  Amdahl    %s  (naive: %.1f%% of the busy time made %.3gx faster, ignoring overlap and dependencies)\n",
                  format_duration(r.amdahl_ns).c_str(), r.amdahl_fraction * 100, r.amdahl_factor);
    out << b;
    out << "  simulated vs Amdahl: "
        << pct(static_cast<double>(r.predicted_ns - r.amdahl_ns) / static_cast<double>(std::max<TimeNs>(1, r.amdahl_ns)))
        << (std::llabs(r.predicted_ns - r.amdahl_ns) * 100 > r.amdahl_ns ? "  <- overlap and the critical path make the difference" : "")
        << "\n";
  }
  out << "\n";
  if (!r.ranges.empty()) {
    const bool ranks = r.baseline_ranks.size() > 1;
    out << "Ranges\n  " << (ranks ? "rank  " : "")
        << std::string("range                     measured      baseline     predicted       change")
        << (r.has_amdahl ? "        Amdahl" : "") << "\n";
    for (std::size_t i = 0; i < r.ranges.size(); ++i) {
      const auto& w = r.ranges[i];
      char b[300];
      std::snprintf(
          b, sizeof b, "  %-22s %12s  %12s  %12s  %11s", short_name(w.name, 22).c_str(), format_duration(w.measured_span_ns).c_str(),
          format_duration(w.baseline_ns).c_str(), format_duration(w.predicted_ns).c_str(),
          pct(static_cast<double>(w.predicted_ns - w.baseline_ns) / static_cast<double>(std::max<TimeNs>(1, w.baseline_ns))).c_str());
      if (ranks) out << "  " << pad(std::to_string(w.rank), 4);
      out << b;
      if (r.has_amdahl) out << "  " << format_duration(w.amdahl_ns);
      out << "\n";
    }
    out << "\n";
  }
  {
    const auto& base = r.baseline_ranks;
    const auto& pred = r.predicted_ranks;
    if (base.size() > 1 || pred.size() > 1) {  // by rank: a pipeline's stages are new ranks
      out << "Ranks (GPU span)            baseline     predicted       change   exposed comm (baseline -> predicted)   GPU idle "
             "(a pipeline's bubble)\n";
      std::map<std::uint32_t, std::pair<const RankStats*, const RankStats*>> by_rank;
      for (const auto& b : base) by_rank[b.rank].first = &b;
      for (const auto& p : pred) by_rank[p.rank].second = &p;
      for (const auto& [rank, bp] : by_rank) {
        const RankStats *b = bp.first, *p = bp.second;
        out << "  rank " << pad(std::to_string(rank), 18) << lpad(b ? format_duration(b->span.length()) : "-", 12)
            << lpad(p ? format_duration(p->span.length()) : "-", 14);
        if (b && p)
          out << lpad(
              pct(static_cast<double>(p->span.length() - b->span.length()) / static_cast<double>(std::max<TimeNs>(1, b->span.length()))),
              12);
        else
          out << lpad("new", 12);
        out << "   " << (b ? format_duration(b->overlap.exposed_communication_ns) : "-") << " -> "
            << (p ? format_duration(p->overlap.exposed_communication_ns) : "-") << "   "
            << (b ? format_duration(b->overlap.gpu_idle_ns) : "-") << " -> " << (p ? format_duration(p->overlap.gpu_idle_ns) : "-") << "\n";
      }
      out << "\n";
    }
  }
  auto join = [](const std::vector<std::string>& v) { return v.empty() ? std::string("    (none)") : runs_text(v, "    "); };
  out << "Critical path" << (r.ranges.empty() ? "" : " of " + r.ranges.front().name) << "\n";
  if (!r.ranges.empty()) {
    out << "  before:\n" << join(r.ranges.front().cp_before) << "\n  after:\n" << join(r.ranges.front().cp_after) << "\n";
  }
  out << "  moved onto it:\n" << join(r.onto_cp) << "\n  moved off it:\n" << join(r.off_cp) << "\n\n";
  if (!r.slack_changes.empty()) {
    out << "Ops whose slack changed most\n";
    for (std::size_t i = 0; i < r.slack_changes.size() && i < opt.top; ++i) {
      const auto& s = r.slack_changes[i];
      out << "  " << short_name(s.name, 46) << " (op " << s.id << "): " << format_duration(s.before) << " -> " << format_duration(s.after)
          << "\n";
    }
  }
}

json error_bar_json(const ErrorBar& b) { return {{"low_ns", b.low_ns}, {"high_ns", b.high_ns}, {"basis", b.basis}}; }

json whatif_json(const WhatIfReport& r) {
  json j;
  j["source"] = r.trace->source;
  j["source_hw"] = r.source_hw;
  j["target_hw"] = r.target_hw;
  j["transforms"] = r.log;
  j["measured_ns"] = r.measured_ns;
  j["baseline_ns"] = r.baseline_ns;
  j["unprofiled"] = r.unprofiled;  // the profiler whose host cost baseline and forecast leave out ("": none)
  j["unprofile_log"] = r.unprofile_log;
  j["predicted_ns"] = r.predicted_ns;
  j["error_bar"] = error_bar_json(r.error_bar);
  j["speedup"] = r.speedup;
  {
    json terms = json::object();
    for (const auto& [c, ns] : r.host_after.terms) terms[c] = ns;
    j["host_after"] = {{"path_ns", r.host_after.path_ns}, {"terms", terms}, {"note", r.host_after.note()}};
  }
  {
    const auto& base = r.baseline_ranks;
    const auto& pred = r.predicted_ranks;
    json rk = json::array();
    for (std::size_t i = 0; i < base.size() && i < pred.size(); ++i)
      rk.push_back({{"rank", base[i].rank},
                    {"baseline_span_ns", base[i].span.length()},
                    {"predicted_span_ns", pred[i].span.length()},
                    {"baseline_overlap", overlap_json(base[i].overlap)},
                    {"predicted_overlap", overlap_json(pred[i].overlap)}});
    j["ranks"] = rk;
  }
  json ranges = json::array();
  for (const auto& w : r.ranges) {
    json rj = {{"name", w.name},
               {"rank", w.rank},
               {"start_ns", w.start_ns},
               {"measured_span_ns", w.measured_span_ns},
               {"baseline_ns", w.baseline_ns},
               {"predicted_ns", w.predicted_ns},
               {"error_bar", error_bar_json(w.error_bar)},
               {"critical_path_before", w.cp_before},
               {"critical_path_after", w.cp_after}};
    if (r.has_amdahl) rj["amdahl"] = {{"fraction", w.amdahl_fraction}, {"factor", r.amdahl_factor}, {"predicted_ns", w.amdahl_ns}};
    ranges.push_back(std::move(rj));
  }
  j["ranges"] = std::move(ranges);
  if (r.has_amdahl) j["amdahl"] = {{"fraction", r.amdahl_fraction}, {"factor", r.amdahl_factor}, {"predicted_ns", r.amdahl_ns}};
  j["moved_onto_critical_path"] = r.onto_cp;
  j["moved_off_critical_path"] = r.off_cp;
  json sc = json::array();
  for (const auto& s : r.slack_changes) sc.push_back({{"id", s.id}, {"name", s.name}, {"before_ns", s.before}, {"after_ns", s.after}});
  j["slack_changes"] = sc;
  j["baseline_overlap"] = overlap_json(r.baseline_overlap);
  j["predicted_overlap"] = overlap_json(r.predicted_overlap);
  if (r.memory) {  // the parallel layouts' memory per GPU (null: a part the trace cannot tell)
    auto part = [](double b) { return b < 0 ? json(nullptr) : json(static_cast<Bytes>(std::llround(b))); };
    const MemoryPerGpu& m = *r.memory;
    j["memory_per_gpu"] = {{"parameters_bytes", part(m.parameters)}, {"gradients_bytes", part(m.gradients)},
                           {"optimizer_bytes", part(m.optimizer)},   {"activations_bytes", part(m.activations)},
                           {"buffers_bytes", part(m.buffers)},       {"total_bytes", part(m.total())},
                           {"capacity_bytes", r.memory_capacity}};
  }
  return j;
}

void write_whatif_chrome_trace(const WhatIfReport& r, std::ostream& out) {
  write_two_timelines(out, *r.trace, sim_schedule(*r.base_sim), "baseline (replay)", sim_schedule(r.pred_sim), "predicted (what-if)", {},
                      r.pred_graph.get());
}

}  // namespace bneck
