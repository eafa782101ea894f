// --input-workers: the input pipeline runs beside the step (a DataLoader with worker processes,
// prefetching): the host time the loop's thread spent inside the DataLoader's ranges
// (`enumerate(DataLoader)#..._next__`, InputPipeline) takes no time there; the runtime calls it made
// (a pinned copy's, an allocation's) keep theirs. Each host gap between two calls on a thread
// shrinks by the share of its measured span those ranges hold. Assumed: the workers keep up (a
// batch is ready when the step asks for it) and the main thread's pace is unchanged by the worker
// processes beside it.
#include "models/whatif/host_path.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

class InputWorkers : public TransformStep {
 public:
  bool needs_gpu_rates() const override { return false; }
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    const InputPipeline input(t);
    if (input.empty()) {
      c.log.push_back(text + ": no input pipeline ranges in the trace (enumerate(DataLoader)#...): nothing changes");
      return;
    }
    Graph& g = c.edit_graph();
    const std::size_t n = g.num_trace_nodes();
    TimeNs saved = 0;
    for (auto e : boost::make_iterator_range(boost::edges(g.csr))) {
      EdgeProps& p = g.csr[e];
      if (p.type() != EdgeType::HostOrder) continue;
      const auto u = boost::source(e, g.csr), v = boost::target(e, g.csr);
      if (u >= n || v >= n) continue;
      const Op &a = t.ops[u], &b = t.ops[v];
      const TimeNs gap = b.start - a.end();
      if (gap <= 0 || p.delay() <= 0) continue;
      const TimeNs in = input.overlap(b.lane, a.end(), b.start);
      if (in <= 0) continue;
      const auto d =
          static_cast<TimeNs>(std::llround(static_cast<double>(p.delay()) * (1 - static_cast<double>(in) / static_cast<double>(gap))));
      saved += p.delay() - d;
      p.set_delay(d);
    }
    c.host_gaps_removed_ns += saved;
    c.log.push_back(text + ": the input pipeline's " + std::to_string(input.ranges()) + " ranges take no host time (" +
                    format_duration(saved) + " of host gaps); the workers assumed to keep up");
  }
};

std::unique_ptr<TransformStep> parse(const std::string&) { return std::make_unique<InputWorkers>(); }

}  // namespace

extern const TransformDef kInputWorkersTransform{
    "input-workers", "", TransformDef::Arg::None,
    "the input pipeline runs beside the step (DataLoader workers): the host time inside its ranges takes no time", parse};

}  // namespace bneck
