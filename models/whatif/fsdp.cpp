// --fsdp N [--fsdp-stage 2|3] [--fsdp-hybrid G] [--param-bytes B] [--scaling weak|strong].
// Model card: fully sharded data parallelism (PyTorch FSDP, ZeRO-3; stage 2 = FSDP's
//   SHARD_GRAD_OP, ZeRO-2) from a one-GPU training trace. Ranks are symmetric: one is simulated.
// Units: the layers structure recognition finds in each iteration's forward (the repeated blocks
//   FSDP wraps), the forward's other GEMMs (embeddings, LM head) the root unit; each unit's
//   parameters are its forward GEMMs' weights (second operands, from shapes), or --param-bytes
//   shared in proportion to the units' GEMM time when the trace has no shapes.
// Forward: before unit u runs, an all-gather of its parameters (N ranks, the full unit as the
//   gathered size) on a communication stream; it is issued when the host reaches unit u-1 (FSDP's
//   prefetch of the next unit) plus the c10d call's host cost (--fsdp-call, 30 us), and at most two
//   units are gathered at once (FSDP's limit_all_gathers: the all-gather of u waits for unit u-2 to
//   end). The unit's first kernel waits for its all-gather.
// Backward (stage 3): the same for each backward unit in backward order (parameters gathered
//   again: freed after the forward), and after each unit's backward a reduce-scatter of its
//   gradients; the root's after the backward's last kernel. Stage 2 keeps the gathered parameters
//   from the forward: no backward all-gathers. The optimizer's kernels (the iteration's device ops
//   after the backward) update 1/N of the parameters (time x model(work/N)/model(work)) and wait for
//   every reduce-scatter. Hybrid sharding (G GPUs per group): all-gathers and reduce-scatters among
//   G ranks, then an all-reduce of the 1/G shard among N/G groups (across nodes when G is a node).
// Scaling: weak by default (every GPU keeps the traced batch; the global batch is N times it);
//   strong keeps the global batch: every compute kernel takes model(work/N)/model(work).
// Memory per GPU: parameters, gradients and optimizer state (Adam/AdamW: two moments) / N, plus the
//   two largest units gathered (stage 3) or every parameter (stage 2); activations: not in a trace.
// Not modelled: FSDP's CPU-side hook cost beyond the c10d call, parameter offload, mixed-precision
//   casts of the gathered shards, different reduce dtypes.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "models/collective.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {
namespace {

struct Unit {
  std::vector<OpId> ops;  // device ops in launch order
  double params = 0;      // bytes
};

// One iteration of a training step: its forward units (root first), its backward units in
// backward order, and the optimizer's ops.
struct Step {
  std::vector<Unit> fwd, bwd;
  Unit root;
  std::vector<OpId> opt;
  OpId last_bwd = kNone;
};

class Fsdp : public TransformStep {
 public:
  Fsdp(std::uint32_t n, int stage, std::uint32_t hybrid, Bytes param_bytes, bool strong, TimeNs call)
      : n_(n), stage_(stage), hybrid_(hybrid), param_bytes_(param_bytes), strong_(strong), call_(call) {}

  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    add_layout_ranks(c, n_);
    const Trace& t = ctx.trace;
    std::vector<Step> steps = find_steps(ctx, c);
    if (steps.empty())
      throw InputError(text +
                       ": no training step found (structure recognition found no forward and backward pass: PyTorch's autograd "
                       "thread launches the backward)");
    const std::uint32_t group = hybrid_ ? hybrid_ : n_;
    Graph& g = c.edit_graph();
    GraphEditor ed(g, text);
    std::map<std::uint32_t, LaneId> comm_lane;
    auto lane_of = [&](OpId near) {
      const std::uint32_t dev = t.lanes[t.ops[near].lane].device;
      auto [it, fresh] = comm_lane.emplace(dev, kNone);
      if (fresh)
        it->second = add_comm_lane(ed, dev, g.lanes[t.ops[near].lane].process, "NCCL stream (FSDP, GPU " + std::to_string(dev) + ")");
      return it->second;
    };
    std::size_t gathers = 0, scatters = 0, reduces = 0;
    TimeNs comm_ns = 0, opt_before = 0, opt_after = 0, comp_before = 0, comp_after = 0;
    double total_params = 0, largest = 0, second = 0;
    auto collective = [&](CollKind k, double bytes, std::uint32_t ranks, const std::string& what, OpId near) {
      const TimeNs d = collective_time(c.spec, k, static_cast<Bytes>(bytes), ranks).time_ns;
      comm_ns += d;
      return add_comm_node(ed, lane_of(near),
                           what + " (FSDP " + std::to_string(ranks) + " ranks, " + format_bytes(static_cast<Bytes>(bytes)) + ")", d);
    };
    // The launching call of a device op (its host side), or the op itself.
    auto host_of = [&](OpId k) { return t.ops[k].link != kNone ? t.ops[k].link : k; };
    OpId prev_opt = kNone;
    for (Step& s : steps) {
      double step_params = s.root.params;
      for (const Unit& u : s.fwd) step_params += u.params;
      if (total_params == 0) {
        total_params = step_params;
        for (const Unit& u : s.fwd) {
          if (u.params > largest)
            second = largest, largest = u.params;
          else if (u.params > second)
            second = u.params;
        }
      }
      // The root, the forward's units in order and (stage 3) the backward's: one chain of
      // all-gathers, at most two units gathered at a time; the forward's wait for the previous
      // step's optimizer (the parameters it updates).
      std::vector<const Unit*> order;
      if (s.root.params > 0 && !s.fwd.empty()) order.push_back(&s.root);
      const std::size_t skip = order.size();
      for (const Unit& u : s.fwd) order.push_back(&u);
      const std::size_t forward = order.size();
      if (stage_ == 3)
        for (const Unit& u : s.bwd) order.push_back(&u);
      std::vector<NodeId> ags = gather_chain(t, ed, order, skip, collective, host_of, gathers, group);
      if (prev_opt != kNone)
        for (std::size_t u = 0; u < forward; ++u)
          if (ags[u] != kNone) ed.add_edge(prev_opt, ags[u], EdgeType::Event, DepType::EndToStart, 0);
      prev_opt = s.opt.empty() ? kNone : s.opt.back();
      // Gradients: a reduce-scatter after each backward unit, the root's after the last kernel.
      std::vector<NodeId> rs;
      auto scatter = [&](double bytes, OpId after) {
        if (bytes <= 0 || after == kNone) return;
        NodeId n = collective(CollKind::ReduceScatter, bytes, group, "ncclReduceScatter", after);
        ed.add_edge(after, n, EdgeType::Event, DepType::EndToStart, 0);
        ++scatters;
        rs.push_back(n);
        if (hybrid_ && n_ / hybrid_ > 1) {  // the shard all-reduced across the groups
          NodeId a = collective(CollKind::AllReduce, bytes / group, n_ / hybrid_, "ncclAllReduce", after);
          ed.add_edge(n, a, EdgeType::Event, DepType::EndToStart, 0);
          ++reduces;
          rs.push_back(a);
        }
      };
      for (const Unit& u : s.bwd) scatter(u.params, u.ops.empty() ? kNone : u.ops.back());
      scatter(s.root.params, s.last_bwd);
      // The optimizer: 1/N of the parameters, after every gradient is reduced.
      for (OpId k : s.opt) {
        if (t.ops[k].kind != OpKind::Kernel) continue;
        const TimeNs d = c.durations[k], nd = retime_by_work(t, k, ctx.work[k], d, c.spec, 1.0 / group, 1.0 / group, 1.0 / group);
        opt_before += d;
        opt_after += nd;
        c.durations[k] = nd;
      }
      if (!s.opt.empty())
        for (NodeId n : rs) ed.add_edge(n, s.opt.front(), EdgeType::Event, DepType::EndToStart, 0);
      if (strong_) {
        for (const Unit& u : s.fwd) rescale_kernels(ctx, c, u.ops, 1.0 / n_, comp_before, comp_after);
        for (const Unit& u : s.bwd) rescale_kernels(ctx, c, u.ops, 1.0 / n_, comp_before, comp_after);
        rescale_kernels(ctx, c, s.root.ops, 1.0 / n_, comp_before, comp_after);
      }
    }
    ed.commit();
    c.log.push_back(text + ": stage " + std::to_string(stage_) + ", " + std::to_string(steps.size()) + " steps of " +
                    std::to_string(steps[0].fwd.size()) + " units + root; " + std::to_string(gathers) + " all-gathers, " +
                    std::to_string(scatters) + " reduce-scatters" +
                    (reduces ? ", " + std::to_string(reduces) + " cross-group all-reduces" : "") + " (" + format_duration(comm_ns) +
                    " by the collective model on " + c.spec.name + "); optimizer on 1/" + std::to_string(group) + " of the parameters (" +
                    format_duration(opt_before) + " -> " + format_duration(opt_after) + ")");
    c.log.push_back(text + ": " + replica_scaling_line(strong_ ? Scaling::Strong : Scaling::Weak, n_, comp_before, comp_after));
    c.log.push_back(memory_line(t, total_params, largest + second, group, c));
  }

