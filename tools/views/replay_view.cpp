#include "tools/views/replay_view.hpp"

#include "models/collective.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <unordered_map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <unordered_set>

#include "models/measured.hpp"
#include "models/retarget.hpp"
#include "sim/base/error.hpp"

namespace bneck {
using nlohmann::json;

namespace {

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", x * 100);
  return b;
}
// With its sign: "+1.25%", "-0.40%" (formatted at once: "+" + pct(x) trips GCC 12's -Wrestrict).
std::string signed_pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%s%.2f%%", x >= 0 ? "+" : "", x * 100);
  return b;
}

}  // namespace

std::string cut_list(const std::string& list, std::size_t max) {
  if (list.size() <= max) return list;
  std::vector<std::string> items;
  for (std::size_t at = 0; at <= list.size();) {
    std::size_t c = std::min(list.find(", ", at), list.size());
    items.push_back(list.substr(at, c - at));
    at = c + 2;
  }
  std::string out;
  std::size_t kept = 0;
  for (const auto& it : items) {
    const std::string more = " and " + std::to_string(items.size() - kept - 1) + " more";
    if (out.size() + 2 + it.size() + more.size() > max) break;
    out += (kept++ ? ", " : "") + it;
  }
  if (kept == 0)
    return items.size() == 1 ? short_name(list, max) : short_name(items[0], max / 2) + " and " + std::to_string(items.size() - 1) + " more";
  return out + " and " + std::to_string(items.size() - kept) + " more";
}

std::string short_name(const std::string& name, std::size_t max) {
  std::string s = name;
  // Drop a leading "void " and the argument list of demangled kernel names (not the
  // parentheses of "(anonymous namespace)" inside them).
  if (s.rfind("void ", 0) == 0) s = s.substr(5);
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<')
      ++depth;
    else if (s[i] == '>')
      --depth;
    else if (s[i] == '(' && depth == 0 && i > 0 && s.compare(i, 21, "(anonymous namespace)") != 0) {
      s.resize(i);
      break;
    }
  }
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

std::string runs_text(const std::vector<std::string>& names, const std::string& indent, std::size_t width) {
  std::vector<std::string> items;
  for (std::size_t i = 0; i < names.size();) {
    std::string k = short_name(names[i], 48);
    std::size_t j = i + 1;
    while (j < names.size() && short_name(names[j], 48) == k) ++j;
    items.push_back(j - i > 1 ? k + " x" + std::to_string(j - i) : k);
    i = j;
  }
  // A repeating sequence (a layer, a microbatch) as "[A, B, C] xN": the shortest period (up to 12
  // items) that repeats at least twice from here.
  std::vector<std::string> folded;
  for (std::size_t i = 0; i < items.size();) {
    std::size_t best_p = 0, best_n = 1;
    for (std::size_t p = 2; p <= 12 && i + 2 * p <= items.size(); ++p) {
      std::size_t n = 1;
      while (i + (n + 1) * p <= items.size() && std::equal(items.begin() + static_cast<long>(i), items.begin() + static_cast<long>(i + p),
                                                           items.begin() + static_cast<long>(i + n * p)))
        ++n;
      if (n >= 2 && n * p > best_n * std::max<std::size_t>(best_p, 1)) {
        best_p = p;
        best_n = n;
      }
    }
    if (best_p == 0) {
      folded.push_back(items[i++]);
      continue;
    }
    std::string block = "[";
    for (std::size_t k = 0; k < best_p; ++k) block += (k ? ", " : "") + items[i + k];
    folded.push_back(block + "] x" + std::to_string(best_n));
    i += best_p * best_n;
  }
  constexpr std::size_t kMaxLines = 16;
  std::string out, line = indent;
  std::size_t lines = 0;
  for (std::size_t i = 0; i < folded.size(); ++i) {
    std::string piece = folded[i] + (i + 1 < folded.size() ? ", " : "");
    if (line.size() > indent.size() && line.size() + piece.size() > width) {
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
      line = indent;
      if (++lines == kMaxLines) return out + indent + "... (" + std::to_string(folded.size() - i) + " more)";
    }
    line += piece;
  }
  return out + line;
}

