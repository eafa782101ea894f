#include "tools/views/advise_view.hpp"

#include <cstdio>

#include "sim/base/units.hpp"
#include "tools/views/whatif_view.hpp"

namespace bneck {

namespace {

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    const bool quote = a.find(' ') != std::string::npos || a.find('~') != std::string::npos;
    s += (s.empty() ? "" : " ") + (quote ? "'" + a + "'" : a);
  }
  return s;
}

double speedup(const AdviceSuggestion& s) {
  return s.predicted_ns > 0 ? static_cast<double>(s.baseline_ns) / static_cast<double>(s.predicted_ns) : 0;
}
double throughput(const AdviceSuggestion& s) { return s.effective_ns() > 0 ? static_cast<double>(s.baseline_ns) / s.effective_ns() : 0; }

}  // namespace

nlohmann::json advice_json(const Advice& a) {
  nlohmann::json j;
  j["source_hw"] = a.source_hw;
  j["unprofiled"] = a.unprofiled;
  j["assumed_hw"] = a.assumed_hw;
  j["capture"] = a.capture;
  j["window"] = a.window;
  j["scope"] = a.scope;
  j["scope_instances"] = a.scope_instances;
  j["span_ns"] = a.span_ns;
  j["bottleneck"] = {{"phase", "run"}, {"class", a.bottleneck}, {"evidence", a.evidence}};
  j["critical_path_ns"] = a.path_ns;
  j["critical_path_by_class"] = nlohmann::json::object();
  for (const auto& [c, ns] : a.path_by_class) j["critical_path_by_class"][c] = ns;
  j["host_terms"] = nlohmann::json::object();
  for (const auto& [c, ns] : a.host_terms) j["host_terms"][c] = ns;
  j["host_note"] = a.host_note;
  j["host_pace"] = a.host_pace;
  j["gpu_busy_ns"] = a.overlap.gpu_busy_ns;
  j["gpu_idle_ns"] = a.overlap.gpu_idle_ns;
  j["exposed_communication_ns"] = a.overlap.exposed_communication_ns;
  j["phases"] = nlohmann::json::array();
  for (const AdvicePhase& p : a.phases)
    j["phases"].push_back({{"phase", p.name},
                           {"instances", p.instances},
                           {"span_ns", p.span_ns},
                           {"busy_ns", p.busy_ns},
                           {"bottleneck", p.bottleneck},
                           {"evidence", p.evidence}});
  j["roofline"] = nlohmann::json::array();
  for (const ClassRow& r : a.classes)
    if (r.measured_ns > 0)
      j["roofline"].push_back({{"class", r.cls},
                               {"kernels", r.kernels},
                               {"measured_ns", r.measured_ns},
                               {"flops", r.flops},
                               {"bytes", r.bytes},
                               {"bound", r.bound},
                               {"achieved_fraction_of_peak", r.achieved_fraction}});
  j["kernels"] = nlohmann::json::array();
  for (const AdviceKernel& k : a.kernels)
    j["kernels"].push_back({{"name", k.name},
                            {"count", k.count},
                            {"total_ns", k.total_ns},
                            {"blocks", k.blocks},
                            {"threads_per_block", k.threads},
                            {"blocks_per_sm", k.blocks_per_sm},
                            {"occupancy_limiter", k.limiter},
                            {"waves", k.waves},
                            {"wave_efficiency", k.wave_efficiency},
                            {"sm_fill", k.sm_fill}});
  auto list = [&](const std::vector<AdviceSuggestion>& v) {
    nlohmann::json out = nlohmann::json::array();
    for (const AdviceSuggestion& s : v) {
      nlohmann::json e = {{"title", s.title},
                          {"args", s.args},
                          {"gpus", s.gpus},
                          {"baseline_ns", s.baseline_ns},
                          {"predicted_ns", s.predicted_ns},
                          {"amdahl_ns", s.amdahl_ns},
                          {"error_bar", error_bar_json(s.error_bar)},
                          {"tradeoff", s.tradeoff},
                          {"speedup", speedup(s)},
                          {"throughput", throughput(s)},
                          {"after", s.after}};
      if (!s.error.empty()) e["error"] = s.error;
      out.push_back(e);
    }
    return out;
  };
  j["verdict"] = a.verdict;
  j["suggestions"] = list(a.suggestions);  // changes to the program
  j["hardware"] = list(a.hardware);        // other GPUs, more GPUs
  j["plan"] = nlohmann::json::array();     // following the bottleneck: each change on top of the ones before
  for (const AdvicePlanStep& p : a.plan)
    j["plan"].push_back({{"title", p.title},
                         {"args", p.args},
                         {"baseline_ns", p.baseline_ns},
                         {"predicted_ns", p.predicted_ns},
                         {"speedup", p.predicted_ns > 0 ? static_cast<double>(p.baseline_ns) / static_cast<double>(p.predicted_ns) : 0},
                         {"error_bar", error_bar_json(p.error_bar)},
                         {"after", p.after}});
  return j;
}

