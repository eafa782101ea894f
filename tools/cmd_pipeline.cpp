// bneck pipeline TRACE --range GEN_REGEX --step-range STEP_REGEX [--json FILE]
// A diffusion pipeline's budget: K x T_denoiser + T_fixed per generation (sim/analysis/pipeline.hpp).
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "sim/analysis/pipeline.hpp"
#include "tools/commands.hpp"
#include "tools/trace_options.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "tools/output.hpp"
#include "traces/importer.hpp"

namespace bneck {
using nlohmann::json;

namespace {

json budget_json(const GenerationBudget& b) {
  json st = json::array();
  for (const auto& s : b.stages) st.push_back({{"name", s.name}, {"ns", s.ns}, {"gpu_busy_ns", s.gpu_busy}, {"host_ns", s.host_ns}});
  return {{"name", b.name},
          {"steps", b.step_ns.size()},
          {"denoiser_step_ns", b.denoiser_step_ns},
          {"step_ns", b.step_ns},
          {"steps_total_ns", b.steps_total_ns},
          {"fixed_ns", b.fixed_ns},
          {"total_ns", b.total_ns},
          {"gpu_busy_ns", b.gpu_busy_ns},
          {"formula_ns", static_cast<TimeNs>(b.step_ns.size()) * b.denoiser_step_ns + b.fixed_ns},
          {"formula_error", b.formula_error()},
          {"stages", st}};
}

}  // namespace

void add_pipeline(CLI::App& sub, Action& action) {
  static std::vector<std::string> trace;
  static std::string gen, step, json_out;
  sub.add_option("TRACE", trace, "trace file(s)")->required();
  sub.add_option("--range", gen, "the generations: ranges matching REGEX in full (default: from the structure, @run or @iteration)");
  sub.add_option("--step-range", step, "the denoiser steps inside each generation (default: from the structure, @iteration or @layer)");
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.add_option("--json", json_out, "write the budget as JSON to FILE ('-' for stdout)");
  sub.callback([&action] {
    action = [] {
      Trace t = load_with_options(trace, topt, {gen.empty() || step.empty() ? "@" : "", gen, step});
      auto [dgen, dstep] = default_loop_ranges(t);
      if ((gen.empty() || step.empty()) && dstep.empty())
        throw InputError(t.source + ": no repeating loop found; give --range GEN_REGEX --step-range STEP_REGEX");
      std::vector<GenerationBudget> gens = pipeline_budget(t, gen.empty() ? dgen : gen, step.empty() ? dstep : step);
      if (!json_out.empty()) {
        json j = budget_json(gens.front());  // the first generation at the top, every one under "generations"
        json all = json::array();
        for (const auto& b : gens) all.push_back(budget_json(b));
        j["generations"] = all;
        j["trace"] = t.source;
        write_output(json_out, [&](std::ostream& o) { o << json_text(j, 1) << "\n"; });
        if (json_out == "-") return 0;
      }
      std::ostream& o = std::cout;
      o << "bneck pipeline: " << t.source << ": " << gens.size() << " generation(s) matching '" << gen << "'\n";
      for (const auto& b : gens) {
        const double tot = static_cast<double>(b.total_ns);
        o << "\n  " << b.name << ": total " << format_duration(b.total_ns) << " = " << b.step_ns.size() << " steps x "
          << format_duration(b.denoiser_step_ns) << " (median) + fixed " << format_duration(b.fixed_ns)
          << "  [K x step + fixed = " << format_duration(static_cast<TimeNs>(b.step_ns.size()) * b.denoiser_step_ns + b.fixed_ns) << ", "
          << std::showpos << std::fixed << std::setprecision(2) << b.formula_error() * 100 << std::noshowpos << " %]\n";
        o << "    denoising " << format_duration(b.steps_total_ns) << " (" << std::setprecision(1)
          << 100 * static_cast<double>(b.steps_total_ns) / tot << " %); steps from "
          << format_duration(*std::min_element(b.step_ns.begin(), b.step_ns.end())) << " to "
          << format_duration(*std::max_element(b.step_ns.begin(), b.step_ns.end())) << "; GPU busy " << format_duration(b.gpu_busy_ns)
          << " (" << 100 * static_cast<double>(b.gpu_busy_ns) / tot << " %)\n";
        o << "    fixed, by stage           on the timeline    GPU busy   host (range)\n";
        for (const auto& s : b.stages)
          o << "      " << std::left << std::setw(24) << s.name.substr(0, 24) << std::right << std::setw(14) << format_duration(s.ns)
            << std::setw(12) << (s.gpu_busy ? format_duration(s.gpu_busy) : "-") << std::setw(15)
            << (s.host_ns ? format_duration(s.host_ns) : "-") << "\n";
      }
      return 0;
    };
  });
}

}  // namespace bneck
