// --pin-memory[=SEL] and --overlap-copies[=SEL]: the copy-bound remedies.
//
// Model card, --pin-memory: host buffers page-locked, copies issued non_blocking. Each selected
//   host<->device copy that touches pageable memory (default: all of them) moves at the pinned
//   rate: the trace's own pinned copies of that direction where it has some of at least 1 MiB
//   (their median bytes per second, plus the path's latency), else the spec's pinned path
//   (models/transfer.hpp). Its launching call no longer waits for it (a pageable cudaMemcpyAsync
//   returns when the copy is done; a pinned one at once): the call takes the median time of the
//   trace's non-blocking copy calls (else the spec's launch overhead) and loses its host-sync edge;
//   what the program does with the data still waits for the copy through stream order. A stream
//   synchronization that is the thread's next call (PyTorch's blocking .to()) goes with it; the
//   program's other synchronizations stay.
// Model card, --overlap-copies: copies prefetched on a second stream, two buffers. Each selected
//   host-to-device copy from pinned memory (default: every such copy on a stream that also runs
//   kernels) moves to a copy stream of its device, issued where it was, and brings the next step's
//   batch: the ops after copy k on its stream read what copy k-1 brought (the first copy's: its
//   own, the loop's prologue) and no longer wait for copy k, which runs beside them. Copy k still
//   starts after the ops before it on the compute stream (they read the buffer it overwrites) and
//   after copy k-1. Pageable copies stay (the host waits for them: --pin-memory first).
// Model card, --batch-copies: many small transfers in a row become one. A run is two or more
//   host<->device copies (each at most 16 MiB, selected: default all) whose calls follow one another
//   on one host thread, of one direction, one kind of host memory and one stream, with nothing
//   between them but the stream synchronization that goes with a blocking copy (PyTorch's .to(),
//   .item()) and calls that only take CPU time; a kernel launch or any other call ends it. The run
//   becomes one copy of its bytes, issued by its last call, as a program that packs the tensors into
//   one host buffer (a collate into one tensor) or stacks the values on the GPU (torch.stack(...)
//   .tolist()) issues it: the calls before the last, their synchronizations and the host time
//   between them go; the host time before the first call and after the last stays. The copy takes
//   the run's own latency (the median of each copy's time less its bytes at the rate) plus its
//   bytes at the rate of the trace's copies of that direction and memory of at least 1 MiB (their
//   median), else the spec's path (models/transfer.hpp); never more than the run's copies took.
//   Not priced: packing the host buffer (none where the batch already comes as one tensor) or the
//   stack kernel.
#include <algorithm>
#include <cmath>
#include <map>

#include "models/transfer.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/stats.hpp"

