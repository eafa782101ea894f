#include "models/replay.hpp"

#include "models/kernel_roofline.hpp"
#include "traces/progress.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <map>
#include <unordered_map>

#include "models/collective.hpp"

#include <optional>
#include "models/measured.hpp"
#include "models/retarget.hpp"
#include "models/sharing.hpp"
#include "sim/base/error.hpp"

namespace bneck {

namespace {

double secs_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Per kernel class: the roofline table of a model-mode or retargeted replay.
void class_table(const Trace& t, const RetargetCostModel& m, const std::vector<char>* only, ReplayReport& rep) {
  std::vector<ClassRow> rows(kKernelClassCount + 2);
  std::vector<std::array<TimeNs, 4>> bound_time(rows.size(), {0, 0, 0, 0});
  std::vector<double> achieved_num(rows.size(), 0);
  std::map<StrId, MovedKernel> moved;
  // Communication kernels are compared by their part after the last member arrived (the wait before
  // is the other ranks', not the kernel's).
  std::unordered_map<OpId, const Collective*> coll;
  for (const Collective& c : t.collectives)
    for (OpId k : c.members) coll[k] = &c;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (!is_device_op(o.kind) || (only && (i >= only->size() || !(*only)[i]))) continue;
    std::size_t c = o.kind == OpKind::Kernel   ? static_cast<std::size_t>(m.work()[i].cls)
                    : o.kind == OpKind::Memcpy ? static_cast<std::size_t>(kKernelClassCount)
                                               : static_cast<std::size_t>(kKernelClassCount + 1);
    ClassRow& r = rows[c];
    r.cls = c < kKernelClassCount ? to_string(static_cast<KernelClass>(c)) : c == kKernelClassCount ? "memcpy" : "memset";
    r.kernels++;
    TimeNs meas = o.duration(), pred = m.device_time(i);
    const bool comm = o.kind == OpKind::Kernel && (o.flags & Op::kFlagNccl);
    if (comm) {
      if (const TimeNs* in = rep.graph->intrinsic.find(i)) meas = *in;
      pred = m.duration(i, *rep.graph);
    }
    r.measured_ns += meas;
    r.predicted_ns += pred;
    Bound b = Bound::Memory;
    if (o.kind == OpKind::Kernel) {
      const KernelWork& w = m.work()[i];
      r.with_shapes += w.from_shapes || w.from_geometry;
      r.flops += w.flops;
      r.bytes += w.bytes;
      KernelEstimate src = model_kernel(t, i, w, m.source());
      KernelEstimate tgt = model_kernel(t, i, w, m.target());
      if (auto it = coll.find(i); comm && it != coll.end()) {
        const Collective& cc = *it->second;
        src.time_ns = collective_time(m.source(), cc.kind, cc.bytes, cc.ranks()).time_ns;
      }
      r.model_source_ns += src.time_ns;
      b = (o.flags & Op::kFlagNccl) ? Bound::Latency : tgt.bound;
      if (meas > 0) achieved_num[c] += roof_ns(w, m.source().gpu);  // the one roofline aggregation (kernel_roofline.hpp)
    } else {
      r.model_source_ns += model_device_op(t, i, KernelWork{}, m.source());
    }
    bound_time[c][static_cast<std::size_t>(b)] += pred;
    MovedKernel& mk = moved[o.name];
    mk.name = t.name(o);
    mk.count++;
    mk.measured_ns += meas;
    mk.predicted_ns += pred;
    mk.bound = to_string(b);
  }
  for (std::size_t c = 0; c < rows.size(); ++c) {
    if (rows[c].kernels == 0) continue;
    auto it = std::max_element(bound_time[c].begin(), bound_time[c].end());
    rows[c].bound = to_string(static_cast<Bound>(it - bound_time[c].begin()));
    rows[c].achieved_fraction = rows[c].measured_ns ? achieved_num[c] / static_cast<double>(rows[c].measured_ns) : 0;
    rep.classes.push_back(rows[c]);
  }
  std::sort(rep.classes.begin(), rep.classes.end(), [](auto& a, auto& b) { return a.measured_ns > b.measured_ns; });
  const GpuSpec& s = m.source().gpu;
  const GpuSpec& g = m.target().gpu;
  for (auto& [id, mk] : moved) {
    char why[200];
    if (mk.bound == "memory")
      std::snprintf(why, sizeof why, "memory-bound: %s -> %s", format_bandwidth(s.memory_bandwidth * s.memory_efficiency).c_str(),
                    format_bandwidth(g.memory_bandwidth * g.memory_efficiency).c_str());
    else if (mk.bound == "compute")
      std::snprintf(why, sizeof why, "compute-bound: the peak of its precision and unit, %u -> %u SMs", s.sm_count, g.sm_count);
    else
      std::snprintf(why, sizeof why, "latency-bound or communication: fixed cost");
    mk.reason = why;
    rep.moved.push_back(mk);
  }
  std::sort(rep.moved.begin(), rep.moved.end(),
            [](auto& a, auto& b) { return std::llabs(a.predicted_ns - a.measured_ns) > std::llabs(b.predicted_ns - b.measured_ns); });
}

}  // namespace