std::string pad(const std::string& s, std::size_t w) { return s.size() >= w ? s : s + std::string(w - s.size(), ' '); }
std::string lpad(const std::string& s, std::size_t w) { return s.size() >= w ? s : std::string(w - s.size(), ' ') + s; }

namespace {
// Per-rank spans and overlap, and the collectives' stragglers.
void print_ranks(const ReplayReport& r, std::ostream& out) {
  const Trace& t = *r.trace;
  out << "\nRanks (span: first to last GPU op of the rank)\n";
  out << "  rank      measured     simulated     error       compute  communication  exposed comm      waiting  last at      GPU idle\n";
  for (std::size_t i = 0; i < r.simulated_ranks.size() && i < r.measured_ranks.size(); ++i) {
    const RankStats& s = r.simulated_ranks[i];
    const RankStats& m = r.measured_ranks[i];
    double err = m.span.length() ? static_cast<double>(s.span.length() - m.span.length()) / static_cast<double>(m.span.length()) : 0;
    out << "  " << pad(std::to_string(s.rank), 4) << lpad(format_duration(m.span.length()), 14)
        << lpad(format_duration(s.span.length()), 14) << lpad(signed_pct(err), 10) << lpad(format_duration(s.overlap.compute_ns), 14)
        << lpad(format_duration(s.overlap.communication_ns), 15) << lpad(format_duration(s.overlap.exposed_communication_ns), 14)
        << lpad(format_duration(s.waited_ns), 13) << lpad(std::to_string(s.last_arrivals) + "/" + std::to_string(s.collectives), 9)
        << lpad(format_duration(s.overlap.gpu_idle_ns), 14) << "\n";
  }
  std::size_t members = 0, comm = 0;
  std::map<std::string, std::size_t> kinds;
  for (const auto& c : t.collectives)
    if (c.members.size() > 1) {
      members += c.members.size();
      kinds[to_string(c.kind)]++;
    }
  for (const Op& o : t.ops) comm += o.kind == OpKind::Kernel && (o.flags & Op::kFlagNccl);
  out << "  collectives matched across ranks: " << r.waits.size() << " (" << members << " of " << comm << " communication kernels)";
  for (auto& [k, n] : kinds) out << ", " << n << " " << k;
  out << "\n  ('waiting': inside collective kernels until the last member arrived; 'last at': collectives the rank\n"
         "   arrived at last, i.e. the others waited for it)\n";
  std::vector<CollectiveWait> w = r.waits;
  std::sort(w.begin(), w.end(), [](const CollectiveWait& a, const CollectiveWait& b) {
    return a.arrival_spread_ns != b.arrival_spread_ns ? a.arrival_spread_ns > b.arrival_spread_ns : a.index < b.index;
  });
  if (!r.collective_checks.empty()) {  // the collective model against the last arrivals' kernels
    std::vector<double> err;
    std::map<std::pair<std::string, Bytes>, std::array<double, 3>> by;  // kind, size -> n, measured, model
    for (const CollectiveCheck& c : r.collective_checks) {
      err.push_back(std::abs(static_cast<double>(c.model_ns - c.measured_ns)) / static_cast<double>(std::max<TimeNs>(1, c.measured_ns)));
      const Collective& col = t.collectives[c.index];
      auto& a = by[{to_string(col.kind), col.bytes}];
      a[0] += 1;
      a[1] += static_cast<double>(c.measured_ns);
      a[2] += static_cast<double>(c.model_ns);
    }
    std::sort(err.begin(), err.end());
    out << "  collective model (" << r.collective_spec << ") vs the last arrival's kernel: " << err.size()
        << " collectives, median |error| " << pct(err[err.size() / 2]) << "\n";
    std::size_t shown = 0;
    for (auto& [k, a] : by) {
      if (++shown > 6) break;
      out << "    " << k.first << " " << format_bytes(k.second) << " x" << static_cast<std::size_t>(a[0]) << ": measured "
          << format_duration(static_cast<TimeNs>(a[1] / a[0])) << ", model " << format_duration(static_cast<TimeNs>(a[2] / a[0])) << " ("
          << signed_pct(a[2] / a[1] - 1) << ")\n";
    }
  }
  if (!w.empty()) out << "  longest waits:\n";
  for (std::size_t i = 0; i < w.size() && i < 5; ++i) {
    const Collective& c = t.collectives[w[i].index];
    out << "    " << to_string(c.kind) << " #" << c.seq << (c.bytes ? " (" + format_bytes(c.bytes) + ")" : "") << " waited "
        << format_duration(w[i].arrival_spread_ns) << " for rank " << w[i].straggler << "\n";
  }
}
}  // namespace

