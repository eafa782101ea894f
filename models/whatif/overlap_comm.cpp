// --overlap-comm. Model card: overlapped communication. Each communication kernel starts as soon
//   as its inputs are ready (the last non-communication device op its device was given before it
//   that had ended when the kernel started in the trace, and its stream predecessor) instead of
//   where the host launched it, as DDP's gradient bucketing issues all-reduces while backward
//   still runs; the host's own timeline is unchanged. The kernel's in-edges are replaced
//   (collective joins kept); edits made before it are kept.
#include <algorithm>

#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

class OverlapComm : public TransformStep {
 public:
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    Graph& g = c.edit_graph();
    // Per device, non-communication device ops by submission (launch call start).
    std::vector<std::vector<std::pair<TimeNs, OpId>>> compute(t.devices.size() + 1);
    auto dev_of = [&](const Op& o) { return std::min<std::size_t>(t.lanes[o.lane].device, t.devices.size()); };
    auto submit = [&](const Op& o) { return o.link != kNone ? t.ops[o.link].start : o.start; };
    for (OpId k = 0; k < t.ops.size(); ++k) {
      const Op& d = t.ops[k];
      if (is_device_op(d.kind) && !(d.flags & Op::kFlagNccl) && !g.removed(k)) compute[dev_of(d)].emplace_back(submit(d), k);
    }
    for (auto& v : compute) std::sort(v.begin(), v.end());
    GraphEditor ed(g, text);
    std::vector<OpId> prev_on_lane(t.lanes.size(), kNone);
    std::size_t comm = 0;
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      OpId prev = t.lanes[o.lane].fifo ? prev_on_lane[o.lane] : kNone;
      prev_on_lane[o.lane] = i;
      if (o.kind != OpKind::Kernel || !(o.flags & Op::kFlagNccl)) continue;
      ++comm;
      ed.drop_in_edges(i, [](NodeId, const EdgeProps& p, const Graph&) { return p.type() != EdgeType::Collective; });
      if (prev != kNone) ed.add_edge(prev, i, EdgeType::StreamOrder, DepType::EndToStart, 0);
      // Its input: the last op submitted before it that had ended when it started in the trace (one
      // submitted earlier but still running may wait for it: another thread's stream behind an event
      // this kernel's work records).
      const auto& v = compute[dev_of(o)];
      auto it = std::lower_bound(v.begin(), v.end(), std::make_pair(submit(o), OpId{0}));
      for (int back = 0; it != v.begin() && back < 256; ++back) {
        --it;
        if (t.ops[it->second].end() > o.start) continue;
        if (it->second != prev) ed.add_edge(it->second, i, EdgeType::Event, DepType::EndToStart, 0);
        break;
      }
    }
    ed.commit();
    c.log.push_back(text + ": " + std::to_string(comm) + " communication kernels start when their inputs are ready");
  }
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  if (!arg.empty() && arg != "true") throw InputError("--overlap-comm takes no argument");
  return std::make_unique<OverlapComm>();
}

}  // namespace

extern const TransformDef kOverlapCommTransform{"overlap-comm", "", TransformDef::Arg::None,
                                                "communication kernels start when their inputs are ready (DDP-style overlap)", parse};

}  // namespace bneck