 private:
  // All-gathers of `units` in order (their nodes, kNone for a unit without parameters): each
  // issued when the host has launched the previous unit's first op (the first unit: its own) plus
  // the call's cost, at most two units gathered at once (it waits for the unit two before to end;
  // not for the first `skip` units: the root stays gathered and its ops surround the layers); the
  // unit's first op waits for it.
  template <class Coll, class Host>
  std::vector<NodeId> gather_chain(const Trace& t, GraphEditor& ed, const std::vector<const Unit*>& units, std::size_t skip,
                                   Coll& collective, Host& host_of, std::size_t& gathers, std::uint32_t group) const {
    std::vector<NodeId> out(units.size(), kNone);
    NodeId last = kNone;
    for (std::size_t u = 0; u < units.size(); ++u) {
      const Unit& un = *units[u];
      if (un.ops.empty() || un.params <= 0) continue;
      const Unit& prev = *units[u > 0 ? u - 1 : 0];
      const OpId issue = prev.ops.empty() ? un.ops.front() : prev.ops.front();
      NodeId ag = collective(CollKind::AllGather, un.params, group, "ncclAllGather", un.ops.front());
      if (const NodeId h = host_of(issue); h != un.ops.front()) {
        ed.add_edge(h, ag, EdgeType::Launch, DepType::EndToStart, call_);
      } else {
        // The unit's first op is its own issue point and no call launched it in the trace (some of
        // DLRM's kernels): the gather is issued when the op before it on its stream ends (the
        // trace's first op starts, where none is before it), not after the op that waits for it.
        const auto [before, attach] = issue_point(t, un.ops.front());
        ed.add_edge(before, ag, EdgeType::Launch, attach, call_);
      }
      if (u >= 2 + skip && !units[u - 2]->ops.empty()) ed.add_edge(units[u - 2]->ops.back(), ag, EdgeType::Event, DepType::EndToStart, 0);
      ed.add_edge(ag, un.ops.front(), EdgeType::Event, DepType::EndToStart, 0);
      if (last != kNone) ed.add_edge(last, ag, EdgeType::StreamOrder, DepType::EndToStart, 0);  // issued in order on NCCL's stream
      last = ag;
      out[u] = ag;
      ++gathers;
    }
    return out;
  }

