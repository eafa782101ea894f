// --expert-parallel N [--ep-experts SEL] [--ep-topk K] [--ep-imbalance F] [--ep-bytes B]. Model
//   card: expert parallelism for mixture-of-experts layers from a one-GPU trace. Weak scaling (every
//   GPU keeps the traced batch); ranks are symmetric: one is simulated.
// Experts found from the trace: on each stream, a router (a top-k kernel, after the GEMM that
//   scores the experts: its output rows are the tokens T, its inner size the hidden size H, its
//   columns the experts E), then the expert region: the kernels after it up to the last combine
//   (index_add / scatter_add) before the next router, norm or attention kernel. Or --ep-experts SEL:
//   each run of selected kernels on a stream is an expert region.
// Per region: the N ranks' T tokens each pick K experts (--ep-topk, default 2); a rank holds E/N
//   experts and receives T x K assignments on average, as the one GPU did, in 1/N of the kernels
//   with N times the tokens: every expert kernel takes model(N x work) / model(work) / N of its
//   time, times 1 + F (--ep-imbalance: the busiest rank's load over the mean, default 0). An
//   all-to-all dispatch of T x K x H elements (the router GEMM's dtype; --ep-bytes) before the
//   region waits for the router, and a combine of the same size after it holds back the next
//   kernel; both timed by the collective model for N ranks on the case's spec.
// Training: the backward's expert regions, found from the forward experts' weights (a backward
//   GEMM on autograd's thread whose second operand or output has the elements of a forward expert
//   GEMM's weight: the input and weight gradients; the region runs from the first to the last such
//   GEMM between two norm, attention or router kernels), are retimed the same way, with the
//   gradients' all-to-alls around them: the output gradient sent to the experts before, the input
//   gradient back after, each the size of the matching forward dispatch (layers in reverse order).
//   Without shapes the backward keeps its time (the log says so).
// Memory per GPU: the expert GEMMs' weights / N, the rest replicated.
// Not modelled: capacity factors and dropped tokens, grouped GEMM kernels' own shapes.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "models/collective.hpp"
#include "models/whatif/fp8.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "sim/base/strings.hpp"

