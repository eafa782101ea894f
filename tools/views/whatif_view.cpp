#include "tools/views/whatif_view.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <regex>
#include <set>
#include <unordered_set>

#include "sim/base/error.hpp"

namespace bneck {
using nlohmann::json;

namespace {

// Busy time of the selected ops among `ops` (union of their intervals).
TimeNs busy_union(const std::vector<OpId>& ops, const std::vector<bool>& sel, const SimResult& r) {
  std::vector<std::pair<TimeNs, TimeNs>> iv;
  for (OpId o : ops)
    if (sel[o]) iv.emplace_back(r.start[o], r.end[o]);
  std::sort(iv.begin(), iv.end());
  TimeNs total = 0, cs = 0, ce = 0;
  bool open = false;
  for (auto [s, e] : iv) {
    if (!open || s > ce) {
      if (open) total += ce - cs;
      cs = s;
      ce = e;
      open = true;
    } else {
      ce = std::max(ce, e);
    }
  }
  if (open) total += ce - cs;
  return total;
}

Span span_of(const std::vector<OpId>& ops, const std::vector<TimeNs>& st, const std::vector<TimeNs>& en) {
  Span s;
  bool any = false;
  for (OpId o : ops) {
    if (!any) { s.begin = st[o]; s.end = en[o]; any = true; }
    s.begin = std::min(s.begin, st[o]);
    s.end = std::max(s.end, en[o]);
  }
  return s;
}

std::vector<std::string> cp_names(const Trace& t, const SimResult& r, OpId last, const std::function<bool(OpId)>& keep) {
  std::vector<std::string> out;
  for (OpId n : critical_path(t, r, last, keep))
    if (is_device_op(t.ops[n].kind)) out.push_back(t.name(t.ops[n]));
  return out;
}

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.2f%%", x * 100);
  return b;
}

HwSpec pick_source(const Trace& t, const std::string& override_spec) {
  try {
    return source_spec(t, override_spec);
  } catch (const InputError&) {
    if (!t.measured && override_spec.empty()) return load_hw("hypothetical-120tf-2tbs");  // hand-written workloads
    throw;
  }
}

}  // namespace

