// --fuse SEL. Model card: fusion. Each maximal run of consecutive selected kernels on one stream
//   becomes one kernel: intermediates stay on chip, so bytes = the first kernel's inputs + the last
//   kernel's outputs (each kernel's bytes taken as half read, half written), FLOPs add up, one
//   launch and one tail. Time = the models' time for the fused work on the launch of the run's
//   largest kernel x (the run's measured time / the models' time for its kernels): the run's own
//   calibration carries over; never more than the run's measured time. The fused-away
//   kernels take no time and no stream gap. The host dispatches and launches the fused kernel
//   once: the launch calls of the run's other kernels take no time, and so does the host time
//   after each launch of the run but the last (the next fused op's dispatch: Python, the
//   dispatcher, argument checks); the first op's dispatch and launch stay (the compiled code's
//   call of the fused kernel), as does the host time after the last launch (the next op's).
//   --fuse auto selects what a compiler's fusion (torch.compile / Inductor) fuses: the pointwise,
//   copy, normalization, softmax and reduction kernels between the GEMMs, attention and
//   convolutions (which stay library calls; so do the kernels a convolution's call launches, cuDNN's
//   own transposes), and the device-to-device copies among them (a clone's or a pad's
//   cudaMemcpyAsync: a copy kernel's work, its call a launch), not the optimizer's multi-tensor
//   kernels; a run ends
//   where the host synchronized between two launches (a graph break: .item(), a blocking copy).
//   The GPU idling between two kernels does not end a run: on a host-bound program it idles
//   between every two, waiting for the dispatches the fusion removes. A graph with convolutions
//   turns channels-last under Inductor (its layout optimization): every convolution traced on
//   cuDNN's NCHW fp32 kernels then runs behind transposes of its input and output (and of its
//   filter where wider than 1x1), each tensor read and written once at the streaming rate. Measured
//   (validate/reference/h100/compile_conv: ResNet-50 64x224 fp32 compiled, its trace): 120 such
//   transposes a step, 3.78 ms of its 22 ms; before this rule --fuse auto forecast -22 % there.
//   After autocast, the casts of an activation (folded into the op they feed) go where a compiled
//   kernel makes them: a norm's or softmax's input cast up (it reads the low precision itself) and a
//   GEMM's input cast down after a fused kernel (which writes the low precision); a weight's and a
//   bias's casts stay (Inductor casts the parameters every call).
#include <algorithm>
#include <cmath>
#include <optional>

#include "models/whatif/fp8.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"