namespace bneck {
namespace {

// The trace's host<->device copies of 1 MiB or more: their rates (bytes/s) by (to the device, pageable).
std::map<std::pair<bool, bool>, std::vector<double>> trace_copy_rates(const Trace& t) {
  std::map<std::pair<bool, bool>, std::vector<double>> rates;
  for (const Op& o : t.ops) {
    const CopyInfo* ci = o.kind == OpKind::Memcpy ? t.copy(o) : nullptr;
    if (ci && ci->host_device() && ci->bytes >= (1u << 20) && o.duration() > 0)
      rates[{ci->to_device(), ci->pageable()}].push_back(static_cast<double>(ci->bytes) / (static_cast<double>(o.duration()) / 1e9));
  }
  return rates;
}

// The host's CUDA calls per thread, in start order.
std::map<LaneId, std::vector<OpId>> calls_by_thread(const Trace& t) {
  std::map<LaneId, std::vector<OpId>> calls;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (t.ops[i].kind == OpKind::Api) calls[t.ops[i].lane].push_back(i);
  for (auto& [l, v] : calls) std::sort(v.begin(), v.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
  return calls;
}

class PinMemory : public TransformStep {
 public:
  explicit PinMemory(std::string sel) : sel_(std::move(sel)) {}
  bool needs_gpu_rates() const override { return false; }  // the trace's pinned copies, else the spec's path
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    const std::vector<bool> hit = sel_.empty() ? std::vector<bool>(t.ops.size(), true) : ctx.select(sel_, true);
    // The trace's own pinned rates (bytes/s) by direction, and its non-blocking copy calls' time.
    const auto rates = trace_copy_rates(t);
    const std::vector<double> none;
    auto pinned_rate = [&](bool h2d) -> const std::vector<double>& {
      auto it = rates.find({h2d, false});
      return it == rates.end() ? none : it->second;
    };
    std::vector<double> call;
    for (const Op& o : t.ops) {
      const CopyInfo* ci = o.kind == OpKind::Memcpy ? t.copy(o) : nullptr;
      if (ci && ci->host_device() && !ci->pageable() && o.link != kNone && t.ops[o.link].api_class() == ApiClass::MemcpyAsync)
        call.push_back(static_cast<double>(t.ops[o.link].duration()));
    }
    const TimeNs call_ns = call.empty() ? c.spec.gpu.host_launch_overhead : static_cast<TimeNs>(std::llround(quantile(call, 0.5)));
    // Host calls per thread in start order: a blocking copy's own stream synchronization (PyTorch's
    // .to() without non_blocking) is the thread's next call.
    std::map<LaneId, std::vector<OpId>> calls = calls_by_thread(t);
    auto next_call = [&](OpId a) -> OpId {
      const auto& v = calls[t.ops[a].lane];
      auto it = std::upper_bound(v.begin(), v.end(), a, [&](OpId x, OpId y) { return t.ops[x].start < t.ops[y].start; });
      return it == v.end() ? kNone : *it;
    };
    std::size_t syncs = 0;
    Graph& g = c.edit_graph();
    GraphEditor ed(g, text);
    std::size_t n = 0;
    TimeNs before = 0, after = 0;
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      if (o.kind != OpKind::Memcpy || !hit[i] || g.removed(i)) continue;
      const CopyInfo* ci = t.copy(o);
      if (!ci || !ci->host_device() || !ci->pageable()) continue;
      const bool h2d = ci->to_device();
      const MemKind src = h2d ? MemKind::Pinned : MemKind::Device, dst = h2d ? MemKind::Device : MemKind::Pinned;
      const TimeNs spec_ns = transfer_time(c.spec, ci->copy_kind, src, dst, ci->bytes);
      TimeNs d = spec_ns;
      if (!pinned_rate(h2d).empty()) {
        const TimeNs latency = transfer_time(c.spec, ci->copy_kind, src, dst, 0);
        d = latency + static_cast<TimeNs>(std::llround(static_cast<double>(ci->bytes) / quantile(pinned_rate(h2d), 0.5) * 1e9));
      }
      before += c.durations[i];
      c.durations[i] = std::min(c.durations[i], d);
      after += c.durations[i];
      ++n;
      if (o.link != kNone && t.ops[o.link].api_class() == ApiClass::MemcpySync) {
        ed.drop_in_edges(o.link, [](NodeId, const EdgeProps& p, const Graph&) { return p.type() == EdgeType::HostSync; });
        c.durations[o.link] = std::min(c.durations[o.link], call_ns);
        const OpId s = next_call(o.link);
        if (s != kNone && t.ops[s].api_class() == ApiClass::StreamSync) {  // non_blocking: no sync of its own
          ed.drop_in_edges(s, [](NodeId, const EdgeProps& p, const Graph&) { return p.type() == EdgeType::HostSync; });
          c.durations[s] = 0;
          ++syncs;
        }
      }
    }
    ed.commit();
    if (n == 0)
      throw InputError(text + ": no host<->device copy touching pageable memory" +
                       (sel_.empty() ? "" : " among those " + sel_ + " selects"));
    c.log.push_back(
        text + ": " + std::to_string(n) + " pageable copies pinned, " + format_duration(before) + " -> " + format_duration(after) + " (" +
        (pinned_rate(false).empty() && pinned_rate(true).empty() ? "the spec's pinned path" : "the trace's pinned copies' rate") +
        "); their calls return after " + format_duration(call_ns) + ", " + std::to_string(syncs) +
        " stream synchronizations right after them gone (non_blocking)");
  }

