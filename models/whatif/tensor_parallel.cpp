// --tensor-parallel N [--tp-comm SEL] [--tp-split SEL] [--tp-bytes B] [--scaling strong|weak]. Model
//   card: Megatron-style tensor parallelism from a one-GPU trace of the same model. Ranks are
//   symmetric: one is simulated. Strong scaling by default: the global batch is the traced one,
//   which every GPU of the group sees (1/N of the model each). Weak keeps each GPU's work: the batch
//   is N times the traced one, so a split kernel keeps its traced time (N times the work over N),
//   a replicated kernel takes model(N work)/model(work), and each all-reduce moves N times the bytes.
// Captures: on each stream, in order, the GEMMs that --tp-comm selects are row-parallel (default:
//   kernels inside ranges named like `row_parallel` or `RowParallel`; with none, found from the
//   GEMMs' shapes or order: infer_row_parallel); the other GEMMs are
//   column-parallel. A column-parallel GEMM opens a sharded region that the next row-parallel GEMM
//   closes: every kernel in it (attention on its share of the heads, activations, the copies that
//   reshape heads) works on 1/N of the data, as do the two GEMMs. Kernels outside (norms, residual
//   adds, embeddings) are replicated and keep their time. A split kernel takes its time x
//   model(work / N) / model(work): FLOPs and bytes / N, its grid / N unless the launch fits in one
//   wave of the GPU (a persistent GEMM keeps one block per SM). After each row-parallel group (the
//   consecutive selected kernels on a stream) an all-reduce of its output (shapes: the GEMM's
//   output elements x element size; else --tp-bytes) runs on a communication stream, timed by the
//   collective model for N ranks on the case's spec; the next kernel of the stream waits for it
//   (PyTorch's all_reduce makes the current stream wait for NCCL's).
// Not modelled: the host time of the all-reduce calls (c10d: ~20-40 us each, hidden while the GPU
//   is behind the host), sequence parallelism, training's backward all-reduces, a trace already
//   tensor-parallel (its collectives are left as they are).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "models/collective.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {
namespace {

constexpr const char* kDefaultComm = "range~row_parallel|RowParallel|row-parallel";

class TensorParallel : public TransformStep {
 public:
  TensorParallel(std::uint32_t n, std::string comm, std::string split, Bytes bytes, Scaling scaling)
      : n_(n), comm_(std::move(comm)), split_(std::move(split)), bytes_(bytes), batch_(scaling == Scaling::Weak ? n : 1) {}

  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    add_layout_ranks(c, n_);
    const Trace& t = ctx.trace;
    auto row = ctx.select(comm_, true);
    auto scope = ctx.select(split_, true);
    // Device ops per stream, in start order.
    std::map<LaneId, std::vector<OpId>> streams;
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (is_device_op(t.ops[i].kind) && !(t.ops[i].flags & Op::kFlagNccl)) streams[t.ops[i].lane].push_back(i);
    for (auto& [lane, v] : streams) std::stable_sort(v.begin(), v.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
    std::string rule = "--tp-comm " + comm_;
    if (count_selected(row) == 0 && comm_ == kDefaultComm) rule = infer_row_parallel(ctx, streams, row);
    if (count_selected(row) == 0)
      throw InputError(text + ": --tp-comm " + comm_ + " selects no kernel (the row-parallel GEMMs after which the output is all-reduced)" +
                       (comm_ == kDefaultComm ? " and the trace's GEMMs show no column/row pair" : ""));
    c.log.push_back(text + ": row-parallel GEMMs by " + rule);
    Graph& g = c.edit_graph();
    GraphEditor ed(g, text);
    std::map<std::uint32_t, LaneId> comm_lane;
    std::size_t split = 0, reduces = 0, unknown = 0;
    std::set<OpId> split_ops;
    TimeNs before = 0, after = 0, comm_ns = 0, rep_before = 0, rep_after = 0;
    for (auto& [lane, ops] : streams) {
      bool sharded = false;
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const OpId i = ops[k];
        const Op& o = t.ops[i];
        const KernelWork& w = ctx.work[i];
        const bool gemm = o.kind == OpKind::Kernel && w.cls == KernelClass::Gemm;
        const bool is_row = row[i];
        const bool in_scope = scope[i] && o.kind == OpKind::Kernel;
        if (gemm && !is_row && in_scope) sharded = true;  // column-parallel: opens a region
        if (in_scope && (sharded || is_row || w.cls == KernelClass::Attention)) {
          TimeNs d = c.durations[i], nd = batch_ == n_ ? d : split_time(t, i, w, d, c.spec);
          before += d;
          after += nd;
          c.durations[i] = nd;
          split_ops.insert(i);
          ++split;
        } else if (batch_ > 1 && o.kind == OpKind::Kernel) {  // replicated, on the N times larger batch
          const TimeNs d = c.durations[i], nd = retime_by_work(t, i, w, d, c.spec, batch_, batch_, batch_);
          rep_before += d;
          rep_after += nd;
          c.durations[i] = nd;
        }
        if (!is_row) continue;
        sharded = false;
        if (k + 1 < ops.size() && row[ops[k + 1]]) continue;  // the group goes on
        // The group's output: its GEMM's, where shapes say.
        Bytes bytes = bytes_;
        for (std::size_t j = k + 1; j-- > 0 && row[ops[j]];)
          if (ctx.work[ops[j]].cls == KernelClass::Gemm && ctx.work[ops[j]].out_elems > 0) {
            bytes = static_cast<Bytes>(ctx.work[ops[j]].out_elems * dtype_bytes(ctx.work[ops[j]].dtype));
            break;
          }
        if (bytes == 0) {
          ++unknown;
          continue;
        }
        bytes *= batch_;
        const std::uint32_t dev = t.lanes[o.lane].device;
        auto [it, fresh] = comm_lane.emplace(dev, kNone);
        if (fresh)
          it->second = add_comm_lane(ed, dev, g.lanes[o.lane].process, "NCCL stream (tensor-parallel, GPU " + std::to_string(dev) + ")");
        TimeNs d = collective_time(c.spec, CollKind::AllReduce, bytes, n_).time_ns;
        NodeId ar = add_comm_node(ed, it->second,
                                  "ncclAllReduce (tensor-parallel " + std::to_string(n_) + " ranks, " + format_bytes(bytes) + ")", d);
        ed.add_edge(i, ar, EdgeType::Event, DepType::EndToStart, 0);
        if (k + 1 < ops.size()) ed.add_edge(ar, ops[k + 1], EdgeType::Event, DepType::EndToStart, 0);
        ++reduces;
        comm_ns += d;
      }
    }
    ed.commit();
    // Memory: the sharded GEMMs' weights (second operands from shapes) in the first top-level range
    // that has any (a step), of which each GPU keeps 1/N.
    const double weights = step_gemm_weights(ctx, [&](OpId o) { return split_ops.count(o) > 0; });
    c.log.push_back(text + ": " + std::to_string(split) + " kernels split " + std::to_string(n_) + " ways (" + format_duration(before) +
                    " -> " + format_duration(after) + "), " + std::to_string(reduces) + " all-reduces after the row-parallel GEMMs (" +
                    format_duration(comm_ns) + " by the collective model on " + c.spec.name + ")" +
                    (unknown ? "; " + std::to_string(unknown) + " row-parallel outputs of unknown size (no shapes: give --tp-bytes)" : ""));
    c.log.push_back(text + ": " +
                    (batch_ == 1 ? "strong scaling: the global batch is the traced one, which every GPU sees (scaling=weak makes it " +
                                       std::to_string(n_) + " times larger)"
                                 : "weak scaling: the batch is " + std::to_string(n_) +
                                       " times the traced one; split kernels keep their time, replicated ones do " + std::to_string(n_) +
                                       "x their work (" + format_duration(rep_before) + " -> " + format_duration(rep_after) +
                                       "), all-reduces " + std::to_string(n_) + "x the bytes"));
    if (weights > 0) {
      c.memory = model_state_memory(t, weights / n_);
      c.log.push_back("  memory per GPU: sharded weights " + format_bytes(static_cast<Bytes>(weights / n_)) + " of " +
                      format_bytes(static_cast<Bytes>(weights)) + " (the GEMMs' second operands in the first step, from shapes), " +
                      memory_parts_text(*c.memory) + "; replicated weights (norms, embeddings) and activations: not counted");
    }
  }

