// --defer-syncs[=SEL]. Model card: deferred synchronization. The selected host synchronizations
//   (default: every runtime call whose name holds "ynchronize": cudaStreamSynchronize,
//   cudaDeviceSynchronize, cudaEventSynchronize, HIP's alike) no longer wait: the device ops each
//   one waited for stop holding the host there (its HostSync in-edges are dropped) and the call
//   takes no time, a zero-time pass-through node as --remove makes it; the host's order and the
//   streams' stay. What the program read there (.item() after its copy, a loss printed, a stop test)
//   is read later or less often, off the step's path: the host launches the next work while the
//   device runs. (--remove alone keeps a removed call's dependencies, its wait among them: a
//   synchronization removed that way still held the host, and its forecast was the baseline.) The
//   launch queue's depth is not modelled: the host may run ahead of the device by more than a real
//   queue lets it, so the forecast is a bound where every wait goes.
#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

constexpr const char* kSyncCalls = "kind=api&name~ynchronize";

class DeferSyncs : public TransformStep {
 public:
  explicit DeferSyncs(std::string sel) : sel_(std::move(sel)) {}
  bool needs_gpu_rates() const override { return false; }
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    auto hit = ctx.select(sel_, false);
    for (OpId i = 0; i < hit.size(); ++i) hit[i] = hit[i] && ctx.trace.ops[i].kind == OpKind::Api;  // host calls only
    const std::size_t calls = count_selected(hit);
    if (calls == 0) {
      c.log.push_back(text + ": no host synchronization selected (" + sel_ + "): nothing changes");
      return;
    }
    {
      GraphEditor ed(c.edit_graph(), text);
      for (OpId i = 0; i < hit.size(); ++i)
        if (hit[i]) ed.drop_in_edges(i, [](NodeId, const EdgeProps& p, const Graph&) { return p.type() == EdgeType::HostSync; });
      ed.commit();
    }
    const TimeNs before = remove_ops(c, hit, text);
    c.log.push_back(text + ": " + std::to_string(calls) + " host synchronizations no longer wait for the device (" +
                    format_duration(before) +
                    " of their time); the values read there are read later, the launch queue's depth not modelled");
  }

 private:
  std::string sel_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  return std::make_unique<DeferSyncs>(arg.empty() ? std::string(kSyncCalls) : checked_selector(arg));
}

}  // namespace

extern const TransformDef kDeferSyncsTransform{
    "defer-syncs", "SEL", TransformDef::Arg::Optional,
    "the selected host synchronizations (default: every ...Synchronize call) no longer wait for the device and take no time (values read "
    "there are read later)",
    parse};

}  // namespace bneck