WhatIfReport run_whatif(const Trace& t, const WhatIfOptions& opt) {
  WhatIfReport rep;
  rep.trace = &t;
  auto graph = std::make_shared<const Graph>(build_graph(t));
  HwSpec source = pick_source(t, opt.source_hw);
  rep.source_hw = source.name;
  WhatIfEngine engine(t, graph, source);
  WhatIfCase base = engine.baseline();
  WhatIfCase pred = engine.apply(opt.transforms);
  rep.log = pred.log;
  rep.target_hw = pred.spec.name;
  rep.base_sim = simulate(*base.graph, VectorCostModel(base.durations, "baseline"));
  rep.pred_sim = simulate(*pred.graph, VectorCostModel(pred.durations, "predicted"));
  rep.measured = device_span(t, measured_schedule(t));
  rep.baseline = device_span(t, sim_schedule(rep.base_sim));
  rep.predicted = device_span(t, sim_schedule(rep.pred_sim));
  rep.baseline_ranks = rank_stats(t, sim_schedule(rep.base_sim));
  rep.predicted_ranks = rank_stats(t, sim_schedule(rep.pred_sim));
  rep.baseline_overlap = compute_overlap(t, sim_schedule(rep.base_sim));
  rep.predicted_overlap = compute_overlap(t, sim_schedule(rep.pred_sim));
  rep.has_amdahl = pred.scale_factor > 0;
  rep.amdahl_factor = pred.scale_factor;

  std::vector<OpId> all_dev;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (is_device_op(t.ops[i].kind)) all_dev.push_back(i);
  std::vector<std::string> before_cp, after_cp;
  if (opt.range_regex) {
    std::regex re = range_regex(*opt.range_regex);
    RangeIndex idx(t);
    std::vector<OpId> ops;
    std::vector<double> meas, b, p, am;
    for (std::size_t ri : idx.match(re)) {
      ops.clear();
      idx.device_ops(ri, ops);
      if (ops.empty()) continue;
      WhatIfRange wr;
      wr.name = t.strings.str(t.ranges[ri].name);
      wr.start_ns = t.ranges[ri].start;
      Span m = span_of(ops, rep.base_sim.start, rep.base_sim.end);
      TimeNs mb = t.ops[ops[0]].start, mend = t.ops[ops[0]].end();
      for (OpId o : ops) { mb = std::min(mb, t.ops[o].start); mend = std::max(mend, t.ops[o].end()); }
      wr.measured_span_ns = mend - mb;
      wr.baseline_ns = m.length();
      wr.predicted_ns = span_of(ops, rep.pred_sim.start, rep.pred_sim.end).length();
      if (rep.has_amdahl && wr.baseline_ns > 0) {
        wr.amdahl_fraction = static_cast<double>(busy_union(ops, pred.scaled, rep.base_sim)) / static_cast<double>(wr.baseline_ns);
        wr.amdahl_ns = static_cast<TimeNs>(std::llround(static_cast<double>(wr.baseline_ns) * (1 - wr.amdahl_fraction + wr.amdahl_fraction / rep.amdahl_factor)));
      }
      // As in the replay view: back from the range's last device op through anything that ended
      // after the range's first call started.
      auto [lo, hi] = idx.api_span(ri);
      auto path = [&](const SimResult& r) {
        OpId best = ops[0];
        TimeNs from = r.start[ops[0]];
        for (OpId o : ops) {
          if (r.end[o] > r.end[best]) best = o;
          from = std::min(from, r.start[o]);
        }
        for (std::size_t q = lo; q < hi; ++q) from = std::min(from, r.start[idx.api_at(q)]);
        return cp_names(t, r, best, [&](OpId o) { return r.end[o] > from; });
      };
      wr.cp_before = path(rep.base_sim);
      wr.cp_after = path(rep.pred_sim);
      meas.push_back(static_cast<double>(wr.measured_span_ns));
      b.push_back(static_cast<double>(wr.baseline_ns));
      p.push_back(static_cast<double>(wr.predicted_ns));
      am.push_back(wr.amdahl_fraction);
      rep.ranges.push_back(std::move(wr));
    }
    if (rep.ranges.empty()) throw InputError(t.source, "--range '" + *opt.range_regex + "' matches no range with device ops");
    rep.measured_ns = static_cast<TimeNs>(median(meas));
    rep.baseline_ns = static_cast<TimeNs>(median(b));
    rep.predicted_ns = static_cast<TimeNs>(median(p));
    rep.amdahl_fraction = median(am);
    before_cp = rep.ranges.front().cp_before;
    after_cp = rep.ranges.front().cp_after;
  } else {
    rep.measured_ns = rep.measured.length();
    rep.baseline_ns = rep.baseline.length();
    rep.predicted_ns = rep.predicted.length();
    if (rep.has_amdahl && rep.baseline_ns > 0)
      rep.amdahl_fraction = static_cast<double>(busy_union(all_dev, pred.scaled, rep.base_sim)) / static_cast<double>(rep.baseline_ns);
    TimeNs b0 = rep.baseline.begin, p0 = rep.predicted.begin;
    before_cp = cp_names(t, rep.base_sim, last_device_op(t, sim_schedule(rep.base_sim)), [&](OpId o) { return rep.base_sim.end[o] > b0; });
    after_cp = cp_names(t, rep.pred_sim, last_device_op(t, sim_schedule(rep.pred_sim)), [&](OpId o) { return rep.pred_sim.end[o] > p0; });
  }
  if (rep.has_amdahl)
    rep.amdahl_ns = static_cast<TimeNs>(std::llround(static_cast<double>(rep.baseline_ns) * (1 - rep.amdahl_fraction + rep.amdahl_fraction / rep.amdahl_factor)));
  rep.speedup = rep.predicted_ns > 0 ? static_cast<double>(rep.baseline_ns) / static_cast<double>(rep.predicted_ns) : 0;
  std::set<std::string> bset(before_cp.begin(), before_cp.end()), aset(after_cp.begin(), after_cp.end());
  for (const auto& n : aset) if (!bset.count(n)) rep.onto_cp.push_back(n);
  for (const auto& n : bset) if (!aset.count(n)) rep.off_cp.push_back(n);
  // Slack changes of device ops.
  auto sb = compute_slack(*base.graph, rep.base_sim);
  auto sp = compute_slack(*pred.graph, rep.pred_sim);
  std::vector<OpId> changed;
  for (OpId o : all_dev)
    if (sb[o] != sp[o]) changed.push_back(o);
  std::sort(changed.begin(), changed.end(), [&](OpId a, OpId b) {
    auto da = std::llabs(sp[a] - sb[a]), db = std::llabs(sp[b] - sb[b]);
    return da != db ? da > db : a < b;
  });
  for (std::size_t k = 0; k < changed.size() && k < 50; ++k)
    rep.slack_changes.push_back({t.name(t.ops[changed[k]]), changed[k], sb[changed[k]], sp[changed[k]]});
  return rep;
}

