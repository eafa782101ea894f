#include "models/advise.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <thread>
#include <unistd.h>

#include "models/kernel_work.hpp"
#include "models/retarget.hpp"
#include "models/occupancy.hpp"
#include "models/whatif/host_path.hpp"
#include "models/whatif/run.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "sim/base/stats.hpp"

namespace bneck {
namespace {

constexpr const char* kHost = "host calls";
constexpr const char* kSync = "synchronization";
constexpr const char* kGaps = "gaps between ops";
constexpr const char* kWait = "unresolved waits";  // Graph::unknown_wait: held by an unseen event
constexpr const char* kComm = "communication";
constexpr const char* kCopies = "copies";
constexpr const char* kCompute = "compute-bound kernels";
constexpr const char* kMemory = "memory-bound kernels";
constexpr const char* kLatency = "latency-bound kernels";

// The class an op's time on the critical path counts under.
const char* path_class(const Trace& t, OpId o, const KernelWork& w, const HwSpec& hw, TimeNs d) {
  const Op& op = t.ops[o];
  if (op.kind == OpKind::Api && op.api_class() == ApiClass::MemcpySync) return kCopies;  // the host waits for its copy
  if (op.kind == OpKind::Api) return t.name(op).find("ynchronize") != std::string::npos ? kSync : kHost;
  if (op.flags & Op::kFlagNccl) return kComm;
  if (op.kind != OpKind::Kernel) return is_device_op(op.kind) ? kCopies : kHost;
  const Bound b = model_kernel(t, o, w, hw).bound;
  if (b == Bound::Latency || d < 5 * kNsPerUs) return kLatency;
  return is_compute_class(w.cls) && b == Bound::Compute ? kCompute : kMemory;
}

// The run's bottleneck from its critical path by class.
void classify_run(Advice& a) {
  auto share = [&](const char* c) {
    auto it = a.path_by_class.find(c);
    return a.path_ns > 0 && it != a.path_by_class.end() ? static_cast<double>(it->second) / static_cast<double>(a.path_ns) : 0.0;
  };
  const double host = share(kHost) + share(kSync) + share(kGaps);
  const double idle = a.overlap.window_ns > 0 ? static_cast<double>(a.overlap.gpu_idle_ns) / static_cast<double>(a.overlap.window_ns) : 0;
  if (share(kWait) >= 0.5) {
    a.bottleneck = "waiting on what the trace does not show";
    a.evidence = "device ops held by stream waits the trace does not resolve are " + format_share(share(kWait)) +
                 " of the critical path (their events' sources are not in it: another process, an untraced thread, or work before "
                 "the profiler's window); the GPU is idle " +
                 format_share(idle) + " of the run";
    return;
  }
  if (host >= 0.5) {
    a.bottleneck = share(kSync) >= 0.25 ? "synchronization-bound" : "launch/host-bound";
    a.evidence = "host calls, synchronization and the gaps between ops are " + format_share(host) +
                 " of the critical path; the GPU is idle " + format_share(idle) + " of the run";
    return;
  }
  if (share(kComm) >= 0.25) {
    a.bottleneck = "exposed communication";
    a.evidence = "communication is " + format_share(share(kComm)) + " of the critical path, " +
                 format_duration(a.overlap.exposed_communication_ns) + " with no compute beside it";
    return;
  }
  const char* best = kCompute;
  for (const char* c : {kMemory, kLatency, kCopies})
    if (share(c) > share(best)) best = c;
  a.bottleneck = best == kCompute ? "compute-bound" : best == kMemory ? "memory-bound" : best == kLatency ? "latency-bound" : "copy-bound";
  a.evidence = std::string(best) + " are " + format_share(share(best)) + " of the critical path (host " + format_share(host) +
               ", GPU idle " + format_share(idle) + ")";
  for (const ClassRow& r : a.classes)
    if (r.bound == (best == kCompute ? "compute" : "memory") && r.measured_ns > 0 && r.achieved_fraction > 0) {
      a.evidence += "; " + r.cls + " kernels reach " + format_share(r.achieved_fraction) + " of the " +
                    (best == kCompute ? "math" : "memory") + " peak";
      break;
    }
}

// Phases the structure finds: their span, GPU busy time and what dominates their kernels.
void classify_phases(const Trace& t, const WorkTable& work, const HwSpec& hw, const SimResult& sim, const Structure* found, Advice& a) {
  std::optional<Structure> own;
  if (!found) found = &own.emplace(find_structure(t));
  for (const char* level : {"iteration", "forward", "backward"}) {
    const StructureLevel* l = found->level(level);
    if (!l || l->instances.empty()) continue;
    AdvicePhase p;
    p.name = std::string("@") + level;
    p.instances = l->instances.size();
    std::vector<TimeNs> spans, busy;
    std::map<std::string, TimeNs> by;
    for (const StructureInstance& in : l->instances) {
      if (in.ops.empty()) continue;
      TimeNs b = 0, lo = sim.start[in.ops.front()], hi = sim.end[in.ops.front()];
      for (OpId o : in.ops) {
        const TimeNs d = sim.end[o] - sim.start[o];
        b += d;
        lo = std::min(lo, sim.start[o]);
        hi = std::max(hi, sim.end[o]);
        by[path_class(t, o, work[o], hw, d)] += d;
      }
      spans.push_back(hi - lo);
      busy.push_back(std::min(b, hi - lo));
    }
    if (spans.empty()) continue;
    p.span_ns = quantile(spans, 0.5);
    p.busy_ns = quantile(busy, 0.5);
    const double frac = p.span_ns > 0 ? static_cast<double>(p.busy_ns) / static_cast<double>(p.span_ns) : 1;
    if (frac < 0.6) {
      p.bottleneck = "launch/host-bound";
      p.evidence = "the GPU is busy " + format_share(frac) + " of its span";
    } else {
      auto top = std::max_element(by.begin(), by.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
      TimeNs all = 0;
      for (const auto& [k, v] : by) all += v;
      const std::string c = top->first;
      p.bottleneck = c == kCompute   ? "compute-bound"
                     : c == kMemory  ? "memory-bound"
                     : c == kLatency ? "latency-bound"
                     : c == kComm    ? "communication"
                                     : c;
      p.evidence = c + " " + format_share(all ? static_cast<double>(top->second) / static_cast<double>(all) : 0) +
                   " of its device time, GPU busy " + format_share(frac);
    }
    a.phases.push_back(std::move(p));
  }
}

}  // namespace

namespace {

// A profile of CUDA graphs being built: launch calls made inside a stream capture (from
// cudaStreamBeginCapture to EndCapture on their thread; HIP's alike) run nothing, their kernels are
// recorded into the graph. Where they are half of the trace's launch calls or more (20 or more),
// the profile is of the capture, not of the graphs' replays, and the advice says so.
std::string capture_note(const Trace& t) {
  const std::vector<bool> in = stream_capture_calls(t);
  std::size_t captured = 0, launches = 0;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].kind == OpKind::Api && t.ops[i].api_class() == ApiClass::Launch) ++launches, captured += in[i];
  if (captured < 20 || 2 * captured < launches) return "";
  return std::to_string(captured) + " of its " + std::to_string(launches) +
         " launch calls were made inside stream captures (the program building CUDA graphs) and ran nothing here: this "
         "profiles the capture, not the graphs' replays; a profile of the steps that replay them is what to advise on";
}

// What dominates the host's part of the path, and how far the host's pace moves between processes
// (HostSpread: the 10th to 90th percentile of one process's pace over the median).
void host_summary(Advice& a) {
  const HostOnPath h{a.path_ns, a.host_terms};
  a.host_note = h.note();
  if (a.host_note.empty()) return;
  const auto [lo, hi] = HostSpread::slowest_spread(1);
  const double med = HostSpread::expected_max(1);
  a.host_pace = "a process's host pace varies " + fmt_num("%.2f", lo * med) + " .. " + fmt_num("%.2f", hi * med) +
                "x the median from one process to the next on one machine (measured): host-bound forecasts vary with it";
}

// The critical path by class: in end order, each op counts the time it adds after the one before
// (a blocking call that waited for kernels counts only its own tail); the time between counts as gaps.
// Adds to what `a` holds (a range's instances: one path each).
void path_by_class(const Trace& t, const WorkTable& work, const HwSpec& hw, const WhatIfReport& base, const std::vector<OpId>& path,
                   Advice& a) {
  std::vector<OpId> ops;
  for (OpId o : path)
    if (o < t.ops.size()) ops.push_back(o);
  const SimResult& sim = *base.base_sim;
  const Graph& g = *base.base_graph;
  const HostTermOf term(t);
  a.path_ns += walk_path(sim, std::move(ops), [&](OpId o, TimeNs gap, TimeNs own) {
    const Op& op = t.ops[o];
    if (gap > 0 && g.waited_unknown(o)) {
      a.path_by_class[kWait] += gap;  // held by an event the trace does not show, not the host
    } else if (gap > 0) {
      a.path_by_class[kGaps] += gap;
      if (op.kind == OpKind::Api) term.add_gap(a.host_terms, op, gap);  // host work before a call
    }
    a.path_by_class[path_class(t, o, work[o], hw, sim.end[o] - sim.start[o])] += own;
    if (op.kind == OpKind::Api) a.host_terms[term(op)] += own;
  });
}

// Candidates generated from the profile.
// With `any`, every change that has something to act on (its share above zero), whatever its
// share: following the bottleneck tries them after a first change moved it.
std::vector<AdviceSuggestion> candidates(const Trace& t, const WorkTable& work, const HwSpec& hw, const Advice& a,
                                         const std::vector<char>& in_scope, bool any = false) {
  TimeNs kernels = 0, fp32_math = 0, half_gemm = 0, unaligned_gemm = 0, pointwise = 0, fp32_pointwise = 0, pageable = 0, pinned_h2d = 0;
  TimeNs unfilled = 0;  // what kernels' partly loaded SMs cost (--fill-waves' gain)
  std::size_t small_count = 0;
  for (OpId o = 0; o < t.ops.size(); ++o) {
    const Op& op = t.ops[o];
    if (!in_scope.empty() && !in_scope[o]) continue;
    if (op.kind == OpKind::Memcpy) {
      const CopyInfo* ci = t.copy(op);
      const bool hd = ci && ci->host_device();
      if (hd && ci->bytes <= (Bytes{1} << 20)) ++small_count;  // small transfers: their calls, latency and syncs cost most
      if (hd && ci->pageable())
        pageable += op.duration();
      else if (hd && ci->to_device())
        pinned_h2d += op.duration();
    }
    if (op.kind != OpKind::Kernel || (op.flags & Op::kFlagNccl)) continue;
    kernels += op.duration();
    if (const double fill = wave_fill(t, o, work[o], hw); fill < 1)
      unfilled += static_cast<TimeNs>(static_cast<double>(op.duration()) * (1 - fill));
    if (is_compute_class(work[o].cls) && work[o].dtype == Dtype::FP32) fp32_math += op.duration();
    if (work[o].cls == KernelClass::Gemm && work[o].batch <= 1 && (work[o].dtype == Dtype::BF16 || work[o].dtype == Dtype::FP16))
      half_gemm += op.duration();
    if (gemm_unaligned(work[o]) && hw.gpu.gemm_samples_unaligned.count(work[o].dtype)) unaligned_gemm += op.duration();
    const KernelClass k = work[o].cls;
    if (k == KernelClass::Elementwise || k == KernelClass::Norm || k == KernelClass::Softmax || k == KernelClass::Reduction ||
        k == KernelClass::Copy) {
      pointwise += op.duration();
      if (work[o].dtype == Dtype::FP32) fp32_pointwise += op.duration();
    }
  }
  auto share = [&](const char* c) {
    auto it = a.path_by_class.find(c);
    return a.path_ns > 0 && it != a.path_by_class.end() ? static_cast<double>(it->second) / static_cast<double>(a.path_ns) : 0.0;
  };
  const double host = share(kHost) + share(kSync) + share(kGaps);
  const double idle = a.overlap.window_ns > 0 ? static_cast<double>(a.overlap.gpu_idle_ns) / static_cast<double>(a.overlap.window_ns) : 0;
  std::vector<AdviceSuggestion> cand;
  auto add = [&](std::string title, std::vector<std::string> args, std::string tradeoff, std::uint32_t gpus = 1) {
    AdviceSuggestion s;
    s.title = std::move(title);
    s.args = std::move(args);
    s.tradeoff = std::move(tradeoff);
    s.gpus = gpus;
    s.hardware = gpus > 1 || s.args.front() == "--hw";
    cand.push_back(std::move(s));
  };
  const double k = std::max<double>(1, static_cast<double>(kernels));
  const double span = std::max<double>(1, static_cast<double>(a.span_ns));
  auto reach = [any](double share_of, double threshold) { return any ? share_of > 0 : share_of >= threshold; };
  // Copy-bound remedies: pageable copies pinned; pinned copies in series with compute prefetched.
  if (reach(static_cast<double>(pageable) / span, 0.05))
    add("pinned host memory for the copies", {"--pin-memory"},
        "page-locked buffers (pin_memory=True, .pin_memory()) and non_blocking copies; pinned memory is a limited resource");
  if (reach(static_cast<double>(pinned_h2d) / span, 0.05) || (pageable > 0 && reach(share(kCopies), 0.2)))
    add("copies prefetched on a second stream",
        pinned_h2d > 0 ? std::vector<std::string>{"--overlap-copies"} : std::vector<std::string>{"--pin-memory", "--overlap-copies"},
        "a second buffer and a copy stream (a prefetching loader); the next batch's memory is held a step early");
  // Many small transfers (a .to() per tensor, an .item() per value): batched into one each.
  if (small_count >= (any ? 2u : 8u))
    add("small copies batched into one", {"--batch-copies"},
        "the tensors packed into one host buffer (or the values stacked on the GPU, one .tolist()) and copied once; "
        "code that read each one indexes the packed one");
  // Memory allocated and freed on the path (a caching allocator off, emptied every step, or
  // thrashing): the memory kept instead, its calls gone.
  if (const auto it = a.host_terms.find(kAllocationCalls);
      it != a.host_terms.end() && a.path_ns > 0 && reach(static_cast<double>(it->second) / static_cast<double>(a.path_ns), 0.05))
    add("device memory kept between iterations (a caching allocator)", {"--keep-memory"},
        "PyTorch's caching allocator on (no PYTORCH_NO_CUDA_MEMORY_CACHING, no torch.cuda.empty_cache() in the loop) or buffers "
        "allocated once and reused; the memory stays held at its peak");
  // The input pipeline on the path (a DataLoader without workers): the next batch prepared beside
  // the step.
  if (const auto it = a.host_terms.find(kInputPipeline);
      it != a.host_terms.end() && a.path_ns > 0 && reach(static_cast<double>(it->second) / static_cast<double>(a.path_ns), 0.05))
    add("the next batch loaded beside the step (DataLoader workers)", {"--input-workers"},
        "DataLoader(num_workers=N, pin_memory=True, persistent_workers=True): N processes and their memory, the host's cores "
        "shared with them; a worker's batch must be ready within a step");
  // Host synchronizations on the path: moved out of the step.
  if (reach(share(kSync), 0.1))
    add("host synchronizations out of the step", {"--defer-syncs"},
        "the values read on the host (.item(), printing, a blocking copy) are read later or less often; the step's own ordering stays");
  if (reach(host, 0.1) || reach(idle, 0.1))
    add("CUDA graphs over each step", {"--cuda-graph"},
        "static shapes and memory addresses; the step is captured once; host-side logic inside it must move out");
  if (reach(static_cast<double>(fp32_math) / k, 0.1)) {
    // The 16-bit type the GPU has math for: bf16 from Ampere on, fp16 on Volta and Turing.
    const bool bf16 = hw.gpu.peak_of(Dtype::BF16, ComputeUnit::Tensor) > 0 || hw.gpu.peak_of(Dtype::FP16, ComputeUnit::Tensor) <= 0;
    if (bf16) {
      add("bf16 autocast", {"--precision", "autocast-bf16"}, "numerics: bf16 keeps 8 mantissa bits in matmuls; check the loss or accuracy");
    } else {
      add("fp16 autocast", {"--precision", "autocast-fp16"},
          "numerics: fp16's range needs loss scaling in training (GradScaler); 11 mantissa bits in matmuls");
    }
    if (hw.gpu.peak_of(Dtype::TF32, ComputeUnit::Tensor) > 0)
      add("TF32 matmuls", {"--precision", "tf32"}, "numerics: 10 mantissa bits in matmul inputs; one flag (allow_tf32)");
    if (bf16)
      add("the whole model in bf16", {"--precision", "bf16"}, "numerics: weights and optimizer state in bf16 need master weights or care");
    else
      add("the whole model in fp16", {"--precision", "fp16"}, "numerics: fp16 weights need master weights and loss scaling in training");
  }
  if (reach(static_cast<double>(half_gemm) / k, 0.2) && hw.gpu.peak_of(Dtype::FP8, ComputeUnit::Tensor) > 0)
    add("fp8 linear layers (per-tensor scaling)", {"--precision", "fp8-tensor"},
        "numerics: e4m3 forward, e5m2 gradients with dynamic scales; Transformer Engine or torchao; the quantization passes cost "
        "bandwidth");
  if (reach(static_cast<double>(unaligned_gemm) / k, 0.05))
    add("GEMM dimensions padded to multiples of 64 (the vocabulary)", {"--align-gemms"},
        "a padded vocabulary or hidden size: the padding's logits masked or sliced off; the weights and optimizer state a little larger");
  if (reach(static_cast<double>(unfilled) / k, 0.03))
    add("grids filled to whole multiples of the SMs (batch, heads or tile size)", {"--fill-waves"},
        "a batch or head count whose grid is a multiple of the GPU's SMs, or another tile size; the step's work per batch changes");
  if (reach(static_cast<double>(pointwise) / k, 0.1))
    add("fuse the pointwise chains (torch.compile)", {"--fuse", "auto"}, "compile time; graph breaks and recompiles on new shapes");
  if (reach(static_cast<double>(a.overlap.exposed_communication_ns) / span, 0.05)) {
    add("overlap the exposed communication", {"--overlap-comm"}, "needs asynchronous collectives issued as their inputs are ready");
    bool fp32_reduce = false;  // fp32 gradient all-reduces (NCCL kernels named _f32)
    for (const Collective& col : t.collectives)
      fp32_reduce = fp32_reduce || (col.kind == CollKind::AllReduce && !col.members.empty() &&
                                    t.name(t.ops[col.members[0]]).find("_f32") != std::string::npos);
    if (fp32_reduce)
      add("gradient all-reduces in bf16 (DDP's compression hook)", {"--grad-compress", "bf16"},
          "numerics: gradients summed in bf16 (8 mantissa bits); register_comm_hook(bf16_compress_hook)");
    // Many small collectives: their per-call latency, coalesced into DDP-sized buckets.
    std::vector<double> sizes;
    for (const Collective& col : t.collectives)
      if (col.bytes > 0) sizes.push_back(static_cast<double>(col.bytes));
    if (sizes.size() >= 4 && quantile(sizes, 0.5) <= 4.0 * (1 << 20))
      add("fewer, larger collectives (25 MiB buckets)", {"--bucket-comm", "25 MiB"},
          "a bucket waits for all its inputs: less overlap with the backward; DDP's bucket_cap_mb, or coalesced collectives");
  }
  add("another GPU: B200", {"--hw", "b200"}, "cost and availability; kernels re-timed by the model, not measured there");
  if (host >= 0.2 || share(kLatency) >= 0.2) {  // launch-bound or small kernels: more work per launch
    add("a 4x larger batch per step", {"--batch", "4"}, "latency: each step takes longer; activation memory grows 4x (not checked)");
    cand.back().batch = 4;
  }
  bool training = false;
  for (const AdvicePhase& p : a.phases) training = training || p.name == "@backward";
  if (training) {
    add("data parallel on 2 GPUs", {"--data-parallel", "2"},
        "weak scaling: the global batch doubles; the model replicated; all-reduce traffic", 2);
    add("FSDP on 2 GPUs", {"--fsdp", "2"}, "weak scaling; parameters sharded, all-gathered per layer; more communication than DDP", 2);
  }
  return cand;
}

// How many suggestions are simulated at once: the machine's cores, as many as the memory left
// holds (a suggestion's forecast takes about 200 bytes per op of the trace beside the baseline:
// its case, graph, schedule and slack), at least one.
unsigned simulation_threads(const Trace& t, std::size_t suggestions) {
  unsigned n = std::max(1u, std::thread::hardware_concurrency());
  const double avail = available_memory_bytes();
  const double each = 200.0 * static_cast<double>(std::max<std::size_t>(t.ops.size(), 1));
  const auto fits = static_cast<unsigned>(std::clamp(avail / each, 1.0, 1024.0));
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>({n, fits, suggestions})));
}

