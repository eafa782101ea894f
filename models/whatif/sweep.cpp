#include "models/whatif/sweep.hpp"

#include <atomic>
#include <thread>

#include "models/retarget.hpp"
#include "models/whatif/run.hpp"
#include "models/sharing.hpp"
#include "sim/analysis/ranges.hpp"
#include "traces/progress.hpp"

namespace bneck {

void run_sweep(const Trace& t, const std::string& source_hw, const std::optional<Regex>& range, unsigned jobs,
               std::vector<SweepCase>& cases, std::size_t offset, std::size_t stride, bool progress) {
  // One graph, shared by every case.
  HwSpec source = source_spec(t, source_hw);
  Graph built = build_graph(t);
  WorkTable work = estimate_work(t, source);
  if (t.measured) enable_sharing(built, source, &work, false);
  auto graph = std::make_shared<const Graph>(std::move(built));
  WhatIfEngine engine(t, graph, source, std::move(work));
  // The profiler's host cost out of the baseline and every case, as whatif does by default (a
  // case's own --unprofile takes its place).
  auto with_unprofile = [&](const std::vector<Transform>& tr) {
    WhatIfOptions o;
    o.transforms = tr;
    std::vector<Transform> out;
    std::string name;
    unprofile_step(t, o, out, name);
    return out;
  };
  const std::vector<Transform> first = with_unprofile({});
  WhatIfCase base = first.empty() ? engine.baseline() : engine.apply(first);
  auto measure = [&](const Graph& g, const SimResult& r) -> TimeNs {
    if (!range) return device_span(g, sim_schedule(r)).length();
    return simulated_center(range_spans(g, r, *range)).value_or(0);
  };
  const TimeNs baseline = measure(*base.graph, simulate(*base.graph, VectorCostModel(base.durations)));
  std::vector<std::size_t> mine;
  for (std::size_t i = offset; i < cases.size(); i += std::max<std::size_t>(stride, 1)) mine.push_back(i);
  Progress bar("sweep", progress);
  std::atomic<std::size_t> next{0}, done{0};
  unsigned n = jobs ? jobs : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned k = 0; k < n; ++k)
    pool.emplace_back([&] {
      for (std::size_t j; (j = next++) < mine.size();) {
        SweepCase& c = cases[mine[j]];
        try {
          WhatIfCase wc = engine.apply(with_unprofile(c.transforms));
          SimResult r = simulate(*wc.graph, VectorCostModel(wc.durations));
          c.baseline = baseline;
          c.predicted = measure(*wc.graph, r);
          for (OpId o = 0; o < t.ops.size(); ++o) {
            if (t.ops[o].kind != OpKind::Kernel) continue;
            Bound b = (t.ops[o].flags & Op::kFlagNccl) ? Bound::Latency : model_kernel(t, o, engine.work()[o], wc.spec).bound;
            c.by_bound[static_cast<int>(b)] += wc.durations[o];
          }
        } catch (const std::exception& e) { c.error = e.what(); }
        bar.step(++done, mine.size(), "cases");
      }
    });
  for (auto& th : pool) th.join();
}

}  // namespace bneck