namespace bneck {
namespace {

bool name_has(const std::string& name, std::initializer_list<const char*> parts) {
  const std::string n = ascii_lower(name);
  for (const char* p : parts)
    if (n.find(p) != std::string::npos) return true;
  return false;
}

struct Region {
  std::vector<OpId> ops;  // the expert kernels, on one stream in order
  OpId router = kNone;    // the kernel before the region: the top-k (or, selected, the stream's previous)
  OpId next = kNone;      // the stream's kernel after the region
  Bytes dispatch = 0;
};

class ExpertParallel : public TransformStep {
 public:
  ExpertParallel(std::uint32_t n, std::string sel, std::uint32_t topk, double imbalance, Bytes bytes)
      : n_(n), sel_(std::move(sel)), topk_(topk), imbalance_(imbalance), bytes_(bytes) {}

  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    add_layout_ranks(c, n_);
    const Trace& t = ctx.trace;
    std::uint32_t experts = 0;
    std::vector<Region> regions = find_regions(ctx, experts);
    if (regions.empty())
      throw InputError(text + ": no mixture-of-experts layer found (no top-k router kernel after a GEMM, and no --ep-experts SEL)");
    const std::size_t forward_regions = regions.size();
    const bool training = has_backward(t);
    if (sel_.empty() && training) {
      std::vector<Region> bwd = find_backward(ctx, regions);
      regions.insert(regions.end(), bwd.begin(), bwd.end());
    }
    if (experts > 0 && (experts < n_ || experts % n_ != 0))
      throw InputError(text + ": the router scores " + std::to_string(experts) + " experts, which do not split over " + std::to_string(n_) +
                       " GPUs");
    Graph& g = c.edit_graph();
    GraphEditor ed(g, text);
    std::map<std::uint32_t, LaneId> comm_lane;
    TimeNs before = 0, after = 0, comm_ns = 0;
    std::size_t kernels = 0, unknown = 0, a2a = 0;
    std::vector<bool> expert_op(t.ops.size(), false);
    for (const Region& r : regions) {
      for (OpId k : r.ops) {
        const TimeNs d = c.durations[k];
        const double big = static_cast<double>(retime_by_work(t, k, ctx.work[k], d, c.spec, n_, n_, n_));
        const TimeNs nd = static_cast<TimeNs>(std::llround(big / n_ * (1 + imbalance_)));
        before += d;
        after += nd;
        c.durations[k] = nd;
        expert_op[k] = true;
        ++kernels;
      }
      if (r.dispatch == 0) {
        ++unknown;
        continue;
      }
      const std::uint32_t dev = t.lanes[t.ops[r.ops.front()].lane].device;
      auto it = comm_lane.emplace(dev, kNone).first;
      if (it->second == kNone)
        it->second = add_comm_lane(ed, dev, g.lanes[t.ops[r.ops.front()].lane].process,
                                   "NCCL stream (expert-parallel, GPU " + std::to_string(dev) + ")");
      const TimeNs x = collective_time(c.spec, CollKind::AllToAll, r.dispatch, n_).time_ns;
      NodeId disp = add_comm_node(ed, it->second, "ncclAllToAll (expert-parallel dispatch, " + format_bytes(r.dispatch) + ")", x);
      NodeId comb = add_comm_node(ed, it->second, "ncclAllToAll (expert-parallel combine, " + format_bytes(r.dispatch) + ")", x);
      if (r.router != kNone) ed.add_edge(r.router, disp, EdgeType::Event, DepType::EndToStart, 0);
      ed.add_edge(disp, r.ops.front(), EdgeType::Event, DepType::EndToStart, 0);
      ed.add_edge(r.ops.back(), comb, EdgeType::Event, DepType::EndToStart, 0);
      if (r.next != kNone) ed.add_edge(comb, r.next, EdgeType::Event, DepType::EndToStart, 0);
      comm_ns += 2 * x;
      a2a += 2;
    }
    ed.commit();
    c.log.push_back(text + ": " + std::to_string(regions.size()) + " expert regions (" + std::to_string(kernels) + " kernels, " +
                    format_duration(before) + " -> " + format_duration(after) + ": 1/" + std::to_string(n_) + " of the experts, " +
                    std::to_string(n_) + "x the tokens each" +
                    (imbalance_ > 0 ? ", load imbalance x" + std::to_string(1 + imbalance_) : "") + "), " + std::to_string(a2a) +
                    " all-to-alls (" + format_duration(comm_ns) + " by the collective model on " + c.spec.name + ")" +
                    (unknown ? "; " + std::to_string(unknown) + " regions of unknown dispatch size (no shapes: give --ep-bytes)" : "") +
                    (experts ? "; " + std::to_string(experts) + " experts, " + std::to_string(experts / n_) + " per GPU" : ""));
    const std::size_t backward_regions = regions.size() - forward_regions;
    c.log.push_back(text + ": weak scaling: every GPU keeps the traced batch; " +
                    (!training ? std::string("no backward in the trace")
                     : backward_regions > 0
                         ? std::to_string(backward_regions) + " of the regions in the backward (their gradients' all-to-alls)"
                         : std::string("the backward's expert GEMMs not found (no shapes, or --ep-experts): it keeps its time")));
    const double expert_w = step_gemm_weights(ctx, [&](OpId o) { return expert_op[o]; });
    const double other_w = step_gemm_weights(ctx, [&](OpId o) { return !expert_op[o]; });
    if (expert_w + other_w > 0) {
      c.memory = model_state_memory(t, expert_w / n_ + other_w);
      c.log.push_back("  memory per GPU: expert weights " + format_bytes(static_cast<Bytes>(expert_w / n_)) + " of " +
                      format_bytes(static_cast<Bytes>(expert_w)) + ", other weights replicated " +
                      format_bytes(static_cast<Bytes>(other_w)) + " (the GEMMs' second operands of a step), " +
                      memory_parts_text(*c.memory) + " (activations: not in the trace)");
    }
  }

