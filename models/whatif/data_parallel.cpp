// --data-parallel N [--scaling weak|strong]. Model card: data parallelism (DDP) from a trace of
//   the same program on fewer GPUs. Weak scaling by default (a fixed per-GPU batch: every rank does
//   the traced rank's work); strong keeps the global batch: every kernel but the optimizer's and
//   DDP's own (launched in `Optimizer.*` or `torch.distributed.ddp.*` ranges: their work is the
//   parameters') takes model(work/N)/model(work), and the gradients all-reduced stay. Ranks are
//   symmetric, so one rank is simulated.
// Captures: DDP's gradient buckets. Each all-reduce call the trace records (a `record_param_comms`
//   range of collective allreduce: its message size and dtype) becomes an all-reduce of N ranks on
//   a communication stream of its GPU, timed by the collective model on the case's spec (calibrated
//   NCCL paths where the spec has them). Where a 1-rank trace has no kernel for it (NCCL launches
//   none), one is synthesized: it is launched by the host call before the range (plus the launch
//   latency) and waits for the device work submitted before it (ProcessGroupNCCL makes its stream
//   wait for the current one). DDP's finalize waits for the buckets before it copies them back to
//   the gradients: the device ops of the following `torch.distributed.ddp.reducer::copy_bucket_to_grad`
//   range wait for every all-reduce called since the previous such wait. Collectives that have
//   kernels (a trace of 2+ ranks) are re-timed for N ranks as --ranks does.
//   The synthesized kernels share the GPU with compute (NCCL's SM footprint, sharing model).
// Not modelled: stragglers and skew between ranks, gradient compression, DDP's bucket rebuild on
//   the first iteration, and a trace without DDP's annotations (no all-reduce calls: nothing to
//   synthesize; the log says so).
#include <algorithm>
#include <map>

