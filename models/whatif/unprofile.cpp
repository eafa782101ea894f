// --unprofile[=auto|off|FACTOR]. Model card: the host as it runs without the profiler. A
//   profiler makes every recorded event cost host time (the PyTorch profiler: each op and CUDA
//   call; Nsight Systems: each CUDA call and NVTX range), so a faster GPU in a forecast would
//   expose the profiler's overhead instead of the program's. The profile's setting is read from
//   the trace (profiler_setting); its per-event costs, measured on host-bound programs traced and
//   untraced (validate/reference/h200/profiler_overhead, h100/profiler_cost), come out of the host
//   timeline: each CUDA call gets shorter by the per-call cost (never below 1 us; a blocking call's
//   cost comes out of the gap before it), and each host gap between two calls on a thread by the
//   per-op cost times the recorded ops (ranges, and ops recorded without shapes) that start in it
//   (never below 0). The PyTorch profiler's cost per event is a multiple of the trace's launch pace
//   (launch_pace): it follows the host's speed from one machine or process to the next. FACTOR
//   scales the costs (another setting). `whatif` applies it to its baseline and its forecast alike
//   (the amount is logged; `--unprofile off` keeps the profiled host); `replay` never does.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>

#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/units.hpp"
#include "traces/kineto/kineto_importer.hpp"
#include "traces/nsys/nsys_importer.hpp"

namespace bneck {

namespace {

// Host cost per recorded event (a profiler's op or CUDA call). The PyTorch profiler's moves with
// the host's pace, which the trace itself shows: the median recorded duration of its kernel-launch
// calls (launch_pace; 4.4 us on one H100 machine, 7.9-8.2 on another of the same kind, 6.3-7.8 on
// an H200 host). Measured as (profiled - unprofiled step) / events a step of host-bound programs,
// events as bneck counts them (the ops the trace records, with shapes or without, and the CUDA
// calls), over that trace's pace (k):
// - record_shapes: on one H100 machine (validate/reference/h100/profiler_cost: BERT-base 1x128,
//   GPT-2 medium 1x64 and ResNet-50 16x224 inference in fp32, TF32 and bf16 autocast, where
//   host-bound: 8 pairs) k 0.511-0.595, mean 0.553; on an H200 host the MLP 0.651, GPT-2 small
//   inference 0.878 and training 0.625 (validate/reference/h200/profiler_overhead), GPT-2 large
//   and Llama-1B training in TF32 0.541 and 0.454 (h200/hf_models), mean 0.630. k is the mean of
//   the two hosts' means, 0.590; held out a third host (the second H100 machine of
//   h100/hf_heldout, whose host ran 1.8x slower than the first's): ResNet-50 16x224 TF32 0.589
//   and autocast 0.646, the cost a step -0.2 and -8.7 % off. (2.25 us an input, the constant
//   before, was off by +97 and +67 % there and +134 .. +225 % on the first machine's eight.)
// - without shapes: record_shapes' k times the ratio of the two settings' per-event costs on the
//   eager loops of validate/reference/h100/profiler_cost (one op kind each: 0.59-0.96, mean 0.745):
//   0.44. Held out, the H200 host's MLP 0.415, GPT-2 small training 0.549 and inference 0.938
//   (whose unprofiled process ran 5.96 ms where another ran 8.46).
// - with_stack (and record_shapes): the MLP and GPT-2 small inference on the H200 host 1.215 /
//   1.330, GPT-2 small training 0.70 (held out then), BERT-base 1x128 and GPT-2 medium 1x64 on an
//   H100 machine 1.091 / 0.562 (validate/reference/h100/profiler_stack, its first processes; the
//   constant was 1.273 before them): their mean 0.980. Held out, the second processes 0.967 /
//   0.788 (ResNet-50 16x224 there ran GPU-bound: no cost measured).
constexpr double kKinetoShapesPerPace = 0.590, kKinetoPerPace = 0.440, kKinetoStackPerPace = 0.980;
// Where a trace shows no launches (a CPU-only profile): a pace in the middle of those measured.
constexpr TimeNs kReferencePace = 6000;
// The paces those programs ran at: a trace outside them doubles its cost's spread. (Costed at the
// nearest measured pace instead, a FlashAttention loop whose launches took 11 us came out host-bound
// where it runs compute-bound: the cost follows the pace past the measured range.)
constexpr TimeNs kPaceLow = 4300, kPaceHigh = 8300;

// The coefficient of variation of a per-event cost over the programs it was measured on (the
// figures above, fitted and held out): how far one program's cost may lie from the constant.
double cost_cv(std::initializer_list<double> us) {
  double m = 0, v = 0;
  for (double x : us) m += x;
  m /= static_cast<double>(us.size());
  for (double x : us) v += (x - m) * (x - m);
  return std::sqrt(v / static_cast<double>(us.size() - 1)) / m;
}

}  // namespace

TimeNs launch_pace(const Trace& t) {
  std::vector<TimeNs> d;
  for (const Op& o : t.ops)
    if (o.kind == OpKind::Api && o.api_class() == ApiClass::Launch) d.push_back(o.duration());
  if (d.size() < 20) return 0;
  const auto mid = d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2);
  std::nth_element(d.begin(), mid, d.end());
  return *mid;
}

