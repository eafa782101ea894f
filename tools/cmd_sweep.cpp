// bneck sweep TRACE --hw A,B,... [--scenario F ...] [--range REGEX] [--jobs N] [--csv FILE]
//                   [--vary FIELD=LO..HI:N] [--svg FILE]
// The cross product of hardware specs and scenarios (plus "baseline": no transform), each case a
// what-if run in its own thread over one shared graph; one CSV row per case.
#include <atomic>
#include <cmath>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "models/kernel_work.hpp"
#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/trace_options.hpp"
#include "tools/mpi_sweep.hpp"
#include "tools/output.hpp"
#include "tools/views/plot.hpp"
#include "models/whatif/sweep.hpp"
#include "tools/views/whatif_view.hpp"
#include "traces/importer.hpp"

namespace bneck {
using nlohmann::json;

namespace {

using Case = SweepCase;

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ','))
    if (!x.empty()) out.push_back(x);
  return out;
}

// FIELD=LO..HI:N over gpu fields with units; writes spec overlays into `dir`.
struct Vary {
  std::string field, unit_kind;
  std::vector<std::string> values;
};

Vary parse_vary(const std::string& s) {
  static const std::map<std::string, std::string> fields = {{"hbm_bandwidth", "memory_bandwidth"},
                                                            {"memory_bandwidth", "memory_bandwidth"},
                                                            {"l2_bandwidth", "l2_bandwidth"},
                                                            {"sm_count", "sm_count"},
                                                            {"clock", "clock"},
                                                            {"launch_latency", "launch_latency"},
                                                            {"kernel_tail", "kernel_tail"}};
  auto eq = s.find('='), dots = s.find(".."), colon = s.rfind(':');
  if (eq == std::string::npos || dots == std::string::npos || colon == std::string::npos || colon < dots)
    throw InputError("--vary " + s + ": expected FIELD=LO..HI:N, e.g. hbm_bandwidth=2TB/s..8TB/s:7");
  Vary v;
  std::string key = s.substr(0, eq);
  auto it = fields.find(key);
  if (it == fields.end())
    throw InputError("--vary " + s + ": FIELD is one of hbm_bandwidth, l2_bandwidth, sm_count, clock, launch_latency, kernel_tail");
  v.field = it->second;
  std::string lo = s.substr(eq + 1, dots - eq - 1), hi = s.substr(dots + 2, colon - dots - 2);
  int n = 0;
  try {
    n = std::stoi(s.substr(colon + 1));
  } catch (...) { n = 0; }
  if (n < 2 || n > 1000) throw InputError("--vary " + s + ": N must be 2..1000");
  auto parse = [&](const std::string& x) -> std::pair<double, std::string> {
    if (v.field == "sm_count") return {std::stod(x), ""};
    if (v.field == "clock") return {parse_frequency(x), "Hz"};
    if (v.field == "launch_latency" || v.field == "kernel_tail") return {static_cast<double>(parse_duration(x)), "ns"};
    return {parse_bandwidth(x), "B/s"};
  };
  auto [a, unit] = parse(lo);
  double b = parse(hi).first;
  for (int k = 0; k < n; ++k) {
    double x = a + (b - a) * k / (n - 1);
    if (v.field == "sm_count")
      v.values.push_back(std::to_string(std::llround(x)));
    else if (unit == "Hz")
      v.values.push_back(format_frequency(x));
    else if (unit == "ns")
      v.values.push_back(std::to_string(std::llround(x)) + " ns");
    else
      v.values.push_back(format_bandwidth(x));
  }
  return v;
}