  // What an all-gather for `op` waits for when no call launched `op`: the op before it on its lane
  // (its end; of several starting together, the first), else the trace's first op (its start). The
  // trace's ops are in start order, so the search walks back from `op`.
  static std::pair<OpId, DepType> issue_point(const Trace& t, OpId op) {
    const Op& o = t.ops[op];
    OpId before = kNone;
    for (OpId k = op; k-- > 0;) {
      const Op& p = t.ops[k];
      if (before != kNone && p.start < t.ops[before].start) break;
      if (p.lane == o.lane && p.start < o.start) before = k;
    }
    return before != kNone ? std::pair{before, DepType::EndToStart} : std::pair{OpId{0}, DepType::StartToStart};
  }

  // The training steps: per iteration (or the whole run), its forward and backward instances, the
  // layers inside each, the root's GEMMs and the optimizer's ops.
  std::vector<Step> find_steps(const WhatIfContext& ctx, const WhatIfCase&) const {
    const Trace& t = ctx.trace;
    Structure st = find_structure(t);
    const StructureLevel* fwd = st.level("forward");
    const StructureLevel* bwd = st.level("backward");
    const StructureLevel* layers = st.level("layer");
    const StructureLevel* iters = st.level("iteration");
    std::vector<Step> out;
    if (!fwd || !bwd || fwd->instances.empty() || bwd->instances.empty()) return out;
    // Layer instance of each op.
    std::map<OpId, std::size_t> layer_of;
    if (layers)
      for (std::size_t i = 0; i < layers->instances.size(); ++i)
        for (OpId o : layers->instances[i].ops) layer_of[o] = i;
    auto units_of = [&](const StructureInstance& in, Unit* rest) {
      std::vector<Unit> us;
      std::size_t cur = kNone;
      for (OpId o : in.ops) {
        auto it = layer_of.find(o);
        if (it == layer_of.end()) {
          if (rest) rest->ops.push_back(o);
          cur = kNone;
          continue;
        }
        if (it->second != cur) us.emplace_back(), cur = it->second;
        us.back().ops.push_back(o);
      }
      return us;
    };
    std::set<OpId> passes;  // every forward and backward op
    for (const StructureLevel* l : {fwd, bwd})
      for (const StructureInstance& in : l->instances) passes.insert(in.ops.begin(), in.ops.end());
    const std::size_t count = std::min(fwd->instances.size(), bwd->instances.size());
    for (std::size_t i = 0; i < count; ++i) {
      const StructureInstance& f = fwd->instances[i];
      const StructureInstance& b = bwd->instances[i];
      Step s;
      s.fwd = units_of(f, &s.root);
      Unit bwd_rest;
      s.bwd = units_of(b, &bwd_rest);
      if (s.fwd.empty()) {  // no layers: the forward is one unit
        s.fwd.push_back({f.ops, 0});
        s.root.ops.clear();
      }
      if (s.bwd.empty()) s.bwd.push_back({b.ops, 0});
      s.last_bwd = b.ops.empty() ? kNone : b.ops.back();
      // The optimizer: the iteration's device ops after the backward's last one (launch order).
      if (iters)
        for (const StructureInstance& it : iters->instances) {
          auto p = std::find(it.ops.begin(), it.ops.end(), s.last_bwd);
          if (p == it.ops.end()) continue;
          for (++p; p != it.ops.end(); ++p)
            if (!passes.count(*p)) s.opt.push_back(*p);
          break;
        }
      out.push_back(std::move(s));
    }
    assign_params(ctx, out);
    return out;
  }