 private:
  // Row-parallel GEMMs found from the trace when no range names them (Megatron's pairs): on each
  // stream, a linear GEMM (one weight, no batch) in the replicated part opens a column-parallel
  // group of input width K (q, k, v or gate and up: the linear GEMMs of that input that follow);
  // inside, the next linear GEMM whose output width is K again, reading another width or after
  // the attention, is row-parallel and closes it (the attention output or down projection back to
  // the residual stream). Without shapes (nsys with
  // no NVTX shapes) the GEMMs alternate: a run of GEMMs with no other kernel between them opens,
  // the next GEMM after other kernels closes. Returns the rule used.
  std::string infer_row_parallel(const WhatIfContext& ctx, const std::map<LaneId, std::vector<OpId>>& streams,
                                 std::vector<bool>& row) const {
    const Trace& t = ctx.trace;
    row.assign(t.ops.size(), false);
    std::size_t by_shape = 0, by_order = 0;
    for (const auto& [lane, ops] : streams) {
      bool open = false, after_other = false, attention = false;
      double width = 0;
      auto has_shape = [&](OpId i) { return ctx.work[i].from_shapes && ctx.work[i].out_cols > 0 && ctx.work[i].rhs_elems > 0; };
      // A stream whose GEMMs have shapes pairs by shapes alone (a GEMM without them is passed over).
      const bool by_shapes =
          std::any_of(ops.begin(), ops.end(), [&](OpId i) { return ctx.work[i].cls == KernelClass::Gemm && has_shape(i); });
      for (OpId i : ops) {
        const Op& o = t.ops[i];
        const KernelWork& w = ctx.work[i];
        if (o.kind != OpKind::Kernel) continue;
        const bool shaped = has_shape(i);
        if (by_shapes && w.cls == KernelClass::Gemm && !shaped) continue;
        if (w.cls == KernelClass::Attention || (w.cls == KernelClass::Gemm && shaped && w.batch > 1)) attention = true;
        if (w.cls != KernelClass::Gemm) {
          after_other = true;
          continue;
        }
        if (shaped && w.batch > 1) continue;  // attention's batched GEMMs: inside the sharded region
        const double k_in = shaped ? w.rhs_elems / w.out_cols : 0;
        // With shapes, a GEMM back to the group's input width closes it unless it reads that same
        // width before any attention (k and v beside q, all D -> D, stay column-parallel).
        const bool closes =
            shaped ? width > 0 && std::abs(w.out_cols - width) < 0.5 && (std::abs(k_in - width) >= 0.5 || attention) : after_other;
        if (!open) {
          open = true;
          width = k_in;
          attention = false;
        } else if (closes) {
          row[i] = true;
          open = false;
          (shaped ? by_shape : by_order)++;
        }
        after_other = false;
      }
    }
    return by_shape || !by_order ? "shapes (" + std::to_string(by_shape) + " pairs: a linear GEMM's output back to its group's input width)"
                                 : "kernel order (" + std::to_string(by_order) + " pairs: no shapes in the trace)";
  }
  // The kernel's time at 1/N of its work: its measured time x model(split) / model(whole).
  TimeNs split_time(const Trace& t, OpId i, const KernelWork& w, TimeNs d, const HwSpec& spec) const {
    const double f = 1.0 / n_;
    return retime_by_work(t, i, w, d, spec, f, f, f);
  }
  std::uint32_t n_;
  std::string comm_, split_;
  Bytes bytes_;
  std::uint32_t batch_;  // the batch over the traced one: 1 (strong), N (weak)
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  CompanionArgs a = split_companions(arg);
  const std::uint32_t n = parse_count(a.main, "--tensor-parallel", 65536, "GPUs");
  std::string comm = a.find("tp-comm") ? *a.find("tp-comm") : kDefaultComm;
  std::string split = a.find("tp-split") ? *a.find("tp-split") : "";
  return std::make_unique<TensorParallel>(n, checked_selector(comm), checked_selector(split), companion_bytes(a, "tp-bytes", 0),
                                          companion_scaling(a, Scaling::Strong));
}

const char* const kCompanions[] = {
    "tp-comm=SEL: the row-parallel GEMMs, after which the output is all-reduced (default: range~row_parallel|RowParallel|row-parallel)",
    "tp-split=SEL: where the model is sharded (default: every device op; column-parallel GEMM to row-parallel GEMM)",
    "tp-bytes=BYTES: all-reduce size where the trace has no shapes (\"16 MiB\")",
    "scaling=strong|weak: strong keeps the traced batch (default), weak makes it N times larger (each GPU's work as traced)", nullptr};

}  // namespace

extern const TransformDef kTensorParallelTransform{
    "tensor-parallel",
    "N",
    TransformDef::Arg::Required,
    "Megatron tensor parallelism on N GPUs: GEMMs, attention heads and what lies between split N ways, an all-reduce after each "
    "row-parallel GEMM",
    parse,
    kCompanions};

}  // namespace bneck