void print_whatif_text(const WhatIfReport& r, const WhatIfOptions& opt, std::ostream& out) {
  const Trace& t = *r.trace;
  out << "bneck whatif: " << t.source << (opt.scenario_name.empty() ? "" : "  (scenario " + opt.scenario_name + ")") << "\n";
  out << "  trace's GPU " << r.source_hw << (r.target_hw != r.source_hw ? ", target " + r.target_hw : "") << "\n";
  for (const auto& l : r.log) out << "  " << l << "\n";
  out << "\n";
  const char* what = opt.range_regex ? "median over ranges" : "GPU span";
  out << "Forecast (" << what << ")\n";
  out << "  measured  " << format_duration(r.measured_ns) << "\n  baseline  " << format_duration(r.baseline_ns)
      << "  (replay of the trace)\n  predicted " << format_duration(r.predicted_ns) << "  (speedup " << r.speedup << "x, "
      << pct(static_cast<double>(r.predicted_ns - r.baseline_ns) / static_cast<double>(std::max<TimeNs>(1, r.baseline_ns))) << ")\n";
  if (r.has_amdahl) {
    char b[200];
    std::snprintf(b, sizeof b, "  Amdahl    %s  (naive: %.1f%% of the busy time made %.3gx faster, ignoring overlap and dependencies)\n",
                  format_duration(r.amdahl_ns).c_str(), r.amdahl_fraction * 100, r.amdahl_factor);
    out << b;
    out << "  simulated vs Amdahl: " << pct(static_cast<double>(r.predicted_ns - r.amdahl_ns) / static_cast<double>(std::max<TimeNs>(1, r.amdahl_ns)))
        << (std::llabs(r.predicted_ns - r.amdahl_ns) * 100 > r.amdahl_ns ? "  <- overlap and the critical path make the difference" : "")
        << "\n";
  }
  out << "\n";
  if (!r.ranges.empty()) {
    out << "Ranges\n  " << std::string("range                     measured      baseline     predicted       change") << (r.has_amdahl ? "        Amdahl" : "") << "\n";
    for (std::size_t i = 0; i < r.ranges.size(); ++i) {
      const auto& w = r.ranges[i];
      char b[300];
      std::snprintf(b, sizeof b, "  %-22s %12s  %12s  %12s  %11s", short_name(w.name, 22).c_str(), format_duration(w.measured_span_ns).c_str(),
                    format_duration(w.baseline_ns).c_str(), format_duration(w.predicted_ns).c_str(),
                    pct(static_cast<double>(w.predicted_ns - w.baseline_ns) / static_cast<double>(std::max<TimeNs>(1, w.baseline_ns))).c_str());
      out << b;
      if (r.has_amdahl) out << "  " << format_duration(w.amdahl_ns);
      out << "\n";
    }
    out << "\n";
  }
  {
    const auto& base = r.baseline_ranks;
    const auto& pred = r.predicted_ranks;
    if (base.size() > 1 && base.size() == pred.size()) {
      out << "Ranks (GPU span)            baseline     predicted       change   exposed comm (baseline -> predicted)\n";
      for (std::size_t i = 0; i < base.size(); ++i) {
        double ch = static_cast<double>(pred[i].span.length() - base[i].span.length()) / static_cast<double>(std::max<TimeNs>(1, base[i].span.length()));
        out << "  rank " << pad(std::to_string(base[i].rank), 18) << lpad(format_duration(base[i].span.length()), 12)
            << lpad(format_duration(pred[i].span.length()), 14) << lpad(pct(ch), 12) << "   "
            << format_duration(base[i].overlap.exposed_communication_ns) << " -> " << format_duration(pred[i].overlap.exposed_communication_ns)
            << "\n";
      }
      out << "\n";
    }
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    std::map<std::string, int> count;
    std::vector<std::string> order;
    for (const auto& n : v) {
      std::string k = short_name(n, 40);
      if (!count[k]++) order.push_back(k);
    }
    for (const auto& k : order) s += (s.empty() ? "" : ", ") + k + (count[k] > 1 ? " x" + std::to_string(count[k]) : "");
    return s.empty() ? std::string("(none)") : s;
  };
  out << "Critical path" << (r.ranges.empty() ? "" : " of " + r.ranges.front().name) << "\n";
  if (!r.ranges.empty()) {
    out << "  before: " << join(r.ranges.front().cp_before) << "\n  after:  " << join(r.ranges.front().cp_after) << "\n";
  }
  out << "  moved onto it: " << join(r.onto_cp) << "\n  moved off it:  " << join(r.off_cp) << "\n\n";
  if (!r.slack_changes.empty()) {
    out << "Ops whose slack changed most\n";
    for (std::size_t i = 0; i < r.slack_changes.size() && i < opt.top; ++i) {
      const auto& s = r.slack_changes[i];
      out << "  " << short_name(s.name, 46) << " (op " << s.id << "): " << format_duration(s.before) << " -> " << format_duration(s.after) << "\n";
    }
  }
}