namespace {
// The trace: its format, GPUs, lanes and ops; the GPU span, simulated and measured.
void print_header(const ReplayReport& r, std::ostream& out) {
  const Trace& t = *r.trace;
  std::size_t counts[4] = {};
  std::size_t threads = 0, streams = 0;
  for (const Op& o : t.ops) counts[static_cast<int>(o.kind)]++;
  for (const Lane& l : t.lanes) (l.kind == LaneKind::Thread ? threads : streams)++;
  out << "bneck replay: " << (r.measured_ranks.size() > 1 ? std::to_string(r.measured_ranks.size()) + " ranks: " : "") << t.source << "\n";
  out << "  " << t.format << "; ";
  for (std::size_t d = 0; d < t.devices.size(); ++d) {
    std::size_t same = 1;
    while (d + same < t.devices.size() && t.devices[d + same].name == t.devices[d].name) ++same;
    out << (d ? ", " : "") << (same > 1 ? std::to_string(same) + " x " : "")
        << (t.devices[d].name.empty() ? "unnamed GPU" : t.devices[d].name)
        << (t.devices[d].sm_count ? " (" + std::to_string(t.devices[d].sm_count) + " SMs)" : "");
    d += same - 1;
  }
  out << "; " << t.processes.size() << " process(es), " << threads << " thread(s), " << streams << " stream(s)\n";
  out << "  ops: " << counts[1] << " kernels, " << counts[2] << " memcpy, " << counts[3] << " memset, " << counts[0]
      << " API calls; graph: " << r.graph->num_edges() << " edges; model: " << r.model << "\n\n";

  double err =
      r.measured.length() ? static_cast<double>(r.simulated.length() - r.measured.length()) / static_cast<double>(r.measured.length()) : 0;
  out << "GPU span (first device op start to last end)\n";
  if (!t.measured)
    out << "  simulated " << format_duration(r.simulated.length()) << "   (a workload or execution trace: nothing measured to compare)\n\n";
  else
    out << "  simulated " << format_duration(r.simulated.length()) << "   measured " << format_duration(r.measured.length()) << "   error "
        << (err >= 0 ? "+" : "") << pct(err) << "\n\n";
}

// Busy and overlapped time summed over devices, simulated and measured.
void print_overlap(const ReplayReport& r, std::ostream& out) {
  auto ov_row = [&](const char* name, TimeNs sim, TimeNs meas) {
    double span = static_cast<double>(std::max<TimeNs>(1, r.simulated_overlap.window_ns));
    out << "  " << pad(name, 26) << lpad(format_duration(sim), 14) << lpad(pct(static_cast<double>(sim) / span), 10)
        << lpad(format_duration(meas), 14) << "\n";
  };
  out << "Overlap, summed over devices     simulated  of window      measured\n";
  const Overlap& s = r.simulated_overlap;
  const Overlap& m = r.measured_overlap;
  ov_row("compute", s.compute_ns, m.compute_ns);
  ov_row("memcpy/memset", s.memcpy_ns, m.memcpy_ns);
  ov_row("communication", s.communication_ns, m.communication_ns);
  ov_row("compute || communication", s.compute_comm_overlap_ns, m.compute_comm_overlap_ns);
  ov_row("exposed communication", s.exposed_communication_ns, m.exposed_communication_ns);
  ov_row("compute || memcpy", s.compute_memcpy_overlap_ns, m.compute_memcpy_overlap_ns);
  ov_row("GPU busy", s.gpu_busy_ns, m.gpu_busy_ns);
  ov_row("GPU idle", s.gpu_idle_ns, m.gpu_idle_ns);
}

// The critical path: its breakdown and its device ops.
void print_critical_path(const ReplayReport& r, const ReplayOptions& opt, std::ostream& out) {
  const Trace& t = *r.trace;
  const auto& cp = r.critical_path;
  if (!cp.empty()) {
    OpId last = cp.back();
    out << "Critical path: " << cp.size() << " ops, " << format_duration(r.sim.end[last] - r.sim.start[cp.front()]) << ", ending with "
        << short_name(t.name(t.ops[last])) << " at +" << format_duration(r.sim.end[last] - r.simulated.begin) << "\n";
    for (auto& [k, v] : path_breakdown(*r.graph, r.sim, cp)) out << "  " << pad(k, 26) << lpad(format_duration(v), 14) << "\n";
    // By name id first (a path has millions of ops and a handful of names), then by name.
    std::unordered_map<StrId, std::pair<std::size_t, TimeNs>> by_id;
    for (OpId n : cp)
      if (is_device_op(t.ops[n].kind)) {
        auto& e = by_id[t.ops[n].name];
        e.first++;
        e.second += r.sim.end[n] - r.sim.start[n];
      }
    std::map<std::string, std::pair<std::size_t, TimeNs>> on_cp;
    for (const auto& [id, v] : by_id) {
      auto& e = on_cp[t.strings.str(id)];
      e.first += v.first;
      e.second += v.second;
    }
    std::vector<std::pair<std::string, std::pair<std::size_t, TimeNs>>> rows(on_cp.begin(), on_cp.end());
    std::sort(rows.begin(), rows.end(),
              [](auto& a, auto& b) { return a.second.second != b.second.second ? a.second.second > b.second.second : a.first < b.first; });
    out << "  device ops on the critical path:\n";
    for (std::size_t i = 0; i < rows.size() && i < opt.top; ++i)
      out << "    " << pad(short_name(rows[i].first, 56), 58) << lpad(std::to_string(rows[i].second.first) + "x", 8)
          << lpad(format_duration(rows[i].second.second), 14) << "\n";
    out << "\n";
  }
}

// Top device ops by total time, with their share of the critical path and their least slack.
void print_top_ops(const ReplayReport& r, const ReplayOptions& opt, std::ostream& out) {
  const Trace& t = *r.trace;
  const auto& cp = r.critical_path;
  struct Agg {
    std::size_t n = 0;
    TimeNs total = 0, on_cp = 0, min_slack = std::numeric_limits<TimeNs>::max();
  };
  std::vector<Agg> by_id(t.strings.size());  // by name id (millions of ops, few names)
  std::vector<bool> in_cp(t.ops.size(), false);
  for (OpId n : cp) in_cp[n] = true;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    if (!is_device_op(t.ops[i].kind)) continue;
    Agg& a = by_id[t.ops[i].name];
    a.n++;
    TimeNs d = r.sim.end[i] - r.sim.start[i];
    a.total += d;
    if (in_cp[i]) a.on_cp += d;
    a.min_slack = std::min(a.min_slack, r.slack[i]);
  }
  std::vector<std::pair<StrId, Agg>> top;
  for (StrId id = 0; id < by_id.size(); ++id)
    if (by_id[id].n) top.emplace_back(id, by_id[id]);
  std::sort(top.begin(), top.end(),
            [](auto& a, auto& b) { return a.second.total != b.second.total ? a.second.total > b.second.total : a.first < b.first; });
  out << "Top device ops by total time\n  " << pad("name", 48) << lpad("count", 8) << lpad("total", 13) << lpad("avg", 13)
      << lpad("on crit. path", 15) << lpad("min slack", 13) << "\n";
  for (std::size_t i = 0; i < top.size() && i < opt.top; ++i) {
    const Agg& a = top[i].second;
    out << "  " << pad(short_name(t.strings.str(top[i].first), 46), 48) << lpad(std::to_string(a.n), 8)
        << lpad(format_duration(a.total), 13) << lpad(format_duration(a.total / static_cast<TimeNs>(a.n)), 13)
        << lpad(format_duration(a.on_cp), 15) << lpad(format_duration(a.min_slack), 13) << "\n";
  }
  out << "\n";
}