// Where the time goes in a forecast: the host's part of its critical path (and what dominates it
// where it holds a quarter or more) and the GPU's busy share of the span (the ranges' median).
std::string after_text(const WhatIfReport& w) {
  const HostOnPath& h = w.host_after;
  double busy = 0;
  if (!w.ranges.empty()) {
    std::vector<double> b;
    for (const WhatIfRange& r : w.ranges) b.push_back(r.busy_after);
    busy = median(b);
  } else if (w.predicted_overlap.window_ns > 0) {
    busy = static_cast<double>(w.predicted_overlap.gpu_busy_ns) / static_cast<double>(w.predicted_overlap.window_ns);
  }
  std::string host = h.note();
  if (host.empty())
    host = "the host holds " + format_share(h.path_ns > 0 ? static_cast<double>(h.host()) / static_cast<double>(h.path_ns) : 0.0) +
           " of the critical path";
  return host + "; the GPU busy " + format_share(std::min(busy, 1.0)) + " of the span";
}

// Each simulated on the whole run (or the ranges), on as many threads as simulation_threads
// allows (each fills its own suggestion: the output does not depend on the order), then ranked.
void simulate(const Trace& t, const WhatIfBaseline& baseline, std::vector<AdviceSuggestion>& cand) {
  // Whether an op is a host wait (its name, once per name).
  std::vector<char> wait(t.strings.size(), 0);
  for (StrId n = 0; n < t.strings.size(); ++n) wait[n] = t.strings.str(n).find("ynchronize") != std::string::npos;
  auto one = [&](AdviceSuggestion& s) {
    try {
      std::string scenario;
      WhatIfReport w = baseline.run(parse_transform_args(s.args, scenario));
      s.baseline_ns = w.baseline_ns;
      s.predicted_ns = w.predicted_ns;
      s.error_bar = w.error_bar;
      s.after = after_text(w);
      // Naive: the run shortened by the time its ops (device and host) save, as if nothing
      // overlapped, in proportion for a range; more GPUs: a perfect split of the work.
      double saved = 0;
      for (OpId o = 0; o < t.ops.size() && o < w.pred_sim.end.size(); ++o) {
        const Op& op = t.ops[o];
        // Waits, not work: syncs and blocking copies (their calls wait for the GPU).
        if (op.kind == OpKind::Api && (wait[op.name] || blocks_host(op.api_class()))) continue;
        if (op.kind != OpKind::Api && !is_device_op(op.kind)) continue;
        saved += static_cast<double>((w.base_sim->end[o] - w.base_sim->start[o]) - (w.pred_sim.end[o] - w.pred_sim.start[o]));
      }
      saved += static_cast<double>(w.host_gaps_removed_ns);  // host time between calls taken out (no op's own)
      const double whole = static_cast<double>(std::max<TimeNs>(1, w.baseline.length()));
      s.amdahl_ns = s.gpus > 1 ? s.baseline_ns / s.gpus
                               : static_cast<TimeNs>(std::llround(static_cast<double>(s.baseline_ns) * std::max(0.0, 1 - saved / whole)));
    } catch (const InputError& e) { s.error = e.what(); }
  };
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> failed(cand.size());
  auto work = [&] {
    for (std::size_t k; (k = next++) < cand.size();) try {
        one(cand[k]);
      } catch (...) { failed[k] = std::current_exception(); }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < simulation_threads(t, cand.size()); ++k) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);  // the first, in the suggestions' order
  // Ranked by the forecast step time of each GPU (more GPUs and a larger batch: their throughput,
  // per traced batch, shown beside); hardware apart.
  std::stable_sort(cand.begin(), cand.end(), [](const AdviceSuggestion& x, const AdviceSuggestion& y) {
    if (x.error.empty() != y.error.empty()) return x.error.empty();
    return x.predicted_ns < y.predicted_ns;
  });
}