#include "models/collective.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {
namespace {

// Host time c10d's all-reduce call takes more on two ranks than on one (the NCCL launch, its events
// and stream waits): 72.7 - 52.3 us, medians over the 60 calls of the bf16 10 x Linear(6144) DDP
// traces (validate/reference/h200/parallel, both profiled alike); the fp32 DDP pair's (ddp/, 97.1
// - 43.0 us) held out.
constexpr TimeNs kCallHost = 20 * kNsPerUs;

// "record_param_comms, collective = allreduce, in_nelems = 16781312, ..., dtype = Float, ...,
// group_size = 1" (the Kineto importer's range name).
struct CommCall {
  std::size_t range;
  Bytes bytes = 0;
  std::uint32_t group = 1;
  bool fp32 = false;  // dtype Float: --grad-compress moves it in 16 bits
};

std::int64_t field_int(const std::string& n, const char* key) {
  auto p = n.find(key);
  if (p == std::string::npos) return -1;
  try {
    return std::stoll(n.substr(p + std::char_traits<char>::length(key)));
  } catch (const std::exception&) { return -1; }
}

std::string field_str(const std::string& n, const char* key) {
  auto p = n.find(key);
  if (p == std::string::npos) return "";
  p += std::char_traits<char>::length(key);
  auto e = n.find(',', p);
  return n.substr(p, e == std::string::npos ? std::string::npos : e - p);
}

double dtype_size(const std::string& d) {
  if (d == "Float" || d == "Int" || d == "float32") return 4;
  if (d == "BFloat16" || d == "Half" || d == "bfloat16" || d == "float16") return 2;
  if (d == "Double" || d == "Long") return 8;
  if (d == "Byte" || d == "Char" || d == "Bool" || d.rfind("Float8", 0) == 0) return 1;
  return 4;
}

class DataParallel : public TransformStep {
 public:
  DataParallel(std::uint32_t ranks, Bytes grad_bytes, Bytes bucket, Scaling scaling)
      : ranks_(ranks), grad_bytes_(grad_bytes), bucket_(bucket), scaling_(scaling) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    add_layout_ranks(c, ranks_);
    const Trace& t = ctx.trace;
    c.log.push_back(text + ": " + scale_batch(ctx, c));
    // Collectives with kernels: re-timed for N ranks (as --ranks).
    const std::size_t retimed = retime_collectives(t, c, ranks_).kernels;
    // All-reduce calls without kernels (a 1-rank trace) and DDP's waits, per host thread, by start.
    std::map<LaneId, std::vector<CommCall>> calls;
    std::map<std::uint32_t, std::vector<std::size_t>> waits;  // per process (any of its threads)
    for (std::size_t r = 0; r < t.ranges.size(); ++r) {
      const std::string& n = t.strings.str(t.ranges[r].name);
      if (n.rfind("record_param_comms", 0) == 0 && field_str(n, "collective = ") == "allreduce") {
        std::int64_t group = field_int(n, "group_size = "), elems = field_int(n, "in_nelems = ");
        if (group > 1 || elems <= 0) continue;  // 2+ ranks: its kernels exist (re-timed above)
        const std::string dt = field_str(n, "dtype = ");
        calls[t.ranges[r].lane].push_back(
            {r, static_cast<Bytes>(static_cast<double>(elems) * dtype_size(dt)), static_cast<std::uint32_t>(1), dt == "Float"});
      } else if (n.rfind("torch.distributed.ddp.reducer::copy_bucket_to_grad", 0) == 0) {
        waits[t.lanes[t.ranges[r].lane].process].push_back(r);
      }
    }
    if (calls.empty()) {
      if (retimed > 0) {
        c.log.push_back(text + ": " + std::to_string(retimed) + " communication kernels re-timed for " + std::to_string(ranks_) + " ranks");
        return;
      }
      from_backward(ctx, c);  // no DDP in the trace: buckets from the backward pass
      return;
    }
    RangeIndex idx(t);
    Graph& g = c.edit_graph();
    GraphEditor ed(g, text);
    // Per process (any of its threads: backward runs on autograd's), API ops by start, and the
    // device op each launched.
    std::map<std::uint32_t, std::vector<std::pair<TimeNs, OpId>>> api;
    std::vector<OpId> device_of_api(t.ops.size(), kNone);
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      if (o.kind == OpKind::Api) api[t.lanes[o.lane].process].emplace_back(o.start, i);
      if (is_device_op(o.kind) && o.link != kNone && !(o.flags & Op::kFlagNccl)) device_of_api[o.link] = i;
    }
    std::map<std::uint32_t, LaneId> comm_lane;  // per device
    std::size_t synthesized = 0, waited = 0, compressed = 0;
    Bytes total = 0;
    TimeNs comm_ns = 0, host_ns = 0;
    for (auto& [lane, cs] : calls) {
      const auto& calls_api = api[t.lanes[lane].process];  // in start order: the trace's ops are
      std::vector<NodeId> pending;                         // all-reduces not yet waited for
      const auto& ws = waits[t.lanes[lane].process];
      std::size_t wi = 0;
      auto flush_waits = [&](TimeNs until) {
        for (; wi < ws.size() && t.ranges[ws[wi]].start < until; ++wi) {
          if (pending.empty()) continue;
          std::vector<OpId> dev;
          idx.device_ops(ws[wi], dev);
          if (dev.empty()) continue;
          OpId first = *std::min_element(dev.begin(), dev.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
          for (NodeId n : pending) ed.add_edge(n, first, EdgeType::Event, DepType::EndToStart, 0);
          ++waited;
          pending.clear();
        }
      };
      OpId last_device = kNone;
      std::size_t ai = 0;
      for (const CommCall& call : cs) {
        const Range& r = t.ranges[call.range];
        flush_waits(r.start);
        // The host call before the range on its thread, and the device work its process had
        // submitted by then.
        OpId anchor = kNone;
        for (; ai < calls_api.size() && calls_api[ai].first <= r.start; ++ai)
          if (device_of_api[calls_api[ai].second] != kNone) last_device = device_of_api[calls_api[ai].second];
        for (std::size_t k = ai; k-- > 0;)
          if (t.ops[calls_api[k].second].lane == lane) {
            anchor = calls_api[k].second;
            break;
          }
        if (anchor == kNone || last_device == kNone) continue;
        std::uint32_t dev = t.lanes[t.ops[last_device].lane].device;
        auto [it, fresh] = comm_lane.emplace(dev, kNone);
        if (fresh)
          it->second = add_comm_lane(ed, dev, g.lanes[t.ops[last_device].lane].process,
                                     "NCCL stream (data-parallel, GPU " + std::to_string(dev) + ")");
        // --grad-compress before: an fp32 bucket all-reduced in 16 bits, cast down and up around it.
        const bool half = c.grad_compress && call.fp32;
        TimeNs d = collective_time(c.spec, CollKind::AllReduce, half ? call.bytes / 2 : call.bytes, ranks_).time_ns +
                   (half ? grad_compress_casts(c.spec.gpu, call.bytes) : 0);
        compressed += half;
        NodeId n = add_comm_node(ed, it->second,
                                 "ncclAllReduce (data-parallel " + std::to_string(ranks_) + " ranks, " + format_bytes(call.bytes) + ")", d);
        c.durations[anchor] += kCallHost;  // c10d's NCCL call on the thread, before the launch
        host_ns += kCallHost;
        TimeNs gap = std::max<TimeNs>(0, r.start - t.ops[anchor].end());
        ed.add_edge(anchor, n, EdgeType::Launch, DepType::EndToStart, gap + c.spec.gpu.launch_latency);
        ed.add_edge(last_device, n, EdgeType::Event, DepType::EndToStart, 0);
        pending.push_back(n);
        ++synthesized;
        total += call.bytes;
        comm_ns += d;
      }
      flush_waits(std::numeric_limits<TimeNs>::max());
    }
    ed.commit();
    c.log.push_back(text + ": " + std::to_string(synthesized) + " all-reduces of " + format_bytes(total) + " for " +
                    std::to_string(ranks_) + " ranks (" + format_duration(comm_ns) + " by the collective model on " + c.spec.name + "; " +
                    format_duration(host_ns) + " of c10d host time), waited for at " + std::to_string(waited) + " bucket copies" +
                    (retimed ? "; " + std::to_string(retimed) + " communication kernels re-timed" : std::string()) +
                    (compressed ? "; " + std::to_string(compressed) + " fp32 buckets in 16 bits (--grad-compress)" : std::string()));
    if (waited > 0) c.log.push_back(memory_line(t, total / waited, c));
  }