// The ranges --range selects: measured and simulated spans, the first one's critical path and slack.
void print_ranges(const ReplayReport& r, const ReplayOptions& opt, std::ostream& out) {
  out << "Ranges matching '" << *opt.range_regex << "': " << r.ranges.size() << "\n";
  std::vector<double> errs;
  const bool ranks = r.measured_ranks.size() > 1;
  out << "  " << (ranks ? pad("rank", 6) : "") << pad("range", 28) << lpad("start", 14) << lpad("measured", 14) << lpad("simulated", 14)
      << lpad("error", 10) << "\n";
  for (const auto& rr : r.ranges) {
    double e = rr.measured_span_ns
                   ? static_cast<double>(rr.simulated_span_ns - rr.measured_span_ns) / static_cast<double>(rr.measured_span_ns)
                   : 0;
    if (rr.measured_span_ns) errs.push_back(std::fabs(e));
    out << "  " << (ranks ? pad(std::to_string(rr.rank), 6) : "") << pad(short_name(rr.name, 26), 28)
        << lpad(format_duration(rr.start_ns - r.measured.begin), 14) << lpad(format_duration(rr.measured_span_ns), 14)
        << lpad(format_duration(rr.simulated_span_ns), 14) << lpad(signed_pct(e), 10) << "\n";
  }
  if (!errs.empty()) {
    out << "  median |error| " << pct(median(errs)) << ", max |error| " << pct(*std::max_element(errs.begin(), errs.end())) << "\n";
    const RangeResult& first = r.ranges.front();
    std::vector<std::string> names;
    for (OpId n : first.critical_path)
      if (r.graph->is_device(n)) names.push_back(r.graph->name(n));
    out << "  critical path of " << first.name;
    if (ranks) out << " (rank " << first.rank << ")";
    out << ":\n" << runs_text(names, "    ") << "\n  off the path, with slack:\n";
    std::unordered_set<OpId> oncp(first.critical_path.begin(), first.critical_path.end());
    names.clear();
    for (auto& [o, sl] : first.slack)
      if (!oncp.count(o)) names.push_back(short_name(r.graph->name(o), 40) + " (" + format_duration(sl) + ")");
    out << runs_text(names, "    ") << "\n";
  }
  out << "\n";
}