// The five kernels (by name) that take most time: their longest launch's grid, occupancy and waves.
std::vector<AdviceKernel> kernels_that_matter(const Trace& t, const HwSpec& hw, const std::vector<char>& in_scope) {
  std::map<StrId, AdviceKernel> by;
  std::map<StrId, TimeNs> longest;
  for (OpId o = 0; o < t.ops.size(); ++o) {
    const Op& op = t.ops[o];
    if (op.kind != OpKind::Kernel || (op.flags & Op::kFlagNccl) || (!in_scope.empty() && !in_scope[o])) continue;
    AdviceKernel& k = by[op.name];
    ++k.count;
    k.total_ns += op.duration();
    const LaunchConfig* lc = t.launch(op);
    if (!lc || op.duration() <= longest[op.name]) continue;
    longest[op.name] = op.duration();
    k.blocks = std::uint64_t{lc->grid(0)} * lc->grid(1) * lc->grid(2);
    k.threads = std::uint32_t{lc->block[0]} * lc->block[1] * lc->block[2];
    const OccupancyResult occ = occupancy(hw.gpu, {k.threads, lc->registers, Bytes{lc->static_smem} + lc->dynamic_smem});
    k.blocks_per_sm = occ.blocks_per_sm;
    k.limiter = occ.limiter;
    const Waves w = wave_quantization(k.blocks, std::max<std::uint32_t>(1, occ.blocks_per_sm), hw.gpu.sm_count);
    k.waves = w.waves;
    k.wave_efficiency = w.efficiency;
    k.sm_fill = sm_fill(lc, hw.gpu.sm_count);
  }
  std::vector<AdviceKernel> out;
  for (auto& [id, k] : by) {
    k.name = t.strings.str(id);
    out.push_back(std::move(k));
  }
  std::sort(out.begin(), out.end(), [](const AdviceKernel& x, const AdviceKernel& y) { return x.total_ns > y.total_ns; });
  if (out.size() > 5) out.resize(5);
  return out;
}