double peak_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

namespace {

// The cost model --durations and --hw choose (measured, or the models retargeted to a GPU).
void choose_model(const Trace& t, const ReplayOptions& opt, ReplayReport& rep) {
  DurationMode mode = DurationMode::Measured;
  if (opt.durations == "model")
    mode = DurationMode::Model;
  else if (opt.durations == "hybrid")
    mode = DurationMode::Hybrid;
  else if (opt.durations != "measured")
    throw InputError("--durations " + opt.durations + ": expected measured, model or hybrid");
  if (!opt.hw.empty() && !opt.durations_explicit) mode = DurationMode::Hybrid;
  if (mode == DurationMode::Measured && !opt.hw.empty())
    throw InputError("--hw " + opt.hw + " with --durations measured: measured durations cannot move to other hardware");
  if (mode == DurationMode::Measured) {
    rep.model_impl = std::make_unique<MeasuredCostModel>();
  } else {
    HwSpec src = source_spec(t, opt.source_hw);
    HwSpec tgt = opt.hw.empty() ? src : load_target_hw(opt.hw);
    rep.source_hw = src.name;
    rep.target_hw = tgt.name;
    auto rt = std::make_unique<RetargetCostModel>(t, std::move(src), std::move(tgt), mode);
    rep.assumptions = rt->assumptions();
    rep.model_impl = std::move(rt);
  }
  rep.model = rep.model_impl->name();
}

// Span, overlap and per-rank figures of one schedule (measured or simulated); one rank's figures
// are the whole run's, filled in by one_rank_stats.
struct SpanStats {
  Span span;
  Overlap overlap;
  std::vector<RankStats> ranks;
};
SpanStats span_stats(const Trace& t, const Graph& g, const Schedule& s, std::optional<Span> span = std::nullopt) {
  SpanStats st;
  st.span = span ? *span : device_span(g, s);
  st.overlap = compute_overlap(g, s);
  if (t.processes.size() > 1) st.ranks = rank_stats(g, s);
  return st;
}
void one_rank_stats(const Trace& t, const SpanStats& st, std::vector<RankStats>& ranks) {
  if (t.processes.size() > 1 || t.device_op_count() == 0) return;
  RankStats r;
  r.rank = t.processes.empty() || t.processes[0].rank == kNone ? 0 : t.processes[0].rank;
  r.span = st.span;
  r.overlap = st.overlap;
  ranks = {r};
}

// The collective model against the measured last arrivals.
void check_collectives(const Trace& t, const ReplayOptions& opt, ReplayReport& rep) {
  std::optional<HwSpec> coll_spec;
  if (!t.collectives.empty()) {
    try {
      coll_spec = source_spec(t, opt.source_hw);
    } catch (const InputError&) {}  // a GPU no spec names: no model to compare with (measured replay needs none)
  }
  if (coll_spec) {  // the collective model against the measured last arrivals
    const HwSpec& spec = *coll_spec;
    rep.collective_spec = spec.name;
    for (std::size_t c = 0; c < t.collectives.size(); ++c) {
      const Collective& col = t.collectives[c];
      if (col.members.size() < 2 || col.bytes == 0 || col.kind == CollKind::Unknown) continue;
      OpId last = col.members[0];
      for (OpId m : col.members)
        if (t.ops[m].start > t.ops[last].start) last = m;
      rep.collective_checks.push_back({c, t.ops[last].duration(), collective_time(spec, col.kind, col.bytes, col.ranks()).time_ns});
    }
  }
}

// Device ops slowed by concurrent ones, by name.
void sharing_table(const Trace& t, const Graph& g, ReplayReport& rep) {
  // Per name: trace nodes are gathered by their name's string id first (a shared run has millions
  // of shared kernels and a handful of names), then merged by name with synthetic ones.
  struct Acc {
    SharedRow row;
    std::array<std::size_t, 4> why{};  // by binding: 0 none, 1 SMs, 2 HBM, 3 PCIe
  };
  std::unordered_map<std::uint32_t, Acc> by_id;
  std::map<std::string, Acc> by_name;
  for (NodeId n = 0; n < rep.sim.shared.size(); ++n) {
    if (!rep.sim.shared[n]) continue;
    TimeNs took = rep.sim.end[n] - rep.sim.start[n], alone = node_duration(*rep.model_impl, g, n);
    if (took <= alone) continue;
    const std::uint32_t id = g.name_id(n);
    Acc& a = id != kNone ? by_id[id] : by_name[g.name(n)];
    a.row.count++;
    a.row.alone_ns += alone;
    a.row.shared_ns += took;
    a.why[std::min<std::size_t>(rep.sim.shared[n], 3)]++;
    rep.lost_to_sharing_ns += took - alone;
  }
  for (auto& [id, a] : by_id) {
    Acc& m = by_name[t.strings.str(id)];
    m.row.count += a.row.count;
    m.row.alone_ns += a.row.alone_ns;
    m.row.shared_ns += a.row.shared_ns;
    for (std::size_t k = 0; k < 4; ++k) m.why[k] += a.why[k];
  }
  rep.drained_kernels = g.sharing_drain.size();
  for (auto& [name, a] : by_name) {
    const auto& w = a.why;
    a.row.name = name;
    a.row.bound = w[3] > std::max(w[1], w[2]) ? "PCIe" : w[2] > w[1] ? "HBM" : "SMs";
    rep.shared.push_back(a.row);
  }
  std::sort(rep.shared.begin(), rep.shared.end(),
            [](const SharedRow& a, const SharedRow& b) { return a.shared_ns - a.alone_ns > b.shared_ns - b.alone_ns; });
}

// The ranges --range selects: spans, critical paths and what sharing cost them (slack comes later).
void range_results(const Graph& g, const ReplayOptions& opt, ReplayReport& rep) {
  for (RangeSpan& rs : range_spans(g, rep.sim, range_regex(*opt.range_regex))) {
    RangeResult rr;
    rr.index = rs.index;
    rr.name = rs.name;
    rr.start_ns = rs.start_ns;
    rr.rank = rs.rank;
    if (!rs.nodes.empty()) {
      rr.measured_span_ns = rs.measured.length();
      rr.measured_start_ns = rs.measured.begin;
      rr.simulated_span_ns = rs.simulated.length();
      rr.critical_path = range_critical_path(rep.sim, rs);
      for (NodeId o : rs.nodes) {
        rr.slack.emplace_back(o, 0);
        if (o < rep.sim.shared.size() && rep.sim.shared[o])
          rr.lost_to_sharing_ns += std::max<TimeNs>(0, rep.sim.end[o] - rep.sim.start[o] - node_duration(*rep.model_impl, g, o));
      }
    }
    rep.ranges.push_back(std::move(rr));
  }
}

}  // namespace