 private:
  std::vector<Region> find_regions(const WhatIfContext& ctx, std::uint32_t& experts) const {
    const Trace& t = ctx.trace;
    std::map<LaneId, std::vector<OpId>> streams;
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (t.ops[i].kind == OpKind::Kernel && !(t.ops[i].flags & Op::kFlagNccl)) streams[t.ops[i].lane].push_back(i);
    for (auto& [lane, v] : streams) std::stable_sort(v.begin(), v.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
    std::vector<Region> out;
    if (!sel_.empty()) {
      const std::vector<bool> pick = ctx.select(sel_, true);
      for (auto& [lane, ops] : streams)
        for (std::size_t j = 0; j < ops.size(); ++j) {
          if (!pick[ops[j]]) continue;
          Region r;
          r.router = j > 0 ? ops[j - 1] : kNone;
          while (j < ops.size() && pick[ops[j]]) r.ops.push_back(ops[j++]);
          r.next = j < ops.size() ? ops[j] : kNone;
          r.dispatch = bytes_;
          out.push_back(std::move(r));
        }
      return out;
    }
    for (auto& [lane, ops] : streams)
      for (std::size_t j = 0; j < ops.size(); ++j) {
        if (!name_has(t.name(t.ops[ops[j]]), {"topk"})) continue;
        // The router's scoring GEMM: the last GEMM of the few kernels before the top-k.
        std::optional<KernelWork> router;
        for (std::size_t b = j; b-- > 0 && j - b <= 8;)
          if (ctx.work[ops[b]].cls == KernelClass::Gemm) {
            router = ctx.work[ops[b]];
            break;
          }
        // The region: up to the last combine before the next router, norm or attention kernel.
        std::size_t end = j, e = j + 1;
        for (; e < ops.size(); ++e) {
          const std::string& n = t.name(t.ops[ops[e]]);
          if (name_has(n, {"topk", "norm", "rms"}) || ctx.work[ops[e]].cls == KernelClass::Attention) break;
          if (name_has(n, {"index_add", "indexfunclargeindex", "indexfuncsmallindex", "scatter_add", "scatter_gather"})) end = e;
        }
        if (end == j) continue;  // no combine: not an expert layer
        Region r;
        r.router = ops[j];
        r.ops.assign(ops.begin() + static_cast<std::ptrdiff_t>(j + 1), ops.begin() + static_cast<std::ptrdiff_t>(end + 1));
        r.next = end + 1 < ops.size() ? ops[end + 1] : kNone;
        r.dispatch = bytes_;
        if (!r.dispatch && router && router->out_rows > 0 && router->out_cols > 0) {
          const double inner = router->flops / (2 * std::max(1.0, router->batch) * router->out_rows * router->out_cols);
          r.dispatch = static_cast<Bytes>(router->out_rows * topk_ * inner * dtype_bytes(router->dtype));
          experts = std::max(experts, static_cast<std::uint32_t>(router->out_cols));
        }
        out.push_back(std::move(r));
        j = end;
      }
    return out;
  }

  std::vector<Region> find_backward(const WhatIfContext& ctx, const std::vector<Region>& fwd) const {
    const Trace& t = ctx.trace;
    const LaneId main = forward_lane(t);
    std::set<long long> weights;  // elements of the forward expert GEMMs' weights
    for (const Region& r : fwd)
      for (OpId k : r.ops)
        if (ctx.work[k].cls == KernelClass::Gemm && ctx.work[k].from_shapes && ctx.work[k].rhs_elems > 0)
          weights.insert(std::llround(ctx.work[k].rhs_elems));
    std::vector<Region> out;
    if (weights.empty()) return out;
    auto expert_grad = [&](OpId k) {
      const KernelWork& w = ctx.work[k];
      return w.cls == KernelClass::Gemm && w.from_shapes &&
             (weights.count(std::llround(w.rhs_elems)) || weights.count(std::llround(w.out_rows * w.out_cols)));
    };
    std::map<LaneId, std::vector<OpId>> streams;  // every kernel of each stream, in order
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (t.ops[i].kind == OpKind::Kernel && !(t.ops[i].flags & Op::kFlagNccl)) streams[t.ops[i].lane].push_back(i);
    for (auto& entry : streams) {
      std::vector<OpId>& ops = entry.second;  // (a named variable: lambdas below capture it)
      std::stable_sort(ops.begin(), ops.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
      std::size_t first = ops.size(), last = 0;
      auto close = [&] {  // the region [first, last] between the stream's kernels before and after it
        if (first == ops.size()) return;
        Region r;
        r.router = first > 0 ? ops[first - 1] : kNone;
        r.ops.assign(ops.begin() + static_cast<std::ptrdiff_t>(first), ops.begin() + static_cast<std::ptrdiff_t>(last + 1));
        r.next = last + 1 < ops.size() ? ops[last + 1] : kNone;
        out.push_back(std::move(r));
        first = ops.size();
      };
      for (std::size_t j = 0; j < ops.size(); ++j) {
        const Op& o = t.ops[ops[j]];
        if (o.link == kNone || t.ops[o.link].lane == main) {  // the forward's: no backward region spans it
          close();
          continue;
        }
        const std::string& n = t.name(o);
        if (name_has(n, {"topk", "norm", "rms", "softmax"}) || ctx.work[ops[j]].cls == KernelClass::Attention) close();
        if (!expert_grad(ops[j])) continue;
        if (first == ops.size()) first = j;
        last = j;
      }
      close();
    }
    // Each backward region's gradients are the size of its forward layer's dispatch (in reverse).
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i].dispatch = out.size() == fwd.size() ? fwd[fwd.size() - 1 - i].dispatch : fwd.front().dispatch;
    return out;
  }

  std::uint32_t n_;
  std::string sel_;
  std::uint32_t topk_;
  double imbalance_;
  Bytes bytes_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  CompanionArgs a = split_companions(arg);
  const std::uint32_t n = parse_count(a.main, "--expert-parallel", 65536, "GPUs");
  const std::uint32_t topk = a.find("ep-topk") ? parse_count(*a.find("ep-topk"), "--ep-topk", 64, "experts per token") : 2;
  double imbalance = 0;
  if (const std::string* f = a.find("ep-imbalance")) {
    try {
      std::size_t used = 0;
      imbalance = std::stod(*f, &used);
      if (used != f->size() || !(imbalance >= 0 && imbalance <= 10)) throw std::invalid_argument("range");
    } catch (const std::exception&) {
      throw InputError("--ep-imbalance " + *f + ": expected the busiest GPU's extra load over the mean, 0 .. 10 (0.2: 20 % more)");
    }
  }
  std::string sel = a.find("ep-experts") ? checked_selector(*a.find("ep-experts")) : "";
  return std::make_unique<ExpertParallel>(n, sel, topk, imbalance, companion_bytes(a, "ep-bytes", 0));
}

const char* const kCompanions[] = {
    "ep-experts=SEL: the expert kernels, each run of them an MoE layer (default: found from the top-k router kernels)",
    "ep-topk=K: experts per token (default 2)", "ep-imbalance=F: the busiest GPU's extra expert load over the mean (default 0)",
    "ep-bytes=BYTES: one dispatch's all-to-all size where the trace has no shapes", nullptr};

}  // namespace

extern const TransformDef kExpertParallelTransform{
    "expert-parallel",
    "N",
    TransformDef::Arg::Required,
    "expert parallelism on N GPUs: each MoE layer's experts split N ways, all-to-all dispatch and combine around them",
    parse,
    kCompanions};

}  // namespace bneck