// Whether a change works on a bottleneck class (its cost removed), by its what-if's first word.
bool remedies(const std::string& bottleneck, const std::vector<std::string>& args) {
  if (args.empty()) return false;
  const std::string& a = args[0];
  if (bottleneck == "launch/host-bound" || bottleneck == "latency-bound")
    return a == "--cuda-graph" || a == "--batch" || a == "--remove" || a == "--fuse" || a == "--batch-copies";
  if (bottleneck == "synchronization-bound") return a == "--remove" || a == "--cuda-graph" || a == "--batch-copies";
  if (bottleneck == "copy-bound") return a == "--pin-memory" || a == "--overlap-copies" || a == "--batch-copies";
  if (bottleneck == "exposed communication") return a == "--overlap-comm" || a == "--grad-compress" || a == "--bucket-comm";
  if (bottleneck == "compute-bound") return a == "--precision" || a == "--align-gemms" || a == "--fill-waves";
  if (bottleneck == "memory-bound") return a == "--fuse" || a == "--precision" || a == "--align-gemms";
  return true;
}

// The opening line: the bottleneck, its share of the critical path, the best program change for
// it (among those that remove its cost, where the best of them saves at least half what the best
// change overall saves; else the best overall).
double saved(const AdviceSuggestion* x) { return x ? static_cast<double>(x->baseline_ns) - x->effective_ns() : 0.0; }

