// --pipeline-parallel S --microbatch-range REGEX [--schedule gpipe|1f1b] [--stage-boundary SEL]
//   [--backward-range REGEX] [--pp-bytes B] [--scaling strong|weak]. Model card: pipeline
//   parallelism from a one-GPU trace that runs its microbatches one after another (gradient
//   accumulation). Strong scaling by default: the global batch is the traced microbatches, each
//   stage holding 1/S of the layers. Weak keeps each GPU's work: every microbatch is S times larger
//   (as many microbatches), its kernels take model(S work)/model(work), its sends S times the
//   bytes; the rest of a step (the optimizer's parameter updates) is as traced.
// Captures: the ranges matching REGEX are the microbatches; consecutive ones with no other device
//   work between them form a group (a step), which with the device work that follows it (the
//   optimizer) up to the next group is a region. A microbatch's device ops launched inside a range
//   matching --backward-range (default `backward|Backward`) are its backward pass, the others its
//   forward. The forward is cut into S contiguous stages of equal time (the case's durations), or
//   where the ops --stage-boundary selects begin (the k-th selected op of a microbatch's forward
//   starts stage k); the backward runs the same layers in reverse, so the op at time fraction x of
//   the backward belongs to the stage holding fraction 1 - x of the forward; the rest of the region
//   (the optimizer updates parameters in layer order) is cut like the forward. Stage s runs on GPU
//   s (stage 0 keeps the trace's GPU; the others are new GPUs, same spec, each a new rank). Each
//   stage runs its chunks in the schedule's order on its streams: gpipe every forward, then every
//   backward, in microbatch order; 1f1b min(S - s - 1, M) warm-up forwards, then one forward and
//   one backward, then the remaining backwards; then its part of the rest. Between stages, each
//   forward's output and each backward's input gradient is sent point to point: a transfer of
//   --pp-bytes (default: the output of the last GEMM before the cut, from shapes) timed by the
//   collective model (SendRecv, 2 ranks), which starts when the sender's chunk has ended and the
//   receiver has finished what precedes the chunk in its order (NCCL's rendezvous: PyTorch's
//   blocking send makes the sender's stream wait for it); the receiver's chunk and the sender's
//   next op wait for the transfer.
// Assumed: each stage's host keeps ahead of its GPU: the moved ops lose their launch edges (the
//   trace's one host thread launched them in the one-GPU order, which the schedule changes) and
//   each stage's first op of a region waits for the launch of the region's first op.
// Not modelled: host-bound stages, interleaved schedules, activation recomputation, different
//   ranks per stage (tensor or data parallelism inside a stage).
#include <algorithm>
#include <map>
#include <set>

#include "models/collective.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"
#include "sim/base/regex.hpp"
#include "sim/base/units.hpp"

namespace bneck {
namespace {

enum class Schedule { GPipe, OneFOneB };

struct Microbatch {
  std::vector<OpId> fwd, bwd;  // device ops in start order
};

struct Region {
  std::vector<Microbatch> mbs;
  std::vector<OpId> rest;  // device ops after the group up to the next group, in start order
};

// The microbatches' GPU and its device work, grouped into regions (see the model card).
struct Grouping {
  std::uint32_t gpu = kNone;
  std::vector<OpId> ops;  // the GPU's device ops in start order
  std::vector<Region> regions;
  std::vector<OpId> before;  // device work before the first microbatch: stays on stage 0
};

// A point-to-point send between neighbouring stages, added once every region is placed.
struct Transfer {
  NodeId from_last, to_prev, to_first;
  std::uint32_t from, to;
  std::size_t m;
  int phase;
  Bytes bytes;
};

// What the transform did, for the log.
struct Counts {
  std::size_t transfers = 0, moved = 0, unknown_bytes = 0;
  TimeNs transfer_ns = 0;
};

// The stages' GPUs, ranks and streams, and the stream order the schedule builds on them.
struct Stages {
  const Trace& t;
  const WhatIfCase& c;
  Graph& g;
  GraphEditor& ed;
  std::vector<std::uint32_t> dev, proc;
  std::map<std::pair<std::uint32_t, LaneId>, LaneId> lane_of;  // (stage, trace lane) -> lane
  std::vector<LaneId> p2p_lane;
  // Stream order: per (stage, lane), the last op placed; the trace's stream edges into moved ops
  // are replaced by the schedule's.
  std::map<LaneId, NodeId> last_on;
  std::map<NodeId, NodeId> stream_next;  // the op placed after it on its lane
  std::set<LaneId> started;              // lanes that have their region's first launch edge
  OpId region_launch = kNone;            // the launch call of the region's first op
  std::map<LaneId, NodeId> before_last;