// The cases: every --hw (or each of its --vary overlays, inline specs kept in memory) by every scenario.
std::vector<Case> make_cases(const std::vector<std::string>& hws, const std::optional<Vary>& vy, const std::vector<Scenario>& scs) {
  std::vector<Case> cases;
  for (const auto& h : hws) {
    (void)load_hw(h);                                        // fail early with the preset list
    std::vector<std::pair<std::string, std::string>> specs;  // (spec to load, vary value)
    if (!vy)
      specs.push_back({h, ""});
    else
      for (const auto& val : vy->values) {
        json overlay = {{"name", h + " " + vy->field + "=" + val},
                        {"extends", h},
                        {"gpu", json::object()},
                        {"sources", {{"gpu." + vy->field, "bneck sweep --vary"}}}};
        overlay["gpu"][vy->field] = vy->field == "sm_count" ? json(std::stoul(val)) : json(val);
        specs.push_back({overlay.dump(), val});  // an inline spec: no temporary file
      }
    for (const auto& [spec, val] : specs)
      for (const auto& sc : scs) {
        Case c;
        c.hw = h;
        c.scenario = sc.name;
        c.vary_value = val;
        c.transforms = sc.transforms;
        c.transforms.push_back(parse_transform("hw", spec));
        cases.push_back(std::move(c));
      }
  }
  return cases;
}

// Each target's error bar: the held-out median |error| per kernel class of its calibrated overlay
// (the largest, for the CSV, and all of them in words), none for an uncalibrated preset.
using Bars = std::map<std::string, std::pair<double, std::string>>;
Bars error_bars(const std::vector<std::string>& hws) {
  Bars bars;
  for (const auto& h : hws) {
    const HwSpec spec = load_target_hw(h);
    double worst = 0;
    std::string text;
    for (const auto& [cls, e] : spec.gpu.held_out_error) {
      worst = std::max(worst, e);
      text += (text.empty() ? "" : ", ") + cls + " " + fmt_num("%.1f", e * 100) + " %";
    }
    bars[h] = {worst, text.empty() ? "-" : text};
  }
  return bars;
}

void write_csv(std::ostream& o, const Trace& t, const std::optional<Vary>& vy, const std::vector<Case>& cases, Bars& bars) {
  o << "trace,hw," << (vy ? vy->field + "," : "")
    << "scenario,baseline_ns,predicted_ns,speedup,compute_bound_ns,memory_bound_ns,latency_bound_ns,error_bar\n";
  for (const auto& c : cases) {
    o << '"' << t.source << "\"," << c.hw << ",";
    if (vy) o << '"' << c.vary_value << "\",";
    o << c.scenario << "," << c.baseline << "," << c.predicted << ","
      << (c.predicted ? static_cast<double>(c.baseline) / static_cast<double>(c.predicted) : 0.0) << "," << c.by_bound[0] << ","
      << c.by_bound[1] << "," << c.by_bound[2] << "," << bars[c.hw].first << "\n";
  }
}

// Predicted time over the varied field, one line per target and scenario.
void write_svg(std::ostream& o, const Trace& t, const Vary& vy, const std::vector<Case>& cases, const std::vector<std::string>& hws,
               const std::vector<Scenario>& scs) {
  double ymax = 0;
  for (const auto& c : cases) ymax = std::max(ymax, static_cast<double>(c.predicted));
  ymax *= 1.1;
  const std::size_t nv = vy.values.size();
  PlotAxis x{0, static_cast<double>(nv - 1), false, vy.field, {}, {}};
  for (std::size_t k = 0; k < nv; ++k) x.ticks.emplace_back(static_cast<double>(k), vy.values[k]);
  SvgPlot p(800, 500, t.source + ": predicted time over " + vy.field, x,
            PlotAxis{0, ymax, false, "", [](double v) { return format_duration(static_cast<TimeNs>(v)); }, {}}, 90, 160, 40, 60);
  p.grid();
  std::size_t line = 0;
  std::vector<std::pair<std::string, std::string>> leg;
  for (const auto& h : hws)
    for (const auto& sc : scs) {
      std::vector<std::pair<double, double>> pts;
      std::size_t k = 0;
      for (const auto& c : cases)
        if (c.hw == h && c.scenario == sc.name) pts.emplace_back(static_cast<double>(k++), static_cast<double>(c.predicted));
      p.polyline(pts, SvgPlot::color(line));
      leg.emplace_back(SvgPlot::color(line), h + " / " + sc.name);
      ++line;
    }
  p.legend(leg, 800 - 150, 50);
  p.write(o);
}