// The best program change for the bottleneck (see verdict); null where none helps.
const AdviceSuggestion* best_change(const Advice& a) {
  const AdviceSuggestion *best = nullptr, *any = nullptr;
  for (const AdviceSuggestion& s : a.suggestions)
    if (s.error.empty() && s.predicted_ns < s.baseline_ns) {
      if (!any) any = &s;
      if (!best && remedies(a.bottleneck, s.args)) best = &s;
    }
  if (!best || 2 * saved(best) < saved(any)) best = any;
  return best;
}

std::string verdict(const Advice& a) {
  std::string v = a.bottleneck + ": " + a.evidence.substr(0, std::min(a.evidence.find(';'), a.evidence.find(" (")));
  const AdviceSuggestion* best = best_change(a);
  if (!best) return v + "; no program change forecast to help";
  char b[64];
  std::snprintf(b, sizeof b, "%.2fx",
                best->baseline_ns > 0 && best->effective_ns() > 0 ? static_cast<double>(best->baseline_ns) / best->effective_ns() : 1.0);
  // A best change that saves under 2 % is no lever (a run waiting on what the trace does not show:
  // SGLang's decode step, fp8 at 1.01x): said so, not offered as the way forward.
  if (saved(best) < 0.02 * static_cast<double>(best->baseline_ns))
    return v + "; no program change forecast to save 2 % or more (the best: " + best->title + ", " + b + ")";
  return v + "; best program change: " + best->title + ", " + b + " [" + bar_text(best->error_bar) + "]";
}