namespace {
// Nsight Systems' cost per recorded event, validate/reference/h200/profiler_overhead (H200 host,
// Nsight Systems 2025.3; the MLP and GPT-2 small inference fitted, their mean; GPT-2 small training
// held out): per CUDA call row 2.61 / 4.04 us (held out 8.52), with emit_nvtx per call or op row
// 5.64 / 3.65 (5.19).
constexpr TimeNs kNsysNvtxPerOp = 4650, kNsysPerCall = 3330;
}  // namespace

ProfilerSetting profiler_setting(const Trace& t) {
  ProfilerSetting s;
  const bool kineto = t.format.rfind("kineto", 0) == 0 || t.format.find("chrome") != std::string::npos;
  const bool nsys = t.format.rfind("nsys", 0) == 0;
  std::size_t shaped = 0, ops = 0;
  for (const Range& r : t.ranges) {
    if (r.structure) continue;
    const std::string& n = t.strings.str(r.name);
    if (n.find("sizes = [") != std::string::npos) ++shaped;
    if (n.rfind("aten::", 0) == 0 || n.find(", seq = ") != std::string::npos || n.find(", op_id = ") != std::string::npos) ++ops;
  }
  if (kineto) {  // one cost per event, op or CUDA call
    const bool stack = t.anomalies.count(kKinetoStackNote) > 0;
    s.name = std::string("PyTorch profiler") + (shaped > 0 ? ", record_shapes" : "") + (stack ? ", with_stack" : "");
    // profile_memory's [memory] events (192 / 814 / 2,276 a step on the three programs of
    // profiler_overhead/run_more.sh): no host cost of their own found, -1.9 / -4.0 / +0.8 us an
    // event (the step with them against record_shapes alone, medians of 2-3 processes each), so
    // none is taken out for them; the record_shapes cost still is.
    if (t.anomalies.count(kKinetoMemoryNote)) s.name += ", profile_memory";
    s.pace = launch_pace(t);
    const TimeNs pace = s.pace > 0 ? s.pace : kReferencePace;
    const double k = stack ? kKinetoStackPerPace : shaped > 0 ? kKinetoShapesPerPace : kKinetoPerPace;
    s.per_op = s.per_call = static_cast<TimeNs>(std::llround(k * static_cast<double>(pace)));
    s.cost_cv = stack ? cost_cv({1.215, 1.330, 0.70, 1.091, 0.562, 0.967, 0.788})
                : shaped > 0
                    ? cost_cv({0.511, 0.511, 0.564, 0.595, 0.541, 0.558, 0.563, 0.578, 0.651, 0.878, 0.625, 0.541, 0.454, 0.589, 0.646})
                    : cost_cv({0.415, 0.938, 0.549});
    if (s.pace > 0 && (s.pace < kPaceLow || s.pace > kPaceHigh)) {
      s.cost_cv *= 2;  // a host unlike those measured
      s.pace_note = "launch pace " + format_duration(s.pace) + " outside the measured " + format_duration(kPaceLow) + " .. " +
                    format_duration(kPaceHigh) + ": spread doubled";
    }
  } else if (nsys) {
    s.name = ops > 0 ? std::string("Nsight Systems with PyTorch op ranges (emit_nvtx") + (shaped ? ", shapes)" : ")") : "Nsight Systems";
    s.per_op = ops > 0 ? kNsysNvtxPerOp : 0;
    s.per_call = ops > 0 ? kNsysNvtxPerOp : kNsysPerCall;
    s.cost_cv = ops > 0 ? cost_cv({5.64, 3.65, 5.19}) : cost_cv({2.61, 4.04, 8.52});
    // OS runtime tracing intercepts every libc call it covers and records only those longer than
    // --osrt-threshold (1 us by default): 0 / 0 / 5 recorded calls a step on the three programs of
    // profiler_overhead/run_more.sh, while their steps took 1.04 / 1.67 / 1.12x (medians of 3
    // processes; earlier 1.70 / 1.09 / 1.00x) those traced without it. The cost is in calls the
    // trace does not hold, so there is no per-event cost to take out; it is kept, and said.
    if (t.anomalies.count(kNsysOsrtNote))
      s.unmodelled = "OS runtime tracing (-t osrt: its cost lies in calls it does not record; 1.04-1.70x a step measured)";
  }
  return s;
}