// Roofline by op class, and the kernels that moved most (model mode).
void print_roofline(const ReplayReport& r, const ReplayOptions& opt, std::ostream& out) {
  for (const auto& a : r.assumptions) out << "Assumed on " << r.target_hw << ": " << a << "\n";
  out << "Roofline by op class (" << r.model << " durations; trace's GPU " << r.source_hw << ", target " << r.target_hw << ")\n  "
      << pad("class", 14) << lpad("ops", 7) << lpad("shapes", 8) << lpad("measured", 13) << lpad("model here", 13) << lpad("model err", 11)
      << lpad("target", 13) << lpad("bound", 10) << lpad("of peak", 9) << "\n";
  for (const auto& c : r.classes) {
    double e = c.measured_ns ? static_cast<double>(c.model_source_ns - c.measured_ns) / static_cast<double>(c.measured_ns) : 0;
    out << "  " << pad(c.cls, 14) << lpad(std::to_string(c.kernels), 7) << lpad(std::to_string(c.with_shapes), 8)
        << lpad(format_duration(c.measured_ns), 13) << lpad(format_duration(c.model_source_ns), 13) << lpad(signed_pct(e), 11)
        << lpad(format_duration(c.predicted_ns), 13) << lpad(c.bound, 10)
        << lpad(c.achieved_fraction > 0 ? pct(c.achieved_fraction) : "-", 9) << "\n";
  }
  out << "  ('model here': the models alone on the trace's GPU; 'of peak': the share of the binding resource's\n"
         "   peak the measured kernels reached; 'shapes': kernels whose work came from recorded op shapes or launch geometry)\n";
  out << "Kernels that moved most\n";
  for (std::size_t i = 0; i < r.moved.size() && i < opt.top; ++i) {
    const auto& mk = r.moved[i];
    out << "  " << pad(short_name(mk.name, 44), 46) << lpad(std::to_string(mk.count) + "x", 6) << lpad(format_duration(mk.measured_ns), 13)
        << " -> " << lpad(format_duration(mk.predicted_ns), 12) << "  " << mk.reason << "\n";
  }
  out << "\n";
}