// The changes of `steps` as one what-if: those that change the program's kernels first, CUDA graphs
// last (a graph captures the kernels the program has: compiled code captured by hand; torch.compile's
// reduce-overhead adds per-call work of its own, not priced).
std::vector<std::string> combined_args(const std::vector<const AdviceSuggestion*>& steps) {
  std::vector<std::string> out, graph;
  for (const AdviceSuggestion* s : steps) {
    std::vector<std::string>& to = s->args.front() == "--cuda-graph" ? graph : out;
    to.insert(to.end(), s->args.begin(), s->args.end());
  }
  out.insert(out.end(), graph.begin(), graph.end());
  return out;
}

// Following the bottleneck: the verdict's change (where it saves 2 % or more), then, on top of the
// changes taken so far, each program change of one GPU and the traced batch that has anything to
// act on (`pool`: the profile's candidates whatever their share, since the first change moves the
// bottleneck: bf16 GEMMs leave the pointwise kernels the larger part; one of a kind: one
// precision), simulated together; the one that saves most is taken where it saves 2 % more than
// the steps before; up to three steps.
std::vector<AdvicePlanStep> follow(const Trace& t, const WhatIfBaseline& baseline, const Advice& a,
                                   const std::vector<AdviceSuggestion>& pool) {
  std::vector<AdvicePlanStep> plan;
  const AdviceSuggestion* first = best_change(a);
  if (!first || saved(first) < 0.02 * static_cast<double>(first->baseline_ns) || first->gpus != 1 || first->batch != 1) return plan;
  plan.push_back({first->title, first->args, first->baseline_ns, first->predicted_ns, first->error_bar, first->after});
  std::vector<const AdviceSuggestion*> taken{first};
  while (plan.size() < 3) {
    std::vector<AdviceSuggestion> combos;
    for (const AdviceSuggestion& s : pool) {
      if (s.hardware || s.gpus != 1 || s.batch != 1) continue;
      if (std::any_of(taken.begin(), taken.end(), [&](const AdviceSuggestion* x) { return x->args.front() == s.args.front(); })) continue;
      std::vector<const AdviceSuggestion*> with = taken;
      with.push_back(&s);
      AdviceSuggestion c;
      c.title = s.title;
      c.args = combined_args(with);
      combos.push_back(std::move(c));
    }
    if (combos.empty()) break;
    simulate(t, baseline, combos);  // ranked, best first
    const AdviceSuggestion& b = combos.front();
    if (!b.error.empty() || static_cast<double>(b.predicted_ns) > 0.98 * static_cast<double>(plan.back().predicted_ns)) break;
    plan.push_back({b.title, b.args, b.baseline_ns, b.predicted_ns, b.error_bar, b.after});
    taken.push_back(&*std::find_if(pool.begin(), pool.end(), [&](const AdviceSuggestion& s) { return s.title == b.title; }));
  }
  if (plan.size() < 2) plan.clear();  // one change: the verdict says it
  return plan;
}

}  // namespace