 private:
  std::string sel_;
};

class OverlapCopies : public TransformStep {
 public:
  explicit OverlapCopies(std::string sel) : sel_(std::move(sel)) {}
  bool needs_gpu_rates() const override { return false; }
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    Graph& g = c.edit_graph();
    const std::vector<bool> hit = sel_.empty() ? std::vector<bool>(t.ops.size(), true) : ctx.select(sel_, true);
    // Device ops per stream in start order; the streams that run kernels.
    std::map<LaneId, std::vector<OpId>> lanes;
    std::vector<bool> has_kernels(t.lanes.size(), false);
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      if (!is_device_op(o.kind) || g.removed(i)) continue;
      lanes[o.lane].push_back(i);
      has_kernels[o.lane] = has_kernels[o.lane] || o.kind == OpKind::Kernel;
    }
    GraphEditor ed(g, text);
    std::size_t moved = 0, left_pageable = 0;
    for (auto& [lane, ops] : lanes) {
      if (!has_kernels[lane] || !t.lanes[lane].fifo) continue;
      std::sort(ops.begin(), ops.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
      std::vector<std::size_t> at;  // positions of the copies to move
      for (std::size_t k = 0; k < ops.size(); ++k) {
        const Op& o = t.ops[ops[k]];
        const CopyInfo* ci = o.kind == OpKind::Memcpy ? t.copy(o) : nullptr;
        if (!ci || !hit[ops[k]] || !ci->to_device()) continue;
        if (ci->pageable()) {
          ++left_pageable;
          continue;
        }
        at.push_back(k);
      }
      if (at.empty()) continue;
      const LaneId side = add_comm_lane(ed, t.lanes[lane].device, t.lanes[lane].process, "copies of " + t.lane_label(lane));
      for (std::size_t j = 0; j < at.size(); ++j) {
        const std::size_t k = at[j];
        const OpId cp = ops[k];
        ed.move(cp, side);  // its call and the ops before it on the stream (the buffer's last reader) still gate it
        if (j > 0) ed.add_edge(ops[at[j - 1]], cp, EdgeType::StreamOrder, DepType::EndToStart, 0);  // the copy stream's order
        ++moved;
        if (k + 1 >= ops.size() || t.ops[ops[k + 1]].kind == OpKind::Memcpy) continue;
        // What followed the copy reads the batch the copy before it brought (the first: its own, the
        // loop's prologue) and follows the op before the copy on the stream.
        const OpId next = ops[k + 1];
        ed.drop_in_edges(next, [](NodeId, const EdgeProps& p, const Graph&) { return p.type() == EdgeType::StreamOrder; });
        if (k > 0) ed.add_edge(ops[k - 1], next, EdgeType::StreamOrder, DepType::EndToStart, 0);
        ed.add_edge(j == 0 ? cp : ops[at[j - 1]], next, EdgeType::Event, DepType::EndToStart, 0);
      }
    }
    ed.commit();
    if (moved == 0)
      throw InputError(text + ": no pinned host-to-device copy on a stream with kernels" +
                       (left_pageable ? " (" + std::to_string(left_pageable) + " pageable: --pin-memory first)" : std::string()));
    c.log.push_back(text + ": " + std::to_string(moved) +
                    " host-to-device copies prefetched on a copy stream (each brings the next step's batch, two buffers)" +
                    (left_pageable ? "; " + std::to_string(left_pageable) + " pageable copies left (--pin-memory first)" : std::string()));
  }

 private:
  std::string sel_;
};