json whatif_json(const WhatIfReport& r) {
  json j;
  j["source"] = r.trace->source;
  j["source_hw"] = r.source_hw;
  j["target_hw"] = r.target_hw;
  j["transforms"] = r.log;
  j["measured_ns"] = r.measured_ns;
  j["baseline_ns"] = r.baseline_ns;
  j["predicted_ns"] = r.predicted_ns;
  j["speedup"] = r.speedup;
  {
    const auto& base = r.baseline_ranks;
    const auto& pred = r.predicted_ranks;
    json rk = json::array();
    for (std::size_t i = 0; i < base.size() && i < pred.size(); ++i)
      rk.push_back({{"rank", base[i].rank}, {"baseline_span_ns", base[i].span.length()}, {"predicted_span_ns", pred[i].span.length()},
                    {"baseline_overlap", overlap_json(base[i].overlap)}, {"predicted_overlap", overlap_json(pred[i].overlap)}});
    j["ranks"] = rk;
  }
  json ranges = json::array();
  for (const auto& w : r.ranges) {
    json rj = {{"name", w.name}, {"start_ns", w.start_ns}, {"measured_span_ns", w.measured_span_ns}, {"baseline_ns", w.baseline_ns},
               {"predicted_ns", w.predicted_ns}, {"critical_path_before", w.cp_before}, {"critical_path_after", w.cp_after}};
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
  return j;
}

void write_whatif_chrome_trace(const WhatIfReport& r, std::ostream& out) {
  write_two_timelines(out, *r.trace, sim_schedule(r.base_sim), "baseline (replay)", sim_schedule(r.pred_sim), "predicted (what-if)");
}

}  // namespace bneck