double available_memory_bytes() {
  double avail = static_cast<double>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) avail = static_cast<double>(kb) * 1024.0;
    std::fclose(f);
  }
  // A container's memory limit (cgroup v2, else v1) less what its processes use, where it is lower:
  // /proc/meminfo tells the host's memory, not the container's.
  auto number = [](const char* path, double& v) {
    std::FILE* f = std::fopen(path, "r");
    if (!f) return false;
    unsigned long long x = 0;
    const bool ok = std::fscanf(f, "%llu", &x) == 1;  // "max" (no limit) reads as no number
    std::fclose(f);
    v = static_cast<double>(x);
    return ok;
  };
  double limit = 0, used = 0;
  if ((number("/sys/fs/cgroup/memory.max", limit) && number("/sys/fs/cgroup/memory.current", used)) ||
      (number("/sys/fs/cgroup/memory/memory.limit_in_bytes", limit) && number("/sys/fs/cgroup/memory/memory.usage_in_bytes", used)))
    if (limit < 0x1p60) avail = std::min(avail, std::max(0.0, limit - used));
  return avail;
}

std::string steady_state_scope(Trace& t, const Structure& found, AdviseOptions& o) {
  o.structure = &found;
  const StructureLevel* it = found.level("iteration");
  if (!it || it->instances.empty()) return "";
  std::map<std::uint32_t, std::size_t> count;
  for (const StructureInstance& in : it->instances) ++count[in.rank];
  for (const auto& [rank, n] : count)
    if (n < 3) return "";  // two instances of a loop in a long run (a graph capture's) are no steady state
  // Iterations that run back to back (their GPU span 3/4 of their period or more): where the GPU
  // waits between them (a batch loaded with the GPU idle, the host's work between steps), that
  // wait belongs to the step, and the ranges, which start at a step's first launch, would drop it.
  if (4 * it->median_ns < 3 * it->period_ns) return "";
  // Per rank: its GPU span (first device op's start to last one's end, as measured).
  struct Extent {
    TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
    void add(TimeNs a, TimeNs b) {
      lo = std::min(lo, a);
      hi = std::max(hi, b);
    }
    TimeNs length() const { return hi > lo ? hi - lo : 0; }
  };
  std::map<std::uint32_t, Extent> run;
  for (const Op& op : t.ops)
    if (is_device_op(op.kind)) run[t.rank_of(op)].add(op.start, op.end());
  // The iterations' time: each rank's count of them at their period (start to start: what waits
  // between two iterations, a batch's loading, recurs with them and stays in), not the extent from
  // the first to the last (a first instance may hold a pause after a warm-up).
  TimeNs run_ns = 0, outside_ns = 0, inside_ns = 0;
  for (const auto& [rank, e] : run) {
    run_ns += e.length();
    auto c = count.find(rank);
    const TimeNs in = c == count.end() ? 0 : std::min(e.length(), static_cast<TimeNs>(c->second) * std::max(it->period_ns, it->median_ns));
    inside_ns += in;
    outside_ns += e.length() - in;
  }
  if (run_ns <= 0 || 2 * outside_ns <= run_ns) return "";
  add_structure_ranges(t, found);
  o.range_regex = "@iteration";
  return "the steady state: the run's " + std::to_string(it->instances.size()) + " iterations (@iteration, " + format_duration(inside_ns) +
         " at their period of " + format_duration(it->period_ns) + " in its " + format_duration(run_ns) + " GPU span" +
         (run.size() > 1 ? " over its ranks" : "") + "; the rest, " + format_duration(outside_ns) +
         ", is a set-up, a pause or what follows the last, once); --whole-run advises on all of it";
}