namespace {

class Unprofile : public TransformStep {
 public:
  explicit Unprofile(double scale) : scale_(scale) {}
  bool needs_gpu_rates() const override { return false; }
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    const Trace& t = ctx.trace;
    const ProfilerSetting s = profiler_setting(t);
    if (!s.costs()) return;
    c.profiler_removed = scale_ > 0;
    const double per_op = static_cast<double>(s.per_op) * scale_, per_call = static_cast<double>(s.per_call) * scale_;
    // Recorded ops per thread, by start, with their cost: the op ranges and the ops recorded without one.
    std::map<LaneId, std::vector<std::pair<TimeNs, double>>> starts;
    // (A module's range is one of the Python frames the with_stack cost per op was measured with,
    // not a recorded op of its own.)
    for (const Range& r : t.ranges)
      if (!r.structure && !module_range_name(t.strings.str(r.name))) starts[r.lane].emplace_back(r.start, per_op);
    for (const auto& [lane, start] : t.unnamed_ops) starts[lane].emplace_back(start, per_op);
    std::map<LaneId, std::vector<double>> sums;  // sums[l][i]: the cost of the first i ranges
    for (auto& [l, v] : starts) {
      std::sort(v.begin(), v.end());
      auto& run = sums[l];
      run.assign(1, 0.0);
      for (const auto& x : v) run.push_back(run.back() + x.second);
    }
    // Host calls per thread in order.
    std::map<LaneId, std::vector<OpId>> calls;
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (t.ops[i].kind == OpKind::Api) calls[t.ops[i].lane].push_back(i);
    Graph& g = c.edit_graph();
    GraphEditor ed(g, text);
    struct Gap {
      OpId from, to;
      TimeNs delay;
    };
    std::vector<Gap> gaps;
    TimeNs removed = 0;
    std::size_t n_calls = 0, n_ops = 0;
    for (auto& [lane, cs] : calls) {
      std::sort(cs.begin(), cs.end(), [&](OpId a, OpId b) { return t.ops[a].start < t.ops[b].start; });
      const auto& st = starts[lane];
      const auto& sum = sums[lane];
      auto first_at = [&](TimeNs ts) {
        return static_cast<std::size_t>(std::lower_bound(st.begin(), st.end(), std::make_pair(ts, -1.0)) - st.begin());
      };
      for (std::size_t k = 0; k < cs.size(); ++k) {
        const OpId n = cs[k];
        // The call's own cost comes out of it (never below 1 us), the rest out of the gap before. A
        // call that blocks the host until the device is done ends with the device in the replay:
        // what it recorded beyond that is the host's before the wait, out of the gap before.
        const TimeNs call_cost = static_cast<TimeNs>(std::llround(per_call));
        const TimeNs d = c.durations[n];
        const TimeNs nd = blocks_host(t.ops[n].api_class()) ? d : std::max<TimeNs>(std::min<TimeNs>(d, 1000), d - call_cost);
        removed += d - nd;
        c.durations[n] = nd;
        ++n_calls;
        if (k == 0) continue;
        // The gap before it: the rest of the call's cost and the ops recorded in it.
        const Op& p = t.ops[cs[k - 1]];
        const std::size_t lo = first_at(p.start), hi = first_at(t.ops[n].start);
        n_ops += hi - lo;
        const TimeNs cut = static_cast<TimeNs>(std::llround(sum.empty() ? 0.0 : sum[hi] - sum[lo])) + (call_cost - (d - nd));
        if (cut <= 0) continue;
        const TimeNs gap = std::max<TimeNs>(0, t.ops[n].start - p.end());
        const TimeNs take = std::min(cut, gap);
        if (take <= 0) continue;
        removed += take;
        gaps.push_back({cs[k - 1], n, gap - take});
      }
    }
    // The host-order edges into the calls whose gap shrank, re-added with the shorter delay.
    ed.commit();
    // The host-order edge between the two calls takes the shorter gap.
    for (const auto& gp : gaps)
      for (auto e : boost::make_iterator_range(boost::out_edges(gp.from, g.csr)))
        if (boost::target(e, g.csr) == gp.to && g.csr[e].type() == EdgeType::HostOrder)
          g.csr[e].set_delay(std::min(g.csr[e].delay(), gp.delay));
    const std::string each = std::to_string(n_calls) + " CUDA calls and " + std::to_string(n_ops) + " recorded ops x " +
                             format_duration(static_cast<TimeNs>(std::llround(per_call))) +
                             (s.pace > 0 ? " (" + fmt_num("%.3g", static_cast<double>(s.per_call) / static_cast<double>(s.pace)) +
                                               " x the trace's launch pace, " + format_duration(s.pace) + ")"
                                         : "") +
                             (s.pace_note.empty() ? "" : "; " + s.pace_note);
    c.profiler_removed_ns = removed;
    c.profiler_cost_cv = s.cost_cv;
    c.log.push_back(text + ": " + s.name + ": " + format_duration(removed) + " of host time taken out (" + each +
                    "; --unprofile off keeps it)" +
                    (s.unmodelled.empty() ? "" : "; kept: " + s.unmodelled + ", --unprofiled-time scales it"));
  }

 private:
  double scale_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) {
  if (arg.empty() || arg == "auto") return std::make_unique<Unprofile>(1.0);
  if (arg == "off") return std::make_unique<Unprofile>(0.0);
  try {
    std::size_t used = 0;
    const double f = std::stod(arg, &used);
    if (used == arg.size() && f >= 0 && f <= 100) return std::make_unique<Unprofile>(f);
  } catch (const std::exception&) {}
  throw InputError("--unprofile " + arg + ": expected auto, off or a factor of the measured per-event costs (0 .. 100)");
}

}  // namespace

extern const TransformDef kUnprofileTransform{
    "unprofile", "auto|off|FACTOR", TransformDef::Arg::Optional,
    "the profiler's host cost per recorded event taken out of the host timeline (whatif does it by default; off keeps it)", parse};

}  // namespace bneck