void print_advice_text(const Advice& a, const std::string& source, std::ostream& out) {
  char b[400];
  out << "bneck advise: " << source << "\n  trace's GPU " << a.source_hw << "; the run "
      << (a.unprofiled.empty() ? std::string("as replayed") : "as replayed without the profiler's host cost (" + a.unprofiled + ")")
      << "\n";
  if (!a.assumed_hw.empty()) out << "  " << a.assumed_hw << "\n";
  if (!a.capture.empty()) out << "  " << a.capture << "\n";  // wrapped by the command's output (tools/output.hpp)
  if (!a.window.empty()) {                                   // lines: which ops, how like the run, why
    std::string rest = a.window;
    out << "  advised on a stretch of the run:";
    for (std::size_t at; (at = rest.find('\n')) != std::string::npos; rest.erase(0, at + 1)) out << " " << rest.substr(0, at) << "\n   ";
    out << " " << rest << "\n";
  }
  if (!a.scope.empty()) out << "  advised on " << a.scope << "\n";  // the command's output wraps a long line (tools/output.hpp)
  out << "\n";
  out << ("Verdict: " + a.verdict).substr(0, 200) << "\n\n";
  out << "Bottleneck: " << a.bottleneck << "\n  " << a.evidence << "\n";
  for (const AdvicePhase& p : a.phases) {
    std::snprintf(b, sizeof b, "  %-11s x%-4zu span %10s  busy %10s  %s: %s", p.name.c_str(), p.instances,
                  format_duration(p.span_ns).c_str(), format_duration(p.busy_ns).c_str(), p.bottleneck.c_str(), p.evidence.c_str());
    out << std::string(b).substr(0, 200) << "\n";
  }
  if (a.scope_instances > 0)
    out << "\nWhere the time goes (the critical paths of the " << a.scope_instances << " instances, " << format_duration(a.path_ns)
        << " in all)\n";
  else
    out << "\nWhere the time goes (the critical path, " << format_duration(a.path_ns) << ")\n";
  for (const auto& [c, ns] : a.path_by_class) {
    std::snprintf(b, sizeof b, "  %-24s %12s  %5.1f %%", c.c_str(), format_duration(ns).c_str(),
                  a.path_ns ? 100.0 * static_cast<double>(ns) / static_cast<double>(a.path_ns) : 0.0);
    out << b << "\n";
  }
  std::snprintf(b, sizeof b, "  GPU busy %s, idle %s, exposed communication %s", format_duration(a.overlap.gpu_busy_ns).c_str(),
                format_duration(a.overlap.gpu_idle_ns).c_str(), format_duration(a.overlap.exposed_communication_ns).c_str());
  out << b << "\n";
  if (!a.host_note.empty()) {
    out << "\nThe host's part of the critical path, by cause\n";
    for (const auto& [c, ns] : a.host_terms) {
      std::snprintf(b, sizeof b, "  %-36s %12s  %5.1f %%", c.c_str(), format_duration(ns).c_str(),
                    a.path_ns ? 100.0 * static_cast<double>(ns) / static_cast<double>(a.path_ns) : 0.0);
      out << b << "\n";
    }
    out << "  " << a.host_note << "\n  " << a.host_pace << "\n";
  }
  out << "\nKernels on the roofline (time-weighted, measured)\n";
  for (const ClassRow& r : a.classes)
    if (r.measured_ns > 0) {
      std::snprintf(b, sizeof b, "  %-12s %6zu kernels %12s  %-8s bound, %5.1f %% of that peak", r.cls.c_str(), r.kernels,
                    format_duration(r.measured_ns).c_str(), r.bound.c_str(), r.achieved_fraction * 100);
      out << b << "\n";
    }
  if (!a.kernels.empty()) out << "\nThe kernels that take most time (their longest launch on the trace's GPU)\n";
  for (const AdviceKernel& k : a.kernels) {
    std::snprintf(b, sizeof b, "  %-50.50s x%-5zu %12s  %8llu blocks x %4u threads, %2u per SM (%s), %.2f waves (%.0f %% full)",
                  k.name.c_str(), k.count, format_duration(k.total_ns).c_str(), static_cast<unsigned long long>(k.blocks), k.threads,
                  k.blocks_per_sm, k.limiter.c_str(), k.waves, k.wave_efficiency * 100);
    std::string line = std::string(b).substr(0, 200);
    if (k.sm_fill < 1) {
      std::snprintf(b, sizeof b, "; SMs %.0f %% as loaded as the busiest", k.sm_fill * 100);
      line += b;
    }
    out << line << "\n";
  }
  auto print_list = [&](const std::vector<AdviceSuggestion>& v) {
    int rank = 0;
    for (const AdviceSuggestion& s : v) {
      if (!s.error.empty()) {
        out << "  -  " << s.title << ": not forecast (" << s.error.substr(0, 150) << ")\n";
        continue;
      }
      char tp[32];
      std::snprintf(tp, sizeof tp, "%.2f", throughput(s));
      const std::string more = s.gpus > 1    ? " a step on each of " + std::to_string(s.gpus) + " GPUs, throughput " + tp + "x"
                               : s.batch > 1 ? std::string(" throughput ") + tp + "x"
                                             : "";
      std::snprintf(b, sizeof b, "  %d. %-40s %10s -> %10s  %.2fx [%s]  (Amdahl %s)%s", ++rank, s.title.c_str(),
                    format_duration(s.baseline_ns).c_str(), format_duration(s.predicted_ns).c_str(), speedup(s),
                    bar_text(s.error_bar).c_str(), format_duration(s.amdahl_ns).c_str(), more.c_str());
      out << std::string(b).substr(0, 200) << "\n";
      out << ("     bneck whatif TRACE " + joined(s.args) + "   trade-off: " + s.tradeoff).substr(0, 200) << "\n";
      if (!s.error_bar.basis.empty()) out << ("     interval (80 %): " + s.error_bar.basis.front()).substr(0, 200) << "\n";
    }
    if (v.empty()) out << "  (none applies)\n";
  };
  out << "\nWhat to change in the program, best first (forecast of "
      << (a.scope_instances > 0 ? "an instance, the ranges' center" : "the whole run")
      << " [its 80 % interval]; Amdahl: the changed ops' time saved, as if nothing overlapped)\n";
  print_list(a.suggestions);
  if (!a.plan.empty()) {
    out << "\nFollowing the bottleneck (each change on top of the ones before; the forecast of them together [its 80 % interval])\n";
    for (std::size_t k = 0; k < a.plan.size(); ++k) {
      const AdvicePlanStep& p = a.plan[k];
      std::snprintf(b, sizeof b, "  %zu. %-40s %10s -> %10s  %.2fx [%s]", k + 1, ((k ? "+ " : "") + p.title).c_str(),
                    format_duration(p.baseline_ns).c_str(), format_duration(p.predicted_ns).c_str(),
                    p.predicted_ns > 0 ? static_cast<double>(p.baseline_ns) / static_cast<double>(p.predicted_ns) : 0.0,
                    bar_text(p.error_bar).c_str());
      out << std::string(b).substr(0, 200) << "\n";
      out << ("     after it: " + p.after).substr(0, 200) << "\n";
    }
    out << ("     bneck whatif TRACE " + joined(a.plan.back().args)).substr(0, 200) << "\n";
  }
  out << "\nHardware, for comparison (the same program on another GPU or more GPUs)\n";
  print_list(a.hardware);
}

}  // namespace bneck