void print_table(const std::optional<Vary>& vy, const std::vector<Case>& cases, Bars& bars) {
  print_text("%-26s %-18s %-16s %14s %14s %9s  %s\n", "hw", vy ? vy->field.c_str() : "", "scenario", "baseline", "predicted", "speedup",
             "error bar (held-out kernels)");
  for (const auto& c : cases)
    print_text("%-26s %-18s %-16s %14s %14s %8.3fx  %s\n", c.hw.c_str(), c.vary_value.c_str(), c.scenario.c_str(),
               format_duration(c.baseline).c_str(), format_duration(c.predicted).c_str(),
               c.predicted ? static_cast<double>(c.baseline) / static_cast<double>(c.predicted) : 0.0, bars[c.hw].second.c_str());
}

}  // namespace

void add_sweep(CLI::App& sub, Action& action) {
  static std::vector<std::string> trace;
  static std::string hw_list, range, csv, svg, vary, source_hw;
  static std::vector<std::string> scenarios;
  static unsigned jobs = 0;
  sub.add_option("TRACE", trace, "trace file(s): several files (or a directory) = one trace per rank")->required();
  sub.add_option("--hw", hw_list, "comma-separated presets or spec files")->required();
  sub.add_option("--scenario", scenarios, "scenario JSON files (each a list of transforms); 'baseline' always runs");
  sub.add_option("--range", range, "the mean over the NVTX ranges matching REGEX, warm-ups left out (default: GPU span)");
  sub.add_option("--jobs", jobs, "threads (default: hardware concurrency)");
  sub.add_option("--csv", csv, "write the table as CSV to FILE ('-' for stdout)");
  sub.add_option("--vary", vary, "sweep a spec field of each --hw: FIELD=LO..HI:N (e.g. hbm_bandwidth=2TB/s..8TB/s:7)");
  sub.add_option("--svg", svg, "with --vary: plot predicted time over the field to FILE");
  sub.add_option("--source-hw", source_hw, "the trace's GPU, if its device name does not tell");
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.callback([&action] {
    action = [] {
      Trace t = load_with_options(trace, topt, {range});
      std::vector<Scenario> scs{{"baseline", {}}};
      for (const auto& f : scenarios) scs.push_back(load_scenario(f));
      std::vector<std::string> hws = split_list(hw_list);
      if (hws.empty()) throw InputError("--hw: give at least one spec");
      std::optional<Vary> vy;
      if (!vary.empty())
        vy = parse_vary(vary);
      else if (!svg.empty())
        throw InputError("--svg needs --vary");
      std::vector<Case> cases = make_cases(hws, vy, scs);
      std::optional<Regex> re;
      if (!range.empty()) re = range_regex(range);
      if (jobs > 1024) throw InputError("--jobs " + std::to_string(jobs) + ": at most 1024 threads");
      MpiWorld world;
      unsigned threads = jobs;
      if (world.active && threads == 0) threads = std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(world.size));
      run_sweep(t, source_hw, re, threads, cases, static_cast<std::size_t>(world.rank), static_cast<std::size_t>(world.size),
                world.rank == 0);
      mpi_gather_cases(world, cases);
      if (world.rank != 0) return 0;  // rank 0 writes every output
      for (const auto& c : cases)
        if (!c.error.empty()) throw InputError("sweep case " + c.hw + " / " + c.scenario + ": " + c.error);
      Bars bars = error_bars(hws);
      if (!csv.empty()) write_output(csv, [&](std::ostream& o) { write_csv(o, t, vy, cases, bars); });
      if (!svg.empty()) write_output(svg, [&](std::ostream& o) { write_svg(o, t, *vy, cases, hws, scs); });
      if (csv != "-") print_table(vy, cases, bars);
      return 0;
    };
  });
}

}  // namespace bneck