  // Each unit's parameters: its forward GEMMs' weights (shapes), or --param-bytes in proportion to
  // GEMM time; backward units take their forward twins' (backward order mirrors the forward).
  void assign_params(const WhatIfContext& ctx, std::vector<Step>& steps) const {
    const Trace& t = ctx.trace;
    auto weights = [&](const Unit& u) {
      double w = 0;
      for (OpId k : u.ops)
        if (ctx.work[k].cls == KernelClass::Gemm && ctx.work[k].rhs_elems > 0 && ctx.work[k].batch <= 1)
          w += ctx.work[k].rhs_elems * dtype_bytes(ctx.work[k].dtype);
      return w;
    };
    auto gemm_time = [&](const Unit& u) {
      double d = 0;
      for (OpId k : u.ops)
        if (ctx.work[k].cls == KernelClass::Gemm) d += static_cast<double>(t.ops[k].duration());
      return d;
    };
    for (Step& s : steps) {
      double shaped = weights(s.root);
      for (const Unit& u : s.fwd) shaped += weights(u);
      const bool by_time = param_bytes_ > 0 || shaped <= 0;
      if (shaped <= 0 && param_bytes_ == 0)
        throw InputError(t.source, text + ": no GEMM shapes in the trace to size the parameters: give --param-bytes BYTES");
      double total_time = gemm_time(s.root);
      for (const Unit& u : s.fwd) total_time += gemm_time(u);
      auto params = [&](const Unit& u) {
        if (!by_time) return weights(u);
        if (param_bytes_ == 0) return 0.0;
        return total_time > 0 ? static_cast<double>(param_bytes_) * gemm_time(u) / total_time : 0.0;
      };
      s.root.params = params(s.root);
      for (Unit& u : s.fwd) u.params = params(u);
      for (std::size_t j = 0; j < s.bwd.size(); ++j)
        s.bwd[j].params = s.bwd.size() == s.fwd.size() ? s.fwd[s.fwd.size() - 1 - j].params : (s.fwd.empty() ? 0 : [&] {
          double a = 0;
          for (const Unit& u : s.fwd) a += u.params;
          return a / static_cast<double>(s.bwd.size());
        }());
    }
  }

