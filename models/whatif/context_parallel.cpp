// --context-parallel N [--cp-mode ring|all-to-all] [--cp-bytes B]. Model card: context (sequence)
//   parallelism from a one-GPU trace of a long-sequence step. The sequence is split N ways (strong
//   scaling by nature: the global sequence is the traced one); ranks are symmetric: one is simulated.
// Captures: every kernel but attention works on 1/N of the tokens: its time x model(work/N) /
//   model(work). Attention kernels (fused attention: flash, memory-efficient, cuDNN; both passes):
//   ring (default): each rank's queries meet the N key/value blocks one after another, 1/N^2 of
//     the attention's work each (load-balanced causal sharding), the local block first; the next
//     block arrives from the neighbour by a point-to-point exchange on a communication stream,
//     started when the attention starts and chained (each block is forwarded on), so block i's
//     compute waits for exchange i: time = part + sum over i of max(part, exchange) when the
//     stream is free. The exchange moves one key/value block: 2 x the attention's output elements
//     / N x the element size (shapes; multi-head attention: grouped-query K/V are smaller, give
//     --cp-bytes), timed by the collective model's send/recv on the case's spec.
//   all-to-all (Ulysses): an all-to-all of q, k and v before each attention (3 x the output / N per
//     rank) and of its output after; the attention runs on 1/N of the heads over the whole sequence.
// Memory per GPU: the parameters stay replicated; activations and K/V are 1/N (plus one block in
//   flight for the ring).
// Not modelled: eager attention (batched GEMMs and softmax: they take 1/N of the work with no
//   exchange; the log says so), the causal imbalance of a plain contiguous split.
#include <algorithm>
#include <map>