  // Stage s > 0: a new GPU and rank, one stream per trace stream the work used, a p2p stream each.
  Stages(const Trace& trace, const WhatIfCase& cs, Graph& graph, GraphEditor& editor, std::uint32_t s_count, const Grouping& gr)
      : t(trace), c(cs), g(graph), ed(editor), dev(s_count, gr.gpu), proc(s_count, graph.lanes[trace.ops[gr.ops[0]].lane].process) {
    for (std::uint32_t s = 1; s < s_count; ++s) {
      dev[s] = ed.add_device();
      proc[s] = ed.add_process();
    }
    p2p_lane.assign(s_count, kNone);
    for (std::uint32_t s = 0; s < s_count; ++s)
      p2p_lane[s] = add_comm_lane(ed, dev[s], proc[s], "NCCL p2p stream (pipeline stage " + std::to_string(s) + ")");
    for (OpId o : gr.before) last_on[g.lane(o)] = o;
    before_last = last_on;
  }

  LaneId lane(std::uint32_t s, LaneId l) {
    if (s == 0) return l;
    auto [it, fresh] = lane_of.emplace(std::make_pair(s, l), kNone);
    if (fresh) {
      GraphLane gl = g.lanes[l];
      gl.device = dev[s];
      gl.process = proc[s];
      gl.name = "stage " + std::to_string(s) + ": " + g.lane_label(l);
      it->second = ed.add_lane(gl);
    }
    return it->second;
  }

  NodeId place(NodeId o, std::uint32_t s) {  // returns the op it follows (or kNone)
    const LaneId orig = t.ops[o].lane;
    const LaneId l = lane(s, orig);
    if (s != 0) ed.move(o, l);
    // The stage's own order replaces the trace's stream order and its host's launch order
    // (each stage's host keeps ahead of its GPU; the region starts at its first launch).
    ed.drop_in_edges(
        o, [](NodeId, const EdgeProps& p, const Graph&) { return p.type() == EdgeType::StreamOrder || p.type() == EdgeType::Launch; });
    if (!started.count(l) && region_launch != kNone) {
      ed.add_edge(region_launch, o, EdgeType::Launch, DepType::StartToStart, c.spec.gpu.launch_latency);
      started.insert(l);
    }
    NodeId prev = kNone;
    if (auto it = last_on.find(l); it != last_on.end())
      prev = it->second;
    else if (auto b = before_last.find(orig); b != before_last.end())
      prev = b->second;  // a new stage's stream starts after the work before the pipeline
    if (prev != kNone) {
      ed.add_edge(prev, o, EdgeType::StreamOrder, DepType::EndToStart, 0);
      stream_next[prev] = o;
    }
    last_on[l] = o;
    return prev;
  }
};

// The host's waits on the device (synchronize, event waits) wait for every stage of the region.
void wait_for_every_stage(const Trace& t, const Graph& g, GraphEditor& ed, const std::vector<Region>& regions,
                          const std::vector<std::map<LaneId, NodeId>>& region_last) {
  for (std::size_t ri = 0; ri < regions.size(); ++ri) {
    std::vector<OpId> all = regions[ri].rest;
    for (const Microbatch& m : regions[ri].mbs) {
      all.insert(all.end(), m.fwd.begin(), m.fwd.end());
      all.insert(all.end(), m.bwd.begin(), m.bwd.end());
    }
    // Only waits issued after the region's last launch (a synchronize at the end of the step):
    // a wait inside the region keeps its own op (no cycle through the host's later launches).
    TimeNs last_launch = 0;
    for (OpId o : all)
      if (t.ops[o].link != kNone) last_launch = std::max(last_launch, t.ops[t.ops[o].link].start);
    std::set<std::pair<NodeId, int>> syncs;
    for (OpId o : all)
      for (auto e : boost::make_iterator_range(boost::out_edges(o, g.csr))) {
        const NodeId api = boost::target(e, g.csr);
        if (g.csr[e].type() == EdgeType::HostSync && !g.synthetic(api) && t.ops[api].start > last_launch)
          syncs.emplace(api, static_cast<int>(g.csr[e].attach()));
      }
    for (auto [api, attach] : syncs)
      for (auto& [l, o] : region_last[ri]) ed.add_edge(o, api, EdgeType::HostSync, static_cast<DepType>(attach), 0);
  }
}

class PipelineParallel : public TransformStep {
 public:
  PipelineParallel(std::uint32_t stages, std::string mb, Schedule sched, std::string boundary, std::string bwd, bool bwd_given, Bytes bytes,
                   Scaling scaling)
      : s_(stages),
        mb_(std::move(mb)),
        sched_(sched),
        boundary_(std::move(boundary)),
        bwd_(std::move(bwd)),
        bwd_given_(bwd_given),
        bytes_(bytes),
        batch_(scaling == Scaling::Weak ? stages : 1) {}

  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    add_layout_ranks(c, s_);
    const Trace& t = ctx.trace;
    Grouping gr = group(ctx, c);
    TimeNs before = 0, after = 0;
    if (batch_ > 1)
      for (const Region& reg : gr.regions)
        for (const Microbatch& mb : reg.mbs)
          for (const auto* v : {&mb.fwd, &mb.bwd}) rescale_kernels(ctx, c, *v, batch_, before, after);
    c.log.push_back(text + ": " +
                    (batch_ == 1 ? "strong scaling: the global batch is the traced microbatches (scaling=weak makes each " +
                                       std::to_string(s_) + " times larger)"
                                 : "weak scaling: each microbatch " + std::to_string(s_) + " times the traced one (its kernels " +
                                       format_duration(before) + " -> " + format_duration(after) + ", its sends " + std::to_string(s_) +
                                       "x the bytes)"));
    auto selected = boundary_.empty() ? std::vector<bool>() : ctx.select(boundary_, true);