namespace bneck {
namespace {

// Host time per launch of torch.compile's code (Inductor's wrapper and Triton's launcher, the launch
// call included), unprofiled on the H200 host: the median of the 48-layer loop's and BERT-base
// 1x128's compiled steps over their launches in three processes each (12.3-22.0 us;
// validate/reference/h200/fusion_host; GPT-2 medium 1x64 held out).
constexpr TimeNs kCompiledLaunchHost = 13'650;
// Inductor's layout optimization (torch/_inductor/graph.py, decide_layout_opt) is off for a graph
// of 300 nodes a convolution or more ("only a few conv": a ViT's patch embedding); its rules on
// grouped convolutions and channel counts: layout_optimized below.
constexpr std::size_t kLayoutOptKernelsPerConv = 300;

// A kernel the convolution library launches as a step of its own call (cuDNN's layout transposes
// around an implicit-GEMM or grouped convolution): the compiled graph calls the same convolution and
// the kernel runs there too. Known by its framework op where the trace recorded shapes, else by the
// names of cuDNN's transposes. (RegNetY 16x224 fp32, validate/reference/h100/compile_conv/heldout:
// 180 genericTranspose kernels inside aten::cudnn_convolution in three eager steps and 180 in the
// compiled ones, 24.6 ms both.)
bool inside_convolution(std::string_view op, std::string_view name) {
  if (!op.empty()) return op.find("convolution") != std::string_view::npos;
  return name.find("cudnn::engines_precompiled::genericTranspose") != std::string_view::npos ||
         name.find("nchwToNhwcKernel") != std::string_view::npos || name.find("nhwcToNchwKernel") != std::string_view::npos;
}
// A device-to-device copy on a GPU's stream (cudaMemcpyAsync of a clone, a pad's copy, a
// .contiguous()): the compiled graph does it in a fused kernel or not at all, as a copy kernel.
bool device_copy(const Trace& t, OpId o) {
  if (t.ops[o].kind != OpKind::Memcpy) return false;
  const CopyInfo* ci = t.copy(t.ops[o]);
  return ci && ci->copy_kind == MemcpyKind::DtoD;
}
// What a fusion member does: a kernel's work, a device copy's as a copy kernel's (its bytes read
// and written).
KernelWork member_work(const WhatIfContext& ctx, OpId o) {
  if (ctx.trace.ops[o].kind == OpKind::Kernel) return ctx.work[o];
  KernelWork w;
  w.cls = KernelClass::Copy;
  if (const CopyInfo* ci = ctx.trace.copy(ctx.trace.ops[o])) w.bytes = 2.0 * static_cast<double>(ci->bytes);
  return w;
}
// Op `o` of the trace is a kernel launch call (false for synthetic nodes past the trace's ops).
bool launch_call(const Trace& t, OpId o) {
  return o < t.ops.size() && t.ops[o].kind == OpKind::Api && t.ops[o].api_class() == ApiClass::Launch;
}
// ... or the asynchronous copy call of a device copy (a fusion member's submission).
bool submit_call(const Trace& t, OpId o) {
  return launch_call(t, o) || (o < t.ops.size() && t.ops[o].kind == OpKind::Api && t.ops[o].api_class() == ApiClass::MemcpyAsync);
}
// A host synchronization (its start in the sorted `syncs`) began after `a` and before `b`.
bool sync_between(const std::vector<TimeNs>& syncs, TimeNs a, TimeNs b) {
  auto it = std::upper_bound(syncs.begin(), syncs.end(), a);
  return it != syncs.end() && *it < b;
}

class Fuse : public TransformStep {
 public:
  explicit Fuse(std::string sel) : sel_(std::move(sel)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    std::vector<bool> hit;
    if (sel_ == "auto") {
      // The convolutions' share of the kernels' time: a convolutional network's compiled graph
      // (its layout, its library calls) has errors of its own (error_bar.cpp, "fuse-conv").
      double conv = 0, all = 0;
      for (OpId i = 0; i < ctx.trace.ops.size(); ++i)
        if (ctx.trace.ops[i].kind == OpKind::Kernel) {
          all += static_cast<double>(c.durations[i]);
          if (ctx.work[i].cls == KernelClass::Conv) conv += static_cast<double>(c.durations[i]);
        }
      c.fused_conv_share = all > 0 ? conv / all : 0;
      hit.assign(ctx.trace.ops.size(), false);
      for (OpId i = 0; i < ctx.trace.ops.size(); ++i) {
        const Op& o = ctx.trace.ops[i];
        if (device_copy(ctx.trace, i)) {
          hit[i] = true;
          continue;
        }
        if (o.kind != OpKind::Kernel || (o.flags & Op::kFlagNccl)) continue;
        const KernelClass k = ctx.work[i].cls;
        hit[i] = (k == KernelClass::Elementwise || k == KernelClass::Copy || k == KernelClass::Norm || k == KernelClass::Softmax ||
                  k == KernelClass::Reduction) &&
                 ctx.trace.name(o).find("multi_tensor_apply") == std::string::npos && !gemm_helper_kernel(ctx.trace.name(o)) &&
                 !inside_convolution(ctx.work[i].op, ctx.trace.name(o));
      }
    } else {
      hit = ctx.select(sel_, true);
    }
    // Device ops per stream in FIFO order.
    std::vector<std::vector<OpId>> lanes(ctx.trace.lanes.size());
    for (OpId i = 0; i < ctx.trace.ops.size(); ++i)
      if (is_device_op(ctx.trace.ops[i].kind)) lanes[ctx.trace.ops[i].lane].push_back(i);
    // auto, after autocast: a compiled kernel reads its low-precision input and computes in fp32
    // in registers (a norm's or softmax's input cast up is part of it), and writes the dtype the
    // GEMM after it reads (that GEMM's activation cast down is part of its producer): the casts
    // folded into those ops go (a weight's and a bias's stay: parameters are cast every call).
    TimeNs casts_ns = 0;
    std::size_t casts_n = 0;
    if (sel_ == "auto" && !c.input_casts.empty()) {
      std::vector<OpId> before(ctx.trace.ops.size(), kNone);  // the device op before each on its stream
      for (const auto& lane : lanes)
        for (std::size_t m = 1; m < lane.size(); ++m) before[lane[m]] = lane[m - 1];
      for (const auto& [op, ns] : c.input_casts) {
        const bool fused = hit[op] || (before[op] != kNone && hit[before[op]]);
        if (!fused) continue;
        const TimeNs take = std::min(ns, c.durations[op]);
        c.durations[op] -= take;
        casts_ns += take;
        ++casts_n;
      }
    }
    // auto: a compiled graph is one step's work: a run ends where the host synchronized between
    // two launches.
    std::vector<TimeNs> syncs;
    for (const Op& o : ctx.trace.ops)
      if (o.kind == OpKind::Api && ctx.trace.name(o).find("ynchronize") != std::string::npos) syncs.push_back(o.start);
    std::sort(syncs.begin(), syncs.end());
    std::size_t runs = 0, kernels = 0, calls = 0;
    TimeNs before = 0, after = 0;
    std::vector<OpId> drop, drop_with_gap, no_gap;  // launch calls: removed; removed with the host time after; that time zeroed
    std::vector<bool> handled(ctx.trace.ops.size(), false);
    // What a run may hold: kernels, and under auto the device copies among them.
    auto member = [&](OpId o) { return ctx.trace.ops[o].kind == OpKind::Kernel || (sel_ == "auto" && device_copy(ctx.trace, o)); };
    for (const auto& lane : lanes) {
      std::size_t k = 0;
      while (k < lane.size()) {
        if (!hit[lane[k]] || !member(lane[k])) {
          ++k;
          continue;
        }
        std::size_t e = k;
        while (e + 1 < lane.size() && hit[lane[e + 1]] && member(lane[e + 1]) &&
               !(sel_ == "auto" && separated(ctx.trace, lane[e], lane[e + 1], syncs)))
          ++e;
        if (e > k) {
          // The run lane[k..e] becomes one kernel.
          KernelWork fused = member_work(ctx, lane[k]);
          double measured = 0, modelled = 0, largest = -1, last_bytes = 0;
          std::size_t shape = k;  // the member whose launch the fused kernel takes: the one of most work
          for (std::size_t m = k; m <= e; ++m) {
            const KernelWork w = m == k ? fused : member_work(ctx, lane[m]);
            measured += static_cast<double>(c.durations[lane[m]]);
            const auto own = static_cast<double>(model_kernel(ctx.trace, lane[m], w, c.spec).time_ns);
            modelled += own;
            if (own > largest && ctx.trace.ops[lane[m]].kind == OpKind::Kernel) largest = own, shape = m;
            if (m > k) fused.flops += w.flops;
            last_bytes = w.bytes;
          }
          fused.bytes = 0.5 * fused.bytes + 0.5 * last_bytes;
          double calib = modelled > 0 ? measured / modelled : 1;
          // A fused kernel moves fewer bytes than its members did and does their math: never more
          // time than they took (a run led by a small fill would otherwise be timed on its launch of
          // a few threads).
          auto t_fused = static_cast<TimeNs>(
              std::llround(std::min(measured, static_cast<double>(model_kernel(ctx.trace, lane[shape], fused, c.spec).time_ns) * calib)));
          before += static_cast<TimeNs>(measured);
          after += t_fused;
          c.durations[lane[k]] = t_fused;
          Graph& g = c.edit_graph();
          for (std::size_t m = k + 1; m <= e; ++m) {
            c.durations[lane[m]] = 0;
            // No stream gap inside a fused kernel.
            for (auto ed : boost::make_iterator_range(boost::out_edges(lane[m - 1], g.csr)))
              if (boost::target(ed, g.csr) == lane[m] && g.csr[ed].type() == EdgeType::StreamOrder) g.csr[ed].set_delay(0);
          }
          // The host: one dispatch and launch for the run (card above).
          auto launch = [&](std::size_t m) {
            const OpId l = ctx.trace.ops[lane[m]].link;
            return l != kNone && submit_call(ctx.trace, l) && !g.removed(l) ? l : kNone;
          };
          for (std::size_t m = k; m <= e; ++m) {
            const OpId l = launch(m);
            if (l == kNone || handled[l]) continue;  // a call that launched several kernels: once
            handled[l] = true;
            if (m == k)
              no_gap.push_back(l);
            else if (m < e)
              drop_with_gap.push_back(l);
            else
              drop.push_back(l);
            calls += m > k;
          }
          ++runs;
          kernels += e - k + 1;
        }
        k = e + 1;
      }
    }
    TimeNs host = 0;
    if (!drop.empty() || !drop_with_gap.empty() || !no_gap.empty()) {
      Graph& g = c.edit_graph();
      auto gaps_after = [&](OpId l) {
        TimeNs sum = 0;
        for (auto ed : boost::make_iterator_range(boost::out_edges(l, g.csr)))
          if (g.csr[ed].type() == EdgeType::HostOrder) sum += g.csr[ed].delay();
        return sum;
      };
      for (OpId l : no_gap) host += gaps_after(l);
      for (OpId l : drop_with_gap) host += gaps_after(l) + c.durations[l];
      for (OpId l : drop) host += c.durations[l];
      {
        GraphEditor ed(g, text);
        for (OpId l : drop_with_gap) ed.remove_with_gaps(l);
        for (OpId l : drop) ed.remove(l);
        ed.commit();
      }
      for (OpId l : drop_with_gap) c.durations[l] = 0;
      for (OpId l : drop) c.durations[l] = 0;
      for (OpId l : no_gap)
        for (auto ed : boost::make_iterator_range(boost::out_edges(l, g.csr)))
          if (g.csr[ed].type() == EdgeType::HostOrder) g.csr[ed].set_delay(0);
    }
    // auto: torch.compile's code calls the next kernel where the modules' Python ran: between two
    // launch calls with no host synchronization between them (and no call between them but the
    // runtime's own, such as cudaPeekAtLastError after a library's launch) the host takes at most
    // the compiled wrapper's time per launch, less the launch call's own and those calls'.
    TimeNs wrapper = 0;
    if (sel_ == "auto" && runs > 0) {
      Graph& g = c.edit_graph();
      const Trace& t = ctx.trace;
      constexpr std::size_t kChain = 8;  // runtime calls followed between two launches at most
      using Edge = boost::graph_traits<CsrGraph>::edge_descriptor;
      std::vector<Edge> chain, starts;
      // Appends node n's host-order out-edges to `out`; returns its new size.
      auto host_edges = [&](OpId n, std::vector<Edge>& out) {
        for (auto ed : boost::make_iterator_range(boost::out_edges(n, g.csr)))
          if (g.csr[ed].type() == EdgeType::HostOrder) out.push_back(ed);
        return out.size();
      };
      for (OpId l = 0; l < t.ops.size(); ++l) {
        if (!launch_call(t, l)) continue;
        starts.clear();
        host_edges(l, starts);
        for (const auto& first : starts) {
          // From this edge through the runtime's own calls (each with one host successor) to a launch.
          chain.assign(1, first);
          TimeNs between = 0;  // the calls' own time between the two launches
          OpId m = kNone, cur = static_cast<OpId>(boost::target(first, g.csr));
          while (cur < t.ops.size() && chain.size() <= kChain) {
            if (launch_call(t, cur)) {
              m = cur;
              break;
            }
            if (t.ops[cur].kind != OpKind::Api || t.ops[cur].api_class() != ApiClass::Other) break;
            between += c.durations[cur];
            const std::size_t before_call = chain.size();
            if (host_edges(cur, chain) != before_call + 1) break;
            cur = static_cast<OpId>(boost::target(chain.back(), g.csr));
          }
          if (m == kNone || sync_between(syncs, t.ops[l].start, t.ops[m].start)) continue;
          const TimeNs cap = std::max<TimeNs>(0, kCompiledLaunchHost - c.durations[m] - between);
          TimeNs sum = 0;
          for (const auto& ed : chain) sum += g.csr[ed].delay();
          if (sum <= cap) continue;
          TimeNs kept = 0;
          for (std::size_t i = 0; i < chain.size(); ++i) {
            const TimeNs d = g.csr[chain[i]].delay();
            const TimeNs nd = i + 1 < chain.size()
                                  ? static_cast<TimeNs>(static_cast<double>(d) * static_cast<double>(cap) / static_cast<double>(sum))
                                  : cap - kept;  // the last takes the rounding
            kept += nd;
            g.csr[chain[i]].set_delay(nd);
          }
          wrapper += sum - cap;
        }
      }
    }
    // auto: Inductor's layout optimization makes a graph with convolutions channels-last
    // (layout_optimized); cuDNN's fp32 convolutions (NCHW kernels) then run behind layout
    // transposes of their input and output (add_conv_layout_transposes).
    std::size_t transposes = 0;
    if (sel_ == "auto") {
      const ConvOps convs = conv_ops(ctx.trace, ctx.work, c.durations);
      if (layout_optimized(ctx, convs))
        transposes = add_conv_layout_transposes(ctx.trace, convs, ctx.work, std::vector<bool>(ctx.trace.ops.size(), true), 4, c, true);
    }
    c.fused_host_removed_ns += host + wrapper;
    c.log.push_back(text + ": " + std::to_string(kernels) + " kernels in " + std::to_string(runs) + " fused runs, " +
                    format_duration(before) + " -> " + format_duration(after) + "; host: " + std::to_string(calls) +
                    " launch calls and their ops' dispatch gone, " + format_duration(host) +
                    (wrapper > 0 ? "; the compiled code's calls between launches at most " + format_duration(kCompiledLaunchHost) +
                                       " a launch: " + format_duration(wrapper) + " less"
                                 : std::string()) +
                    (transposes ? "; the compiled graph channels-last: " + std::to_string(transposes) +
                                      " NCHW/NHWC layout transposes around cuDNN's fp32 convolutions"
                                : std::string()) +
                    (casts_n ? "; autocast's casts of " + std::to_string(casts_n) +
                                   " ops' inputs made inside the compiled kernels around them: " + format_duration(casts_ns) + " less"
                             : std::string()));
  }