#include "models/collective.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {
namespace {

class ContextParallel : public TransformStep {
 public:
  ContextParallel(std::uint32_t n, bool ring, Bytes bytes) : n_(n), ring_(ring), bytes_(bytes) {}

  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    add_layout_ranks(c, n_);
    const Trace& t = ctx.trace;
    std::map<LaneId, std::vector<OpId>> streams;  // kernels per stream, by start
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (t.ops[i].kind == OpKind::Kernel && !(t.ops[i].flags & Op::kFlagNccl)) streams[t.ops[i].lane].push_back(i);
    for (auto& [lane, v] : streams) std::stable_sort(v.begin(), v.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
    Graph& g = c.edit_graph();
    GraphEditor ed(g, text);
    std::map<std::uint32_t, LaneId> comm_lane;
    std::size_t attn = 0, unknown = 0, exchanges = 0;
    TimeNs before = 0, after = 0, comm_ns = 0;
    double kv_block = 0;
    const double f = 1.0 / n_;
    for (auto& [lane, ops] : streams) {
      for (std::size_t j = 0; j < ops.size(); ++j) {
        const OpId k = ops[j];
        const KernelWork& w = ctx.work[k];
        const TimeNs d = c.durations[k];
        const TimeNs nd = retime_by_work(t, k, w, d, c.spec, f, f, f);
        before += d;
        if (w.cls != KernelClass::Attention) {
          c.durations[k] = nd;
          after += nd;
          continue;
        }
        ++attn;
        const double elem = dtype_bytes(w.dtype);
        const Bytes out = w.out_elems > 0 ? static_cast<Bytes>(w.out_elems * elem) : 0;
        const Bytes kv = bytes_ ? bytes_ : static_cast<Bytes>(2.0 * static_cast<double>(out) * f);
        if (kv == 0) ++unknown;
        kv_block = std::max(kv_block, static_cast<double>(kv));
        const std::uint32_t dev = t.lanes[t.ops[k].lane].device;
        auto it = comm_lane.emplace(dev, kNone).first;
        if (it->second == kNone && kv > 0)
          it->second =
              add_comm_lane(ed, dev, g.lanes[t.ops[k].lane].process, "NCCL stream (context-parallel, GPU " + std::to_string(dev) + ")");
        const OpId next = j + 1 < ops.size() ? ops[j + 1] : kNone;
        if (!ring_) {  // Ulysses: all-to-all of q, k, v before, of the output after; 1/N of the heads
          c.durations[k] = nd;
          after += nd;
          if (kv == 0) continue;
          const TimeNs a1 = collective_time(c.spec, CollKind::AllToAll, static_cast<Bytes>(1.5 * static_cast<double>(kv)), n_).time_ns;
          const TimeNs a2 = collective_time(c.spec, CollKind::AllToAll, static_cast<Bytes>(0.5 * static_cast<double>(kv)), n_).time_ns;
          NodeId pre = add_comm_node(ed, it->second, "ncclAllToAll (context-parallel q, k, v)", a1);
          NodeId post = add_comm_node(ed, it->second, "ncclAllToAll (context-parallel output)", a2);
          if (j > 0) ed.add_edge(ops[j - 1], pre, EdgeType::Event, DepType::EndToStart, 0);
          ed.add_edge(pre, k, EdgeType::Event, DepType::EndToStart, 0);
          ed.add_edge(k, post, EdgeType::Event, DepType::EndToStart, 0);
          if (next != kNone) ed.add_edge(post, next, EdgeType::Event, DepType::EndToStart, 0);
          exchanges += 2;
          comm_ns += a1 + a2;
          continue;
        }
        // Ring: the kernel keeps the local block's part; N-1 parts follow it on its stream, each
        // after its block's exchange.
        const TimeNs part = nd / n_;
        c.durations[k] = part;
        after += part * n_;
        if (kv == 0 || n_ == 1) {
          c.durations[k] = nd;
          after += nd - part * n_;
          continue;
        }
        const TimeNs x = collective_time(c.spec, CollKind::SendRecv, kv, 2).time_ns;
        NodeId prev_part = k, prev_x = kNone;
        for (std::uint32_t i = 1; i < n_; ++i) {
          NodeId xn = add_comm_node(ed, it->second, "ncclSendRecv (context-parallel ring, K/V block " + std::to_string(i) + ")", x);
          if (prev_x == kNone)
            ed.add_edge(k, xn, EdgeType::Event, DepType::StartToStart, 0);
          else
            ed.add_edge(prev_x, xn, EdgeType::StreamOrder, DepType::EndToStart, 0);
          NewNode nn;
          nn.name = t.name(t.ops[k]) + " (ring step " + std::to_string(i) + ")";
          nn.kind = OpKind::Kernel;
          nn.lane = t.ops[k].lane;
          nn.source = DurationSource::Fixed;
          nn.fixed_ns = part;
          NodeId pn = ed.add_node(nn);
          ed.add_edge(prev_part, pn, EdgeType::StreamOrder, DepType::EndToStart, 0);
          ed.add_edge(xn, pn, EdgeType::Event, DepType::EndToStart, 0);
          prev_part = pn;
          prev_x = xn;
          ++exchanges;
          comm_ns += x;
        }
        if (next != kNone) ed.add_edge(prev_part, next, EdgeType::Event, DepType::EndToStart, 0);
      }
    }
    ed.commit();
    c.log.push_back(
        text + ": the sequence split " + std::to_string(n_) + " ways (" + format_duration(before) + " of kernels -> " +
        format_duration(after) + "); " + std::to_string(attn) + " attention kernels " +
        (ring_ ? "in a ring of " + std::to_string(n_) + " K/V blocks" : std::string("on 1/") + std::to_string(n_) + " of the heads") +
        ", " + std::to_string(exchanges) + (ring_ ? " send/recv exchanges" : " all-to-alls") + " (" + format_duration(comm_ns) +
        " by the collective model on " + c.spec.name + ")" +
        (unknown ? "; " + std::to_string(unknown) + " attention kernels of unknown size (no shapes: give --cp-bytes)" : "") +
        (attn == 0 ? "; no fused attention kernel: eager attention's GEMMs and softmax take 1/N of the work, no K/V exchange" : ""));
    c.log.push_back(text + ": strong scaling: the traced sequence is split, every GPU holds 1/" + std::to_string(n_) + " of it");
    const double weights = step_gemm_weights(ctx, [](OpId) { return true; });
    c.memory = model_state_memory(ctx.trace, weights > 0 ? weights : -1);
    if (ring_ && kv_block > 0) c.memory->buffers = kv_block;
    c.log.push_back(
        "  memory per GPU: parameters replicated (" +
        (weights > 0 ? "the GEMM weights of a step, " + format_bytes(static_cast<Bytes>(weights)) : std::string("no shapes")) +
        "), activations and K/V 1/" + std::to_string(n_) + " of one GPU's" +
        (ring_ && kv_block > 0 ? ", plus one K/V block in flight (" + format_bytes(static_cast<Bytes>(kv_block)) + ")" : std::string()) +
        (weights > 0 ? "; " + memory_parts_text(*c.memory) : std::string()));
  }

 private:
  std::uint32_t n_;
  bool ring_;
  Bytes bytes_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  CompanionArgs a = split_companions(arg);
  const std::uint32_t n = parse_count(a.main, "--context-parallel", 65536, "GPUs");
  bool ring = true;
  if (const std::string* m = a.find("cp-mode")) {
    if (*m != "ring" && *m != "all-to-all") throw InputError("--cp-mode " + *m + ": expected ring or all-to-all");
    ring = *m == "ring";
  }
  return std::make_unique<ContextParallel>(n, ring, companion_bytes(a, "cp-bytes", 0));
}

const char* const kCompanions[] = {
    "cp-mode=ring|all-to-all: ring attention's K/V exchange (default) or an all-to-all of heads (Ulysses)",
    "cp-bytes=BYTES: one rank's K/V block where the trace has no shapes (all-to-all: q, k, v are 1.5x it, the output 0.5x)", nullptr};

}  // namespace

extern const TransformDef kContextParallelTransform{
    "context-parallel",
    "N",
    TransformDef::Arg::Required,
    "context parallelism on N GPUs: the sequence split N ways, ring attention's K/V exchange overlapped with the blocks",
    parse,
    kCompanions};

}  // namespace bneck