    Graph& g = c.edit_graph();
    GraphEditor ed(g, text);
    Stages st(t, c, g, ed, s_, gr);
    // Stage of each op by time fraction (forward cut points; see the model card).
    Counts n;
    std::vector<Transfer> pending;
    std::vector<double> stage_weights;                                     // bytes of the forward GEMMs' weights per stage (shapes)
    std::vector<std::map<LaneId, NodeId>> region_last(gr.regions.size());  // last op per lane, per region
    for (std::size_t ri = 0; ri < gr.regions.size(); ++ri) {
      n.moved += place_region(ctx, c, gr.regions[ri], selected, st, pending, ri == 0 ? &stage_weights : nullptr);
      for (auto& [l, o] : st.last_on) region_last[ri][l] = o;
    }
    for (const Transfer& x : pending) add_transfer(c, st, x, n);
    wait_for_every_stage(t, g, ed, gr.regions, region_last);
    ed.commit();
    log_summary(t, c, gr.regions, n, stage_weights);
  }

 private:
  // Microbatch and phase of every device op, and the regions they form on the microbatches' GPU.
  Grouping group(const WhatIfContext& ctx, WhatIfCase& c) const {
    const Trace& t = ctx.trace;
    RangeIndex idx(t);
    // Without --microbatch-range: the structure's microbatches (a forward and its backward, found
    // from the launching threads) and its backward passes.
    const bool found = mb_.empty();
    const Regex mb_re(found ? "@microbatch" : mb_), bwd_re(found && !bwd_given_ ? "@backward" : bwd_);
    const auto mbs = idx.match(mb_re);
    if (mbs.empty() && found)
      throw InputError(text + ": needs --microbatch-range REGEX: " + t.source +
                       " shows no iteration of two or more forward and backward passes (bneck structure)");
    if (mbs.empty()) throw InputError(text + ": no NVTX range matches --microbatch-range " + mb_);
    if (found)
      c.log.push_back(text + ": microbatches are the structure's @microbatch (" + std::to_string(mbs.size()) +
                      ": a forward and the backward after it), backward passes " + (bwd_given_ ? bwd_ : std::string("@backward")) +
                      " (no --microbatch-range; bneck structure)");
    // Microbatch and phase of every device op: the ops each range holds (RangeIndex's rule: any
    // thread of its process while it is open, so the autograd thread's backward too).
    auto launched_in = [&](std::size_t r, auto&& f) {
      for (OpId o : idx.device_ops(r))
        if (!(t.ops[o].flags & Op::kFlagNccl)) f(o);
    };
    std::vector<std::int64_t> mb_of(t.ops.size(), -1);
    std::vector<bool> is_bwd(t.ops.size(), false);
    // A microbatch is its range's name (annotated twice, forward and backward, it is one); a
    // structure instance is its own.
    for (std::size_t r : mbs)
      launched_in(r, [&](OpId o) {
        if (mb_of[o] < 0)
          mb_of[o] =
              t.ranges[r].structure ? (std::int64_t{1} << 40) + static_cast<std::int64_t>(r) : static_cast<std::int64_t>(t.ranges[r].name);
      });
    for (std::size_t r : idx.match(bwd_re)) launched_in(r, [&](OpId o) { is_bwd[o] = true; });
    // The GPU the microbatches run on, and its device ops in start order.
    Grouping gr;
    for (OpId i = 0; i < t.ops.size() && gr.gpu == kNone; ++i)
      if (mb_of[i] >= 0) gr.gpu = t.lanes[t.ops[i].lane].device;
    if (gr.gpu == kNone) throw InputError(text + ": the microbatch ranges launch no device work");
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (is_device_op(t.ops[i].kind) && t.lanes[t.ops[i].lane].device == gr.gpu && !c.graph->removed(i)) gr.ops.push_back(i);
    std::stable_sort(gr.ops.begin(), gr.ops.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
    // Regions.
    std::map<std::int64_t, std::size_t> slot;
    bool in_group = false;
    for (OpId o : gr.ops) {
      if (mb_of[o] >= 0) {
        if (!in_group) {
          gr.regions.emplace_back();
          slot.clear();
          in_group = true;
        }
        auto [it, fresh] = slot.emplace(mb_of[o], gr.regions.back().mbs.size());
        if (fresh) gr.regions.back().mbs.emplace_back();
        Microbatch& m = gr.regions.back().mbs[it->second];
        (is_bwd[o] ? m.bwd : m.fwd).push_back(o);
      } else {
        in_group = false;
        (gr.regions.empty() ? gr.before : gr.regions.back().rest).push_back(o);
      }
    }
    return gr;
  }

  // Stage s's order of (microbatch, phase) chunks in the schedule.
  std::vector<std::pair<std::size_t, int>> chunk_order(std::uint32_t s, std::size_t m_count) const {
    std::vector<std::pair<std::size_t, int>> v;
    if (sched_ == Schedule::GPipe) {
      for (std::size_t m = 0; m < m_count; ++m) v.emplace_back(m, 0);
      for (std::size_t m = 0; m < m_count; ++m) v.emplace_back(m, 1);
    } else {
      const std::size_t warm = std::min<std::size_t>(s_ - s - 1, m_count);
      for (std::size_t m = 0; m < warm; ++m) v.emplace_back(m, 0);
      for (std::size_t m = 0; m + warm < m_count; ++m) {
        v.emplace_back(m + warm, 0);
        v.emplace_back(m, 1);
      }
      for (std::size_t m = m_count - warm; m < m_count; ++m) v.emplace_back(m, 1);
    }
    return v;
  }

  // One region: its microbatches cut into stages and placed stage by stage in the schedule's
  // order, then its rest; the transfers between neighbouring stages go to `pending`; the stage
  // weights of the first region to `stage_weights`. Returns the device ops moved off stage 0.
  std::size_t place_region(const WhatIfContext& ctx, const WhatIfCase& c, const Region& reg, const std::vector<bool>& selected, Stages& st,
                           std::vector<Transfer>& pending, std::vector<double>* stage_weights) const {
    const Trace& t = ctx.trace;
    const std::size_t m_count = reg.mbs.size();
    const Bytes fallback = bytes_;
    st.started.clear();
    st.region_launch = kNone;
    for (const Microbatch& mb : reg.mbs)
      for (const auto* v : {&mb.fwd, &mb.bwd})
        for (OpId o : *v)
          if (t.ops[o].link != kNone && (st.region_launch == kNone || t.ops[t.ops[o].link].start < t.ops[st.region_launch].start))
            st.region_launch = t.ops[o].link;
    // chunk[m][phase][s]: ops; the cut from the first microbatch's forward.
    std::vector<std::vector<std::vector<std::vector<OpId>>>> chunk(
        m_count, std::vector<std::vector<std::vector<OpId>>>(2, std::vector<std::vector<OpId>>(s_)));
    std::vector<Bytes> act_bytes(s_, fallback);  // sent from stage s to s + 1 (forward)
    for (std::size_t m = 0; m < m_count; ++m) {
      const Microbatch& mb = reg.mbs[m];
      std::vector<double> cuts = forward_cuts(mb.fwd, c, selected);
      cut(mb.fwd, c, cuts, false, chunk[m][0]);
      cut(mb.bwd, c, cuts, true, chunk[m][1]);
      if (m == 0 && fallback == 0)
        for (std::uint32_t s = 0; s + 1 < s_; ++s)
          for (auto it = chunk[m][0][s].rbegin(); it != chunk[m][0][s].rend(); ++it)
            if (ctx.work[*it].cls == KernelClass::Gemm && ctx.work[*it].out_elems > 0) {
              act_bytes[s] = static_cast<Bytes>(ctx.work[*it].out_elems * dtype_bytes(ctx.work[*it].dtype));
              break;
            }
    }
    if (stage_weights) *stage_weights = weights_of(chunk, ctx);
    std::vector<std::vector<OpId>> rest(s_);
    cut(reg.rest, c, forward_cuts({}, c, {}), false, rest);
    // Place chunks stage by stage in order; remember, per chunk, its first op, the op before it
    // on its stage (the receiver's readiness) and its last op.
    struct Placed {
      NodeId first = kNone, prev = kNone, last = kNone;
    };
    std::vector<std::vector<std::vector<Placed>>> placed(m_count, std::vector<std::vector<Placed>>(2, std::vector<Placed>(s_)));
    std::size_t moved = 0;
    for (std::uint32_t s = 0; s < s_; ++s) {
      for (auto [m, ph] : chunk_order(s, m_count)) {
        Placed& p = placed[m][static_cast<std::size_t>(ph)][s];
        for (OpId o : chunk[m][static_cast<std::size_t>(ph)][s]) {
          NodeId prev = st.place(o, s);
          if (p.first == kNone) {
            p.first = o;
            p.prev = prev;
          }
          p.last = o;
          moved += s != 0;
        }
      }
      for (OpId o : rest[s]) moved += (st.place(o, s), s != 0);
    }
    // Transfers between neighbouring stages.
    for (std::size_t m = 0; m < m_count; ++m)
      for (int ph = 0; ph < 2; ++ph)
        for (std::uint32_t s = 0; s + 1 < s_; ++s) {
          const std::uint32_t from = ph == 0 ? s : s + 1, to = ph == 0 ? s + 1 : s;
          const Placed& a = placed[m][static_cast<std::size_t>(ph)][from];
          const Placed& b = placed[m][static_cast<std::size_t>(ph)][to];
          if (a.last == kNone || b.first == kNone) continue;
          pending.push_back({a.last, b.prev, b.first, from, to, m, ph, act_bytes[s]});
        }
    return moved;
  }

  // A send on the sender's p2p stream, after the sender's chunk and the receiver's readiness,
  // before the receiver's chunk and the sender's next op (a blocking send).
  void add_transfer(const WhatIfCase& c, Stages& st, const Transfer& x, Counts& n) const {
    if (x.bytes == 0) ++n.unknown_bytes;
    const Bytes bytes = x.bytes * batch_;
    TimeNs d = bytes ? collective_time(c.spec, CollKind::SendRecv, bytes, 2).time_ns : 0;
    NodeId node =
        add_comm_node(st.ed, st.p2p_lane[x.from],
                      std::string(x.phase == 0 ? "send activation" : "send gradient") + " (pipeline stage " + std::to_string(x.from) +
                          " -> " + std::to_string(x.to) + ", microbatch " + std::to_string(x.m) + ", " + format_bytes(bytes) + ")",
                      d);
    st.ed.add_edge(x.from_last, node, EdgeType::Event, DepType::EndToStart, 0);
    if (x.to_prev != kNone) st.ed.add_edge(x.to_prev, node, EdgeType::Event, DepType::EndToStart, 0);  // the receiver is ready
    st.ed.add_edge(node, x.to_first, EdgeType::Event, DepType::EndToStart, 0);
    if (auto it = st.stream_next.find(x.from_last); it != st.stream_next.end())  // a blocking send
      st.ed.add_edge(node, it->second, EdgeType::Event, DepType::EndToStart, 0);
    ++n.transfers;
    n.transfer_ns += d;
  }

  void log_summary(const Trace& t, WhatIfCase& c, const std::vector<Region>& regions, const Counts& n,
                   const std::vector<double>& stage_weights) const {
    c.log.push_back(text + ": " + std::to_string(regions.size()) + " steps of " +
                    std::to_string(regions.empty() ? 0 : regions[0].mbs.size()) + " microbatches on " + std::to_string(s_) + " stages (" +
                    (sched_ == Schedule::GPipe ? "gpipe" : "1f1b") + "), " + std::to_string(n.moved) + " device ops moved to stages 1.." +
                    std::to_string(s_ - 1) + ", " + std::to_string(n.transfers) + " point-to-point transfers (" +
                    format_duration(n.transfer_ns) + " by the collective model on " + c.spec.name + ")" +
                    (n.unknown_bytes ? "; " + std::to_string(n.unknown_bytes) + " of unknown size (no shapes: give --pp-bytes)" : ""));
    if (!regions.empty() && s_ > 1) {  // the textbook figure beside the simulated idle time (ranks table)
      const double m = static_cast<double>(regions[0].mbs.size());
      c.log.push_back("  bubble: (S - 1) / (M + S - 1) = " + fmt_num("%.0f", 100.0 * (s_ - 1) / (m + s_ - 1)) +
                      " % of a step for equal stages and no transfers; the ranks table gives each stage's simulated idle time");
    }
    // Memory per stage: the weights its forward GEMMs read (shapes), as many gradients, and the
    // activations of the microbatches in flight (gpipe: all M; 1f1b: at most S - s).
    double all_weights = 0;
    for (double w : stage_weights) all_weights += w;
    if (all_weights > 0 && !regions.empty()) {
      std::string mem =
          "  memory per stage (weights from the forward GEMMs' shapes; gradients as many; activations of the microbatches in flight):";
      const std::size_t m_count = regions[0].mbs.size();
      for (std::uint32_t s = 0; s < s_; ++s) {
        const std::size_t flight = sched_ == Schedule::GPipe ? m_count : std::min<std::size_t>(m_count, s_ - s);
        mem += std::string(s ? ";" : "") + " stage " + std::to_string(s) + " weights " +
               format_bytes(static_cast<Bytes>(stage_weights[s])) + ", " + std::to_string(flight) + " microbatches in flight";
      }
      c.memory = model_state_memory(t, *std::max_element(stage_weights.begin(), stage_weights.end()));
      c.log.push_back(mem);
      c.log.push_back("  memory per GPU (the largest stage): weights " + format_bytes(static_cast<Bytes>(c.memory->parameters)) + ", " +
                      memory_parts_text(*c.memory) + " (activations: not in the trace)");
    }
  }
  // Forward cut points as time fractions (S - 1 of them, rising): equal time, or where the
  // --stage-boundary ops begin.
  std::vector<double> forward_cuts(const std::vector<OpId>& fwd, const WhatIfCase& c, const std::vector<bool>& selected) const {
    std::vector<double> cuts;
    if (!selected.empty()) {
      double total = 0, at = 0;
      for (OpId o : fwd) total += static_cast<double>(c.durations[o]);
      for (OpId o : fwd) {
        if (selected[o] && cuts.size() + 1 < s_ && total > 0) cuts.push_back(at / total);
        at += static_cast<double>(c.durations[o]);
      }
    }
    if (cuts.size() + 1 != s_) {
      cuts.clear();
      for (std::uint32_t s = 1; s < s_; ++s) cuts.push_back(static_cast<double>(s) / s_);
    }
    return cuts;
  }
  // Ops into stages by the time fraction of their middle (reversed for a backward pass).
  void cut(const std::vector<OpId>& ops, const WhatIfCase& c, const std::vector<double>& cuts, bool reverse,
           std::vector<std::vector<OpId>>& out) const {
    double total = 0, at = 0;
    for (OpId o : ops) total += static_cast<double>(c.durations[o]);
    for (OpId o : ops) {
      const double d = static_cast<double>(c.durations[o]);
      double x = total > 0 ? (at + d / 2) / total : 0;
      if (reverse) x = 1 - x;
      const auto s = static_cast<std::size_t>(std::upper_bound(cuts.begin(), cuts.end(), x) - cuts.begin());
      out[std::min<std::size_t>(s, s_ - 1)].push_back(o);
      at += d;
    }
  }
  // Bytes of the weights the forward GEMMs of the first microbatch read, per stage (second
  // operands from shapes; 0 where the trace has none).
  std::vector<double> weights_of(const std::vector<std::vector<std::vector<std::vector<OpId>>>>& chunk, const WhatIfContext& ctx) const {
    std::vector<double> w(s_, 0);
    if (chunk.empty()) return w;
    for (std::uint32_t s = 0; s < s_; ++s)
      for (OpId o : chunk[0][0][s])
        if (ctx.work[o].cls == KernelClass::Gemm) w[s] += ctx.work[o].rhs_elems * dtype_bytes(ctx.work[o].dtype);
    return w;
  }
  std::uint32_t s_;
  std::string mb_;
  Schedule sched_;
  std::string boundary_, bwd_;
  bool bwd_given_ = false;
  Bytes bytes_;
  std::uint32_t batch_;  // a microbatch over the traced one: 1 (strong), S (weak)
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  CompanionArgs a = split_companions(arg);
  const std::uint32_t v = parse_count(a.main, "--pipeline-parallel", 4096, "stages");
  const std::string* mbp = a.find("microbatch-range");
  const std::string mb = mbp ? *mbp : "";  // empty: the structure's microbatches
  if (mbp && mb.empty()) throw InputError("--pipeline-parallel " + a.main + ": --microbatch-range needs a REGEX (the microbatch ranges)");
  if (!mb.empty()) (void)Regex(mb);
  Schedule sched = Schedule::GPipe;
  if (const std::string* s = a.find("schedule")) {
    if (*s == "1f1b")
      sched = Schedule::OneFOneB;
    else if (*s != "gpipe")
      throw InputError("--schedule " + *s + ": expected gpipe or 1f1b");
  }
  std::string boundary = a.find("stage-boundary") ? checked_selector(*a.find("stage-boundary")) : "";
  std::string bwd = a.find("backward-range") ? *a.find("backward-range") : "backward|Backward";
  (void)Regex(bwd);
  return std::make_unique<PipelineParallel>(v, mb, sched, boundary, bwd, a.find("backward-range") != nullptr,
                                            companion_bytes(a, "pp-bytes", 0), companion_scaling(a, Scaling::Strong));
}

const char* const kCompanions[] = {
    "microbatch-range=REGEX: the microbatch ranges (default: the structure's @microbatch, forward and backward by launching thread)",
    "schedule=gpipe|1f1b: the pipeline schedule (default gpipe)",
    "stage-boundary=SEL: the ops that begin stages 1..S-1 in each microbatch's forward (default: equal time)",
    "backward-range=REGEX: ranges inside a microbatch that hold its backward pass (default backward|Backward)",
    "pp-bytes=BYTES: activation size sent between stages where the trace has no shapes (\"16 MiB\")",
    "scaling=strong|weak: strong keeps the traced microbatches (default), weak makes each S times larger (each GPU's work as traced)",
    nullptr};

}  // namespace

extern const TransformDef kPipelineParallelTransform{
    "pipeline-parallel",
    "S",
    TransformDef::Arg::Required,
    "pipeline parallelism on S GPUs: each microbatch cut into S stages, run in the schedule's order with point-to-point sends",
    parse,
    kCompanions};

}  // namespace bneck