  std::string memory_line(const Trace& t, double params, double two_units, std::uint32_t group, WhatIfCase& c) const {
    const OptimizerState opt = optimizer_state(t);
    const double state = opt.per_param > 0 ? opt.per_param * params : 0, g = static_cast<double>(group);
    const double gathered = stage_ == 3 ? two_units : params;
    const double total = (stage_ == 3 ? params / g : params) + params / g + state / g + (stage_ == 3 ? gathered : 0);
    c.memory =
        MemoryPerGpu{stage_ == 3 ? params / g : params, params / g, opt.name.empty() ? -1.0 : state / g, -1, stage_ == 3 ? gathered : 0};
    auto b = [](double x) {  // estimates: one decimal
      char buf[48];
      if (x >= double(1ull << 30))
        std::snprintf(buf, sizeof buf, "%.2f GiB", x / double(1ull << 30));
      else
        std::snprintf(buf, sizeof buf, "%.1f MiB", x / double(1ull << 20));
      return std::string(buf);
    };
    return "  memory per GPU: parameters " + b(params) + " sharded " + std::to_string(group) + " ways (" + b(params / g) + ")" +
           (stage_ == 3 ? " + two units gathered " + b(gathered) : " + every parameter kept gathered (stage 2) " + b(params)) +
           ", gradients " + b(params / g) + ", optimizer state " +
           (opt.name.empty() ? std::string("unknown (no Optimizer.step range)") : "(" + opt.name + ") " + b(state / g)) + "; total " +
           b(total) + " (activations: not in the trace)";
  }

  std::uint32_t n_;
  int stage_;
  std::uint32_t hybrid_;
  Bytes param_bytes_;
  bool strong_;
  TimeNs call_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  CompanionArgs a = split_companions(arg);
  const std::uint32_t n = parse_count(a.main, "--fsdp", 1'000'000, "GPUs");
  int stage = 3;
  if (const std::string* s = a.find("fsdp-stage")) {
    if (*s != "2" && *s != "3")
      throw InputError("--fsdp-stage " + *s + ": expected 2 (shard gradients and optimizer state) or 3 (and parameters)");
    stage = *s == "2" ? 2 : 3;
  }
  std::uint32_t hybrid = 0;
  if (const std::string* h = a.find("fsdp-hybrid")) {
    hybrid = parse_count(*h, "--fsdp-hybrid", n, "GPUs per shard group");
    if (n % hybrid != 0) throw InputError("--fsdp-hybrid " + *h + ": must divide --fsdp " + a.main);
  }
  const bool strong = companion_scaling(a, Scaling::Weak) == Scaling::Strong;
  TimeNs call = 30'000;
  if (const std::string* s = a.find("fsdp-call")) {
    try {
      call = parse_duration(*s);
    } catch (const std::exception& e) { throw InputError("--fsdp-call " + *s + ": " + e.what()); }
  }
  return std::make_unique<Fsdp>(n, stage, hybrid, companion_bytes(a, "param-bytes", 0), strong, call);
}

const char* const kCompanions[] = {
    "fsdp-stage=2|3: 3 shards parameters too (FULL_SHARD, default); 2 shards gradients and optimizer state (SHARD_GRAD_OP)",
    "fsdp-hybrid=G: shard within groups of G GPUs, replicate across the N/G groups (HYBRID_SHARD)",
    "param-bytes=BYTES: the model's parameters where the trace has no shapes (shared by the units' GEMM time)",
    "scaling=weak|strong: weak keeps the per-GPU batch (default), strong the global batch",
    "fsdp-call=DURATION: host time of one collective call (default 30 us)",
    nullptr};

}  // namespace

extern const TransformDef kFsdpTransform{
    "fsdp",
    "N",
    TransformDef::Arg::Required,
    "FSDP / ZeRO-3 on N GPUs: per-unit all-gathers before forward and backward, reduce-scatters after, the optimizer on 1/N",
    parse,
    kCompanions};

}  // namespace bneck