// Device ops slowed by concurrent ones.
void print_sharing(const ReplayReport& r, const ReplayOptions& opt, std::ostream& out) {
  out << "Sharing: device ops slowed by concurrent ones (SMs in start order, HBM shared; " << format_duration(r.lost_to_sharing_ns)
      << " lost in all; " << r.drained_kernels << " kernels drained into later ones)\n  " << pad("name", 48) << lpad("count", 8)
      << lpad("alone", 13) << lpad("shared", 13) << lpad("bound by", 10) << "\n";
  for (std::size_t i = 0; i < r.shared.size() && i < opt.top; ++i) {
    const SharedRow& row = r.shared[i];
    out << "  " << pad(short_name(row.name, 46), 48) << lpad(std::to_string(row.count), 8) << lpad(format_duration(row.alone_ns), 13)
        << lpad(format_duration(row.shared_ns), 13) << lpad(row.bound, 10) << "\n";
  }
  out << "\n";
}

void print_anomalies(const ReplayReport& r, std::ostream& out) {
  const Trace& t = *r.trace;
  std::map<std::string, Anomaly> all = t.anomalies;
  for (auto& [k, a] : r.graph->anomalies) all[k] = a;
  if (!all.empty()) {
    out << "Anomalies (counted, not fatal)\n";
    for (auto& [k, a] : all)
      out << "  " << pad(k, 56) << lpad(std::to_string(a.count), 8) << "  e.g. " << short_name(a.example, 120) << "\n";
  }
}
}  // namespace

void print_replay_text(const ReplayReport& r, const ReplayOptions& opt, std::ostream& out) {
  const Trace& t = *r.trace;
  print_header(r, out);
  print_overlap(r, out);

  out << "\n";
  if (r.measured_ranks.size() > 1 || !t.collectives.empty()) print_ranks(r, out);
  print_critical_path(r, opt, out);
  print_top_ops(r, opt, out);
  if (opt.range_regex) print_ranges(r, opt, out);
  if (!r.classes.empty()) print_roofline(r, opt, out);
  if (!r.shared.empty()) print_sharing(r, opt, out);
  print_anomalies(r, out);
}