 private:
  // Inductor's choice (torch/_inductor/graph.py, decide_layout_opt): not where the graph holds 300
  // nodes a convolution or more (here 300 kernels a convolution op); for inference, channels-last
  // where the convolutions' FLOPs weighted by its benchmarked slowdowns (grouped 1.358, small 0.783,
  // in-out 0.725, others 0.823) do not exceed their sum; for training, not where any convolution is
  // grouped or in-out, or all are small. Convolutions without shapes count as others.
  static bool layout_optimized(const WhatIfContext& ctx, const ConvOps& convs) {
    if (convs.kernels.empty()) return false;
    std::size_t device_kernels = 0;
    for (const Op& o : ctx.trace.ops) device_kernels += o.kind == OpKind::Kernel;
    if (device_kernels >= kLayoutOptKernelsPerConv * convs.kernels.size()) return false;
    double flops[5] = {}, total = 0;  // by kind (conv_kind, 0 counted as 1: no shapes)
    std::size_t count[5] = {}, n = 0;
    for (const std::vector<OpId>& group : convs.kernels)
      for (OpId k : group)
        if (is_compute_class(ctx.work[k].cls)) {
          const std::uint8_t kind = std::max<std::uint8_t>(1, std::min<std::uint8_t>(4, ctx.work[k].conv_kind));
          flops[kind] += ctx.work[k].flops;
          total += ctx.work[k].flops;
          ++count[kind];
          ++n;
        }
    if (has_backward(ctx.trace)) return count[2] == 0 && count[4] == 0 && count[3] < n;
    return flops[2] * 1.358 + flops[3] * 0.783 + flops[4] * 0.725 + flops[1] * 0.823 <= total;
  }
  static bool separated(const Trace& t, OpId a, OpId b, const std::vector<TimeNs>& syncs) {
    const OpId la = t.ops[a].link, lb = t.ops[b].link;
    return la != kNone && lb != kNone && sync_between(syncs, t.ops[la].start, t.ops[lb].start);
  }
  std::string sel_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  if (arg == "auto") return std::make_unique<Fuse>(arg);
  std::string sel = checked_selector(arg);
  if (sel.empty()) throw InputError("--fuse needs a selector (or auto)");
  return std::make_unique<Fuse>(sel);
}

}  // namespace

extern const TransformDef kFuseTransform{"fuse", "SEL|auto", TransformDef::Arg::Required,
                                         "each run of consecutive selected kernels on a stream becomes one kernel (auto: the pointwise, "
                                         "norm and reduction chains between GEMMs that torch.compile fuses)",
                                         parse};

}  // namespace bneck