Advice advise(const Trace& t, const AdviseOptions& opt) {
  Advice a;
  a.capture = capture_note(t);
  ReplayOptions ro;
  ro.range_regex = opt.range_regex;
  ro.sharing = opt.sharing;
  // The trace's GPU; where its name does not tell (an AMD GPU, a device-less export), an H100's
  // rates stand in for the roofline and the models, and the advice says so.
  std::string source = opt.source_hw;
  try {
    (void)pick_source(t, source);
  } catch (const InputError&) {
    if (!source.empty()) throw;
    source = "h100-sxm";
    const std::string device = named_device(t);
    a.assumed_hw =
        (device.empty() ? std::string("the trace does not say which GPU ran it") : "the trace's GPU, '" + device + "', has no preset") +
        ": an H100 SXM's rates assumed (--source-hw SPEC gives the real one)";
  }
  const HwSpec hw = pick_source(t, source);
  if (!hw.from_trace.empty()) a.assumed_hw = hw.from_trace;
  ro.source_hw = source;
  ro.hw = hw.name;  // retargeted to itself: the replay's roofline aggregation by kernel class (below)
  a.source_hw = hw.name;
  // The run as the what-ifs start from it: the replay without the profiler's host cost.
  WhatIfOptions wo0;
  wo0.range_regex = opt.range_regex;
  wo0.source_hw = source;
  wo0.sharing = opt.sharing;
  // One baseline for the run and every suggestion (built once: graph, work, its simulation).
  const WhatIfBaseline baseline(t, wo0);
  const WorkTable& work = baseline.work();  // the trace's GPU's (estimate_work)
  const WhatIfReport base = baseline.run({});
  a.unprofiled = base.unprofiled;
  a.overlap = base.baseline_overlap;
  a.span_ns = base.baseline.length();
  const Graph& bg = *base.base_graph;
  const SimResult& sim = *base.base_sim;
  // What the advice is of: with a range, its instances (each one's critical path, the device ops it
  // holds, their GPU busy and idle), as its forecasts are; else the whole run.
  std::vector<char> in_scope;  // per trace op (empty: every op)
  if (opt.range_regex) {
    // The instances the forecasts' center counts (repeats_center: a measured span within 1.3x of
    // their median; a warm-up or a stall farther off is left out of every figure alike).
    std::vector<RangeSpan> spans = range_spans(bg, sim, range_regex(*opt.range_regex));
    std::vector<double> measured;
    for (const RangeSpan& rs : spans) measured.push_back(static_cast<double>(rs.measured.length()));
    const double mid = measured.empty() ? 0 : median(measured);
    std::erase_if(spans, [&](const RangeSpan& rs) { return !near_median(static_cast<double>(rs.measured.length()), mid); });
    in_scope.assign(t.ops.size(), 0);
    for (const RangeSpan& rs : spans) {
      for (NodeId n : rs.nodes)
        if (n < t.ops.size()) in_scope[n] = 1;
      path_by_class(t, work, hw, base, range_critical_path(sim, rs), a);
    }
    a.scope_instances = spans.size();
    a.scope = "the " + std::to_string(spans.size()) + " instances of --range " + *opt.range_regex +
              (spans.size() < measured.size() ? " within 1.3x of their median span (of " + std::to_string(measured.size()) + ")" : "");
    a.overlap = compute_overlap(bg, sim_schedule(sim), [&](OpId o) { return o < in_scope.size() && in_scope[o]; });
  } else {
    const TimeNs b0 = base.baseline.begin;
    path_by_class(t, work, hw, base, critical_path(sim, last_device_op(bg, sim_schedule(sim)), [&](OpId o) { return sim.end[o] > b0; }), a);
  }
  ro.class_ops = in_scope.empty() ? nullptr : &in_scope;
  a.classes = run_replay(t, ro).classes;  // the replay's graph and schedule are let go here
  classify_run(a);
  host_summary(a);
  classify_phases(t, work, hw, sim, opt.structure, a);
  a.kernels = kernels_that_matter(t, hw, in_scope);
  std::vector<AdviceSuggestion> cand = candidates(t, work, hw, a, in_scope);
  simulate(t, baseline, cand);
  // A remedy whose transform found nothing to change (no run of small copies, no two collectives
  // to coalesce, no GEMM to pad) is not a suggestion.
  std::erase_if(cand, [](const AdviceSuggestion& s) {
    const std::string& first = s.args.front();
    return !s.error.empty() &&
           (first == "--batch-copies" || first == "--bucket-comm" || first == "--align-gemms" || first == "--fill-waves");
  });
  for (AdviceSuggestion& s : cand) (s.hardware ? a.hardware : a.suggestions).push_back(std::move(s));
  a.verdict = verdict(a);
  if (t.ops.size() <= kFollowMaxOps) a.plan = follow(t, baseline, a, candidates(t, work, hw, a, in_scope, true));
  return a;
}

}  // namespace bneck