void write_two_timelines(std::ostream& out, const Trace& t, const Schedule& a, const std::string& name_a, const Schedule& b,
                         const std::string& name_b, const std::function<std::string(OpId)>& extra_args, const Graph* graph_b) {
  TimeNs base = 0;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    TimeNs m = std::min({t.ops[i].start, a.start(i), b.start(i)});
    base = i == 0 ? m : std::min(base, m);
  }
  auto us = [&](TimeNs ns) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e3);
    return std::string(buf);
  };
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  out << json({{"ph", "M"}, {"name", "process_name"}, {"pid", 1}, {"args", {{"name", name_a}}}})
             .dump(-1, ' ', false, json::error_handler_t::replace);
  out << ",\n"
      << json({{"ph", "M"}, {"name", "process_name"}, {"pid", 2}, {"args", {{"name", name_b}}}})
             .dump(-1, ' ', false, json::error_handler_t::replace);
  for (std::size_t l = 0; l < t.lanes.size(); ++l)
    for (int pid : {1, 2})
      out << ",\n"
          << json({{"ph", "M"},
                   {"name", "thread_name"},
                   {"pid", pid},
                   {"tid", l},
                   {"args", {{"name", t.lane_label(static_cast<LaneId>(l))}}}})
                 .dump(-1, ' ', false, json::error_handler_t::replace);
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    std::string nm = json(t.name(o)).dump(-1, ' ', false, json::error_handler_t::replace);
    for (int pid : {1, 2}) {
      const Schedule& s = pid == 1 ? a : b;
      out << ",\n{\"ph\":\"X\",\"pid\":" << pid << ",\"tid\":" << o.lane << ",\"name\":" << nm << ",\"cat\":\"" << to_string(o.kind)
          << "\",\"ts\":" << us(s.start(i) - base) << ",\"dur\":" << us(s.end(i) - s.start(i)) << ",\"args\":{\"id\":" << i
          << (pid == 2 && extra_args ? extra_args(i) : std::string()) << "}}";
    }
  }
  // The second schedule's synthetic nodes (what-if transforms) and the lanes they added.
  if (graph_b) {
    for (std::size_t l = t.lanes.size(); l < graph_b->lanes.size(); ++l)
      out << ",\n"
          << json({{"ph", "M"},
                   {"name", "thread_name"},
                   {"pid", 2},
                   {"tid", l},
                   {"args", {{"name", graph_b->lane_label(static_cast<LaneId>(l))}}}})
                 .dump(-1, ' ', false, json::error_handler_t::replace);
    for (NodeId n = static_cast<NodeId>(t.ops.size()); n < graph_b->num_nodes(); ++n) {
      if (graph_b->removed(n)) continue;
      const SideInfo* si = graph_b->side_of(n);
      out << ",\n{\"ph\":\"X\",\"pid\":2,\"tid\":" << graph_b->lane(n)
          << ",\"name\":" << json(graph_b->name(n)).dump(-1, ' ', false, json::error_handler_t::replace) << ",\"cat\":\""
          << to_string(graph_b->kind(n)) << "\",\"ts\":" << us(b.start(n) - base) << ",\"dur\":" << us(b.end(n) - b.start(n))
          << ",\"args\":{\"id\":" << n
          << ",\"synthetic\":" << json(si ? si->transform : std::string()).dump(-1, ' ', false, json::error_handler_t::replace) << "}}";
    }
  }
  out << "\n]}\n";
}

void write_chrome_trace(const ReplayReport& r, std::ostream& out) {
  const Trace& t = *r.trace;
  std::vector<bool> on_cp(t.ops.size(), false);
  for (OpId n : r.critical_path) on_cp[n] = true;
  write_two_timelines(
      out, t, measured_schedule(t), "measured (trace)", sim_schedule(r.sim), "simulated (bneck, " + r.model + ")",
      [&](OpId i) { return ",\"slack_ns\":" + std::to_string(r.slack[i]) + ",\"critical\":" + (on_cp[i] ? "true" : "false"); });
}

}  // namespace bneck