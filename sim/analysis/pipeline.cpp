#include "sim/analysis/pipeline.hpp"

#include <algorithm>

#include "sim/analysis/analysis.hpp"
#include "sim/analysis/ranges.hpp"
#include "sim/base/error.hpp"

namespace bneck {

namespace {

bool inside(const Trace& t, std::size_t r, std::size_t ancestor) {
  for (std::uint32_t p = t.ranges[r].parent; p != kNone; p = t.ranges[p].parent)
    if (p == ancestor) return true;
  return false;
}

}  // namespace

std::vector<GenerationBudget> pipeline_budget(const Trace& t, const std::string& gen_regex, const std::string& step_regex) {
  RangeIndex idx(t);
  std::vector<std::size_t> gens = idx.match(range_regex(gen_regex));
  if (gens.empty()) throw InputError(t.source, "--range '" + gen_regex + "' matches no NVTX range");
  std::vector<std::size_t> steps = idx.match(range_regex(step_regex));
  std::vector<GenerationBudget> out;
  for (std::size_t g : gens) {
    const Range& gr = t.ranges[g];
    GenerationBudget b;
    b.name = t.strings.str(gr.name);
    b.range = g;
    auto span = [&](const std::vector<OpId>& v) {
      std::pair<TimeNs, TimeNs> s{0, 0};
      bool first = true;
      for (OpId i : v) {
        if (first || t.ops[i].start < s.first) s.first = t.ops[i].start;
        if (first || t.ops[i].end() > s.second) s.second = t.ops[i].end();
        first = false;
      }
      return s;
    };
    std::vector<OpId> all = idx.device_ops(g);
    TimeNs end = gr.end;
    std::vector<std::pair<TimeNs, TimeNs>> iv;
    for (OpId i : all) {
      end = std::max(end, t.ops[i].end());
      iv.emplace_back(t.ops[i].start, t.ops[i].end());
    }
    b.gpu_busy_ns = interval_union(iv);
    b.total_ns = end - gr.start;
    std::vector<std::size_t> mine;
    for (std::size_t s : steps)
      if (inside(t, s, g)) mine.push_back(s);
    if (mine.empty()) throw InputError(t.source, "generation '" + b.name + "' holds no range matching --step-range '" + step_regex + "'");
    std::vector<TimeNs> first_start;
    TimeNs last_end = 0;
    for (std::size_t s : mine) {
      std::vector<OpId> v = idx.device_ops(s);
      if (v.empty()) {
        first_start.push_back(t.ranges[s].start);
        last_end = std::max(last_end, t.ranges[s].end);
        continue;
      }
      auto sp = span(v);
      first_start.push_back(sp.first);
      last_end = std::max(last_end, sp.second);
    }
    for (std::size_t k = 0; k < first_start.size(); ++k)
      b.step_ns.push_back((k + 1 < first_start.size() ? first_start[k + 1] : last_end) - first_start[k]);
    const TimeNs s0 = first_start.front();
    b.steps_total_ns = last_end - s0;
    b.fixed_ns = b.total_ns - b.steps_total_ns;
    std::vector<double> d(b.step_ns.begin(), b.step_ns.end());
    b.denoiser_step_ns = static_cast<TimeNs>(median(d));
    // Stages: direct children of the generation holding no step.
    TimeNs covered = 0;
    for (std::size_t r = 0; r < t.ranges.size(); ++r) {
      if (t.ranges[r].parent != g) continue;
      bool has_step = false;
      for (std::size_t s : mine) has_step = has_step || s == r || inside(t, s, r);
      if (has_step) continue;
      PipelineStage st;
      st.name = t.strings.str(t.ranges[r].name);
      st.host_ns = t.ranges[r].end - t.ranges[r].start;
      std::vector<OpId> v = idx.device_ops(r);
      std::vector<std::pair<TimeNs, TimeNs>> siv;
      for (OpId i : v) siv.emplace_back(t.ops[i].start, t.ops[i].end());
      st.gpu_busy = interval_union(siv);
      if (!v.empty()) {
        auto sp = span(v);
        // Outside the denoising stretch [s0, last_end).
        TimeNs before = std::max<TimeNs>(0, std::min(sp.second, s0) - sp.first);
        TimeNs after = std::max<TimeNs>(0, sp.second - std::max(sp.first, last_end));
        st.ns = before + after;
      } else {
        // Host-only stage: its range outside the stretch.
        TimeNs a = t.ranges[r].start, e = t.ranges[r].end;
        st.ns = std::max<TimeNs>(0, std::min(e, s0) - a) + std::max<TimeNs>(0, e - std::max(a, last_end));
      }
      covered += st.ns;
      b.stages.push_back(st);
    }
    std::sort(b.stages.begin(), b.stages.end(), [](const PipelineStage& x, const PipelineStage& y) { return x.ns > y.ns; });
    PipelineStage other;
    other.name = "other (host, gaps)";
    other.ns = std::max<TimeNs>(0, b.fixed_ns - covered);
    b.stages.push_back(other);
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace bneck