ReplayReport run_replay(const Trace& t, const ReplayOptions& opt) {
  ReplayReport rep;
  rep.trace = &t;
  auto t0 = std::chrono::steady_clock::now();
  // Progress on stderr: a line per phase, once the replay has taken a second (large traces).
  Progress progress("replay of " + t.source, t.ops.size() > 100000);
  rep.graph = std::make_unique<Graph>(build_graph(t));
  progress.phase("graph built (" + std::to_string(rep.graph->num_edges()) + " edges)");
  if (opt.sharing && t.measured) {  // on the trace's GPU; a GPU no preset matches replays without sharing
    try {
      const HwSpec src = source_spec(t, opt.source_hw);
      if (src.from_trace.empty()) enable_sharing(*rep.graph, src);  // rates from device properties: not calibrated enough to share
    } catch (const InputError&) {}
  }
  rep.graph_s = secs_since(t0);
  rep.graph_rss_mb = peak_rss_mb();
  choose_model(t, opt, rep);
  t0 = std::chrono::steady_clock::now();
  progress.phase("simulating");
  rep.sim = simulate(*rep.graph, *rep.model_impl);
  progress.phase("analysing the schedule");
  if (auto* rt = dynamic_cast<RetargetCostModel*>(rep.model_impl.get())) class_table(t, *rt, opt.class_ops, rep);
  rep.replay_s = secs_since(t0);
  rep.replay_rss_mb = peak_rss_mb();
  t0 = std::chrono::steady_clock::now();
  const Graph& g = *rep.graph;
  Schedule simulated = sim_schedule(rep.sim);
  rep.simulated = device_span(g, simulated);
  // The simulated schedule's overlap, waits and sharing table on a second thread; its critical path,
  // the measured schedule's figures and the collective model against the measured arrivals on
  // this one.
  SpanStats simulated_stats;
  auto simulated_side = std::async(std::launch::async, [&] {
    simulated_stats = span_stats(t, g, simulated, rep.simulated);
    rep.waits = collective_waits(g, simulated);
    sharing_table(t, g, rep);
  });
  // The run's critical path over its GPU span: the walk stops at host work that ended before the
  // first device op started (process start-up, allocations).
  const TimeNs gpu_begin = rep.simulated.begin;
  SpanStats measured_stats;
  try {
    rep.critical_path = critical_path(rep.sim, last_device_op(g, simulated), [&](OpId o) { return rep.sim.end[o] > gpu_begin; });
    measured_stats = span_stats(t, g, measured_schedule(t));
    check_collectives(t, opt, rep);
  } catch (...) {
    simulated_side.wait();
    throw;
  }
  simulated_side.get();
  rep.measured = measured_stats.span;
  rep.measured_overlap = measured_stats.overlap;
  rep.measured_ranks = std::move(measured_stats.ranks);
  rep.simulated_overlap = simulated_stats.overlap;
  rep.simulated_ranks = std::move(simulated_stats.ranks);
  one_rank_stats(t, measured_stats, rep.measured_ranks);
  one_rank_stats(t, simulated_stats, rep.simulated_ranks);
  if (opt.range_regex) range_results(g, opt, rep);
  // The paths are walked and the sharing tables read (every duration the report needs is taken):
  // the bindings, the calibrated sharing losses and drains and the per-node sharing flags can go
  // before slack takes its memory (the report keeps the graph for names, kinds and counts).
  std::vector<std::uint32_t>().swap(rep.graph->sharing_lost);  // (`= {}` would keep the capacity)
  std::vector<std::pair<NodeId, float>>().swap(rep.graph->sharing_drain);
  std::vector<std::uint8_t>().swap(rep.sim.shared);
  rep.slack = compute_slack(*rep.graph, rep.sim, std::move(rep.sim.start_src));
  rep.sim.start_src = {};
  for (auto& rr : rep.ranges)
    for (auto& [o, sl] : rr.slack) sl = rep.slack[o];
  rep.analysis_s = secs_since(t0);
  rep.analysis_rss_mb = peak_rss_mb();
  return rep;
}

std::string no_device_work_line(const Trace& t, const std::string& what) {
  std::size_t device = 0, timed = 0, api = 0;
  for (const Op& o : t.ops) {
    if (o.kind == OpKind::Api) {
      ++api;
      continue;
    }
    ++device;
    timed += o.duration() > 0;
  }
  if (timed > 0) return "";
  const std::string why = device == 0 ? std::to_string(api) + (api == 1 ? " host call" : " host calls") + ", no kernel, copy or memset"
                                      : std::to_string(device) + " device ops, none with a duration (an execution trace without timings?)";
  return "no device work in this trace: nothing to " + what + " (" + why + ")";
}

}  // namespace bneck