  // A one-GPU trace without DDP: the gradients come from the backward pass, which PyTorch launches
  // from the autograd engine's thread (any thread of the process but the one that launched its
  // first device work). Each run of backward kernels with no other thread's kernel between them is
  // one step's backward; its gradient bytes are --grad-bytes, else the weights its step's forward
  // GEMMs read (second operands, from shapes: biases and norms are left out). They are produced
  // along the backward's GEMM kernels in proportion to their time; each time a --bucket (25 MiB)
  // fills, an all-reduce of it runs on a communication stream after that kernel, the last partial
  // bucket after the backward's last kernel, and the main thread's next device op (the optimizer)
  // waits for all of them (DDP's finalize).
  void from_backward(const WhatIfContext& ctx, WhatIfCase& c) const {
    const Trace& t = ctx.trace;
    std::vector<OpId> dev;  // kernels with their launching call, by launch time
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (t.ops[i].kind == OpKind::Kernel && t.ops[i].link != kNone && !(t.ops[i].flags & Op::kFlagNccl)) dev.push_back(i);
    std::stable_sort(dev.begin(), dev.end(), [&](OpId a, OpId b) { return t.ops[t.ops[a].link].start < t.ops[t.ops[b].link].start; });
    if (dev.empty()) {
      c.log.push_back(text + ": no kernels with their launches: nothing to synthesize");
      return;
    }
    const LaneId main = t.ops[t.ops[dev[0]].link].lane;
    const std::uint32_t proc = t.lanes[main].process;
    auto thread_of = [&](OpId k) { return t.ops[t.ops[k].link].lane; };
    struct Phase {
      std::vector<OpId> bwd;
      std::vector<double> fwd_weights;  // bytes per forward GEMM weight, in forward order
      OpId next_main = kNone;           // the main thread's first kernel after it
    };
    std::vector<Phase> phases;
    std::vector<double> weights;  // forward GEMMs' weights since the last backward
    bool in_bwd = false;
    for (OpId k : dev) {
      if (t.lanes[thread_of(k)].process != proc) continue;
      if (thread_of(k) != main) {
        if (!in_bwd) {
          phases.push_back({});
          phases.back().fwd_weights = std::move(weights);
          weights.clear();
          in_bwd = true;
        }
        phases.back().bwd.push_back(k);
        continue;
      }
      if (in_bwd) phases.back().next_main = k;
      in_bwd = false;
      if (ctx.work[k].cls == KernelClass::Gemm && ctx.work[k].rhs_elems > 0)
        weights.push_back(ctx.work[k].rhs_elems * dtype_bytes(ctx.work[k].dtype));
    }
    Graph& g = c.edit_graph();
    GraphEditor ed(g, text);
    LaneId comm = kNone;
    std::size_t reduces = 0, steps = 0;
    Bytes total = 0;
    TimeNs comm_ns = 0;
    for (const Phase& ph : phases) {
      // The gradient tensors in the order backward produces them (the forward's weights reversed),
      // or --grad-bytes as one tensor per backward GEMM.
      std::vector<OpId> gemms;
      double gemm_ns = 0;
      for (OpId k : ph.bwd)
        if (ctx.work[k].cls == KernelClass::Gemm) {
          gemms.push_back(k);
          gemm_ns += static_cast<double>(c.durations[k]);
        }
      std::vector<double> tensors(ph.fwd_weights.rbegin(), ph.fwd_weights.rend());
      if (grad_bytes_)
        tensors.assign(gemms.size(), static_cast<double>(grad_bytes_) / static_cast<double>(std::max<std::size_t>(1, gemms.size())));
      double grads = 0;
      for (double x : tensors) grads += x;
      if (grads < 1 || gemms.empty()) continue;
      ++steps;
      if (comm == kNone) {
        const GraphLane& on = g.lanes[t.ops[gemms[0]].lane];
        comm = add_comm_lane(ed, on.device, on.process, "NCCL stream (data-parallel, GPU " + std::to_string(on.device) + ")");
      }
      // The backward GEMM at which a fraction of the gradients is ready (time-proportional).
      std::vector<double> cum;
      double acc = 0;
      for (OpId k : gemms) cum.push_back(acc += static_cast<double>(c.durations[k]) / std::max(1.0, gemm_ns));
      auto gemm_at = [&](double frac) {
        std::size_t i = static_cast<std::size_t>(std::lower_bound(cum.begin(), cum.end(), frac - 1e-9) - cum.begin());
        return gemms[std::min(i, gemms.size() - 1)];
      };
      std::vector<NodeId> ars;
      auto reduce_after = [&](OpId k, Bytes b) {
        TimeNs d = collective_time(c.spec, CollKind::AllReduce, b, ranks_).time_ns;
        NodeId n =
            add_comm_node(ed, comm, "ncclAllReduce (data-parallel " + std::to_string(ranks_) + " ranks, bucket of " + shown(b) + ")", d);
        ed.add_edge(k, n, EdgeType::Event, DepType::EndToStart, 0);
        ars.push_back(n);
        ++reduces;
        total += b;
        comm_ns += d;
      };
      // DDP's buckets: consecutive tensors until the bucket holds at least --bucket bytes (a larger
      // tensor is a bucket of its own); a bucket is all-reduced once its last tensor is ready.
      double done = 0, bucket = 0;
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        bucket += tensors[i];
        done += tensors[i];
        if (bucket >= static_cast<double>(bucket_) || i + 1 == tensors.size()) {
          reduce_after(i + 1 == tensors.size() ? ph.bwd.back() : gemm_at(done / grads), static_cast<Bytes>(bucket));
          bucket = 0;
        }
      }
      if (ph.next_main != kNone)
        for (NodeId n : ars) ed.add_edge(n, ph.next_main, EdgeType::Event, DepType::EndToStart, 0);
    }
    ed.commit();
    if (steps == 0) {
      // A backward whose gradients nothing sizes: their all-reduce is the layout's cost, and a
      // forecast without it would be the replicas' (throughput doubled for free). Inference (no
      // backward) has no gradients: its replicas are the forecast.
      const bool backward = std::any_of(phases.begin(), phases.end(), [](const Phase& ph) { return !ph.bwd.empty(); });
      if (backward)
        throw InputError(t.source, text +
                                       ": the trace holds backward passes but no DDP calls and no shapes to size their gradients: give "
                                       "--grad-bytes (the gradients of a step)");
      c.log.push_back(text + ": no backward pass in the trace: replicas with no gradients to all-reduce");
      return;
    }
    c.log.push_back(text + ": no DDP in the trace: " + std::to_string(reduces) + " bucket all-reduces of " + shown(total) + " over " +
                    std::to_string(steps) + " backward passes (" + (grad_bytes_ ? "--grad-bytes" : "the forward GEMMs' weights") +
                    ", buckets of " + format_bytes(bucket_) + "; " + format_duration(comm_ns) + " by the collective model on " +
                    c.spec.name + ")");
    if (steps > 0) c.log.push_back(memory_line(t, total / steps, c));
  }

  // Strong scaling: the batch's kernels on 1/N of it (see the model card). Returns the log line.
  std::string scale_batch(const WhatIfContext& ctx, WhatIfCase& c) const {
    TimeNs before = 0, after = 0;
    if (scaling_ == Scaling::Weak) return replica_scaling_line(scaling_, ranks_, before, after);
    const Trace& t = ctx.trace;
    std::vector<bool> kept(t.ops.size(), false);
    RangeIndex idx(t);
    std::vector<OpId> dev, split;
    for (std::size_t r = 0; r < t.ranges.size(); ++r) {
      const std::string& n = t.strings.str(t.ranges[r].name);
      if (n.rfind("Optimizer.", 0) == 0 || n.rfind("torch.distributed.ddp.", 0) == 0) idx.device_ops(r, dev);
    }
    for (OpId o : dev) kept[o] = true;
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (!kept[i]) split.push_back(i);
    const std::size_t n = rescale_kernels(ctx, c, split, 1.0 / ranks_, before, after);
    return replica_scaling_line(scaling_, ranks_, before, after) + " in " + std::to_string(n) + " kernels; " +
           (dev.empty() ? "no Optimizer.* range: the optimizer's kernels are split too" : "the optimizer's and DDP's kernels as traced");
  }

  // Bytes for a log line (to the KiB: the figures are estimates).
  static std::string shown(Bytes b) { return format_bytes(b >= 1024 ? b / 1024 * 1024 : b); }

  // Memory per GPU, the same on every rank (DDP replicates the model): the gradients one step
  // all-reduces are the parameters (same dtype), DDP's buckets hold a copy of them, and the
  // optimizer's state per parameter follows its name (PyTorch's `Optimizer.step#Adam.step` range:
  // Adam/AdamW keep two moments of the parameter's dtype, SGD none unless momentum, which the trace
  // does not say). Activations: not in the trace.
  static std::string memory_line(const Trace& t, Bytes grads, WhatIfCase& c) {
    const OptimizerState opt = optimizer_state(t);
    const Bytes state = opt.per_param > 0 ? static_cast<Bytes>(opt.per_param) * grads : 0;
    const double g = static_cast<double>(grads);
    c.memory = MemoryPerGpu{g, g, opt.name.empty() ? -1.0 : static_cast<double>(state), -1, g};
    std::string what = opt.name.empty() ? "optimizer state: unknown (no Optimizer.step range)"
                                        : "optimizer state (" + opt.name + ") " + shown(state) +
                                              (opt.per_param > 0 ? " (two moments)" : " (no momentum assumed)");
    return "  memory per GPU (replicated on every rank): parameters " + shown(grads) + ", gradients " + shown(grads) + ", DDP buckets " +
           shown(grads) + ", " + what + "; total " + shown(3 * grads + state) + " (activations: not in the trace)";
  }

 private:
  std::uint32_t ranks_;
  Bytes grad_bytes_, bucket_;
  Scaling scaling_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  CompanionArgs a = split_companions(arg);
  const std::uint32_t n = parse_count(a.main, "--data-parallel", 1'000'000, "GPUs");
  return std::make_unique<DataParallel>(n, companion_bytes(a, "grad-bytes", 0), companion_bytes(a, "bucket", Bytes{25} << 20),
                                        companion_scaling(a, Scaling::Weak));
}

const char* const kCompanions[] = {
    "grad-bytes=BYTES: gradient bytes per step where the trace has no DDP calls (default: the forward GEMMs' weights, from shapes)",
    "bucket=BYTES: DDP's bucket size where the trace has no DDP calls (default 25 MiB)",
    "scaling=weak|strong: weak keeps the per-GPU batch (default), strong the global batch (each GPU computes 1/N of it)", nullptr};

}  // namespace

extern const TransformDef kDataParallelTransform{
    "data-parallel",
    "N",
    TransformDef::Arg::Required,
    "DDP on N GPUs: the trace's gradient all-reduces (synthesized where a 1-rank trace has none) timed for N ranks",
    parse,
    kCompanions};

}  // namespace bneck