class BatchCopies : public TransformStep {
 public:
  explicit BatchCopies(std::string sel) : sel_(std::move(sel)) {}
  bool needs_gpu_rates() const override { return false; }  // the trace's own copies, else the spec's path
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    Graph& g = c.edit_graph();
    const std::vector<bool> hit = sel_.empty() ? std::vector<bool>(t.ops.size(), true) : ctx.select(sel_, true);
    constexpr Bytes kMaxBytes = Bytes{16} << 20;
    // The copy each call issued; the trace's rates (bytes/s) by direction and host memory.
    std::vector<OpId> copy_of(t.ops.size(), kNone);
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      const CopyInfo* ci = o.kind == OpKind::Memcpy ? t.copy(o) : nullptr;
      if (ci && ci->host_device() && o.link != kNone && ci->bytes <= kMaxBytes && hit[i] && !g.removed(i)) copy_of[o.link] = i;
    }
    const auto rates = trace_copy_rates(t);
    std::map<LaneId, std::vector<OpId>> calls = calls_by_thread(t);
    GraphEditor ed(g, text);
    std::size_t runs = 0, merged = 0, longest = 0;
    TimeNs before = 0, after = 0;
    bool spec_path = false;
    // A run's copies, with the calls (and synchronizations, CPU-only calls) before its last call.
    struct Run {
      std::vector<OpId> copies, drop;
      std::vector<OpId> pending;  // CPU-only calls after the latest copy: dropped only if another copy follows
      bool h2d = false, pageable = false;
      LaneId stream = kNone;
      bool synced = false;  // the latest copy's synchronization seen
    } run;
    auto flush = [&]() {
      if (run.copies.size() >= 2) {
        const OpId last = run.copies.back();
        const CopyInfo& lc = *t.copy(t.ops[last]);
        const MemKind host = run.pageable ? MemKind::Pageable : MemKind::Pinned;
        const MemKind src = run.h2d ? host : MemKind::Device, dst = run.h2d ? MemKind::Device : host;
        auto it = rates.find({run.h2d, run.pageable});
        double rate = 0;  // bytes/s
        if (it != rates.end()) {
          rate = quantile(it->second, 0.5);
        } else {
          const Bytes probe = Bytes{64} << 20;
          const TimeNs dt = transfer_time(c.spec, lc.copy_kind, src, dst, probe) - transfer_time(c.spec, lc.copy_kind, src, dst, 0);
          rate = dt > 0 ? static_cast<double>(probe) / (static_cast<double>(dt) / 1e9) : 0;
          spec_path = true;
        }
        std::vector<double> lat;
        Bytes total = 0;
        TimeNs sum = 0;
        for (OpId k : run.copies) {
          const Bytes b = t.copy(t.ops[k])->bytes;
          total += b;
          sum += c.durations[k];
          lat.push_back(std::max(0.0, static_cast<double>(c.durations[k]) - (rate > 0 ? static_cast<double>(b) / rate * 1e9 : 0.0)));
        }
        TimeNs d = static_cast<TimeNs>(std::llround(quantile(lat, 0.5) + (rate > 0 ? static_cast<double>(total) / rate * 1e9 : 0.0)));
        d = std::min(d, sum);
        before += sum;
        after += d;
        for (OpId k : run.copies) {
          if (k == last) continue;
          ed.remove(k);
          c.durations[k] = 0;
        }
        c.durations[last] = d;
        for (OpId k : run.drop) {  // gone with the host time after them; they no longer wait for a copy
          ed.remove_with_gaps(k);
          ed.drop_in_edges(k, [](NodeId, const EdgeProps& p, const Graph&) { return p.type() == EdgeType::HostSync; });
          c.durations[k] = 0;
        }
        ++runs;
        merged += run.copies.size();
        longest = std::max(longest, run.copies.size());
      }
      run = Run{};
    };
    for (auto& [lane, v] : calls) {
      for (OpId call : v) {
        if (g.removed(call)) continue;  // an earlier transform's
        const Op& o = t.ops[call];
        const OpId cp = copy_of[call];
        if (cp != kNone) {
          const CopyInfo& ci = *t.copy(t.ops[cp]);
          const bool same =
              !run.copies.empty() && run.h2d == ci.to_device() && run.pageable == ci.pageable() && run.stream == t.ops[cp].lane;
          if (!same) {
            flush();
            run.h2d = ci.to_device();
            run.pageable = ci.pageable();
            run.stream = t.ops[cp].lane;
          } else {
            run.drop.push_back(t.ops[run.copies.back()].link);  // the copy call before, with the host time after it
            run.drop.insert(run.drop.end(), run.pending.begin(), run.pending.end());
          }
          run.pending.clear();
          run.copies.push_back(cp);
          run.synced = false;
          continue;
        }
        if (run.copies.empty()) continue;
        const ApiClass k = o.api_class();
        if (k == ApiClass::StreamSync && !run.synced) {
          run.pending.push_back(call);  // dropped with the copy before it if another copy follows
          run.synced = true;
        } else if (k == ApiClass::Other) {
          run.pending.push_back(call);
        } else {
          flush();
        }
      }
      flush();
    }
    ed.commit();
    if (runs == 0)
      throw InputError(text + ": no run of two or more host<->device copies of at most 16 MiB issued one after another" +
                       (sel_.empty() ? "" : " among those " + sel_ + " selects"));
    c.log.push_back(text + ": " + std::to_string(merged) + " copies in " + std::to_string(runs) + " runs (the longest " +
                    std::to_string(longest) + ") each made one copy, " + format_duration(before) + " -> " + format_duration(after) + " (" +
                    (spec_path ? "the spec's path" : "the trace's copies' rate") +
                    "); the calls before each run's last, their synchronizations and the host time between them removed");
  }

 private:
  std::string sel_;
};

std::unique_ptr<TransformStep> parse_pin(const std::string& arg) { return std::make_unique<PinMemory>(checked_selector(arg)); }
std::unique_ptr<TransformStep> parse_overlap(const std::string& arg) { return std::make_unique<OverlapCopies>(checked_selector(arg)); }
std::unique_ptr<TransformStep> parse_batch_copies(const std::string& arg) { return std::make_unique<BatchCopies>(checked_selector(arg)); }

}  // namespace

extern const TransformDef kPinMemoryTransform{
    "pin-memory", "SEL", TransformDef::Arg::Optional,
    "copies touching pageable host memory (default: all) move at the pinned rate; their calls stop waiting (non_blocking)", parse_pin};
extern const TransformDef kOverlapCopiesTransform{
    "overlap-copies", "SEL", TransformDef::Arg::Optional,
    "pinned host-to-device copies (default: those on streams with kernels) prefetched one step ahead on a copy stream", parse_overlap};
extern const TransformDef kBatchCopiesTransform{
    "batch-copies", "SEL", TransformDef::Arg::Optional,
    "runs of small host<->device copies issued one after another (.to() per tensor, .item() per value) become one copy each",
    parse_batch_copies};

}  // namespace bneck
