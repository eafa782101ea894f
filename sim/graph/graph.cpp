#include "sim/graph/graph.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <numeric>

#include "sim/base/error.hpp"
#include "sim/base/stats.hpp"

namespace bneck {

namespace {

// Per-lane op lists in FIFO order (trace ops are sorted by start), with the submission time of
// each device op (its launching call's start) for "last op submitted before T" queries.
struct LaneIndex {
  std::vector<std::uint32_t> offset;  // lanes + 1
  std::vector<OpId> ops;
  std::vector<TimeNs> submit;  // parallel to ops

  void build(const Trace& t) {
    offset.assign(t.lanes.size() + 1, 0);
    for (const Op& o : t.ops) offset[o.lane + 1]++;
    for (std::size_t i = 1; i < offset.size(); ++i) offset[i] += offset[i - 1];
    ops.resize(t.ops.size());
    submit.resize(t.ops.size());
    std::vector<std::uint32_t> fill(offset.begin(), offset.end() - 1);
    for (OpId i = 0; i < t.ops.size(); ++i) {
      const Op& o = t.ops[i];
      auto pos = fill[o.lane]++;
      ops[pos] = i;
      submit[pos] = o.link != kNone ? t.ops[o.link].start : o.start;
    }
    // Submission times within a lane should be non-decreasing; make them so for the search.
    for (std::size_t l = 0; l + 1 < offset.size(); ++l)
      for (auto p = offset[l] + 1; p < offset[l + 1]; ++p) submit[p] = std::max(submit[p], submit[p - 1]);
  }
  // Last op on `lane` that ended at or before `t` (ops of a stream end in order), or kNone.
  OpId last_ended_by(const Trace& tr, LaneId lane, TimeNs t) const {
    auto b = ops.begin() + offset[lane], e = ops.begin() + offset[lane + 1];
    auto it = std::upper_bound(b, e, t, [&](TimeNs v, OpId o) { return v < tr.ops[o].start; });
    for (int k = 0; it != b && k < 8; ++k) {
      --it;
      if (tr.ops[*it].end() <= t) return *it;
    }
    return kNone;
  }
  // Last op on `lane` submitted strictly before `t`, or kNone.
  OpId last_before(LaneId lane, TimeNs t) const {
    auto b = submit.begin() + offset[lane], e = submit.begin() + offset[lane + 1];
    auto it = std::lower_bound(b, e, t);
    if (it == b) return kNone;
    return ops[static_cast<std::size_t>(it - submit.begin()) - 1];
  }
};

enum CopyClass { kH2D = 0, kD2H = 1, kD2D = 2, kCopyClasses = 3 };
int copy_class(const Trace& t, const Op& o) {
  if (o.kind != OpKind::Memcpy) return -1;
  const CopyInfo* ci = t.copy(o);
  if (!ci) return kD2D;
  switch (ci->copy_kind) {
    case MemcpyKind::HtoD:
    case MemcpyKind::HtoA:
    case MemcpyKind::UvmHtoD: return kH2D;
    case MemcpyKind::DtoH:
    case MemcpyKind::AtoH:
    case MemcpyKind::UvmDtoH: return kD2H;
    default: return kD2D;
  }
}

struct PendingEdge {
  OpId src;
  EdgeType type;
  DepType attach;
  TimeNs explicit_delay;
};

class Builder {
 public:
  Builder(const Trace& t, const GraphOptions& opt) : t_(t), calibrate_(opt.calibrate && t.measured) {}

  Graph run() {
    Graph g;
    g.trace = &t_;
    lanes_.build(t_);
    // Processes with cudaStreamWaitEvent calls whose event the trace does not say (older Kineto
    // traces): their cross-stream waits are inferred (see infer_wait).
    for (const Op& o : t_.ops)
      if (o.api_class() == ApiClass::StreamWait && !(t_.api(o) && t_.api(o)->has_event && t_.api(o)->stream != kNone)) {
        if (infer_waits_.empty()) infer_waits_.assign(t_.processes.size() + 1, 0);
        infer_waits_[t_.lanes[o.lane].process] = 1;
      }
    if (!infer_waits_.empty()) {
      device_streams_.resize(t_.devices.size() + 1);
      for (LaneId l = 0; l < t_.lanes.size(); ++l)
        if (t_.lanes[l].kind == LaneKind::Stream)
          device_streams_[std::min<std::size_t>(t_.lanes[l].device, t_.devices.size())].push_back(l);
    }
    for (std::uint32_t c = 0; c < t_.collectives.size(); ++c) {
      const Collective& col = t_.collectives[c];
      if (col.members.size() < 2) continue;
      TimeNs last_start = 0, first_end = std::numeric_limits<TimeNs>::max();
      for (OpId m : col.members) {
        last_start = std::max(last_start, t_.ops[m].start);
        first_end = std::min(first_end, t_.ops[m].end());
      }
      if (t_.measured && last_start > first_end) {  // some member ended before another began
        auto& a = anomalies_["graph: collective whose members do not overlap in time (clock skew or a mismatch): not joined"];
        if (a.count++ == 0) {
          a.severity = Severity::Warning;
          a.example = t_.name(t_.ops[col.members[0]]) + " #" + std::to_string(col.seq);
        }
        continue;
      }
      for (OpId m : col.members) member_of_[m] = {c, last_start};
    }
    for (const auto& d : t_.deps) explicit_in_[d.to].push_back(d);
    // By name (-1: not looked at yet): a kernel that writes the host a count it polls for.
    std::vector<std::int8_t> signals(t_.measured ? t_.strings.size() : 0, -1);
    for (OpId i = 0; i < t_.ops.size(); ++i) {
      const Op& o = t_.ops[i];
      if (o.link != kNone && t_.ops[o.link].api_class() == ApiClass::MemcpySync) launched_[o.link].push_back(i);
      if (o.kind == OpKind::Kernel && o.link != kNone && o.name < signals.size()) {
        std::int8_t& s = signals[o.name];
        if (s < 0) s = t_.strings.str(o.name).find("notify_dispatch") != std::string::npos;
        if (s) signal_launch_[o.link] = i;
      }
    }
    std::vector<std::uint32_t> sources, targets;
    std::vector<EdgeProps> props;
    sources.reserve(t_.ops.size() * 2);
    targets.reserve(t_.ops.size() * 2);
    props.reserve(t_.ops.size() * 2);
    std::vector<OpId> prev_on_lane(t_.lanes.size(), kNone);
    std::vector<PendingEdge> in;
    for (OpId i = 0; i < t_.ops.size(); ++i) {
      const Op& o = t_.ops[i];
      in.clear();
      OpId prev = t_.lanes[o.lane].fifo ? prev_on_lane[o.lane] : kNone;
      prev_on_lane[o.lane] = i;
      if (o.kind == OpKind::Api) {
        if (prev != kNone) in.push_back({prev, EdgeType::HostOrder, DepType::EndToStart, 0});
        if (calibrate_) wake_edge(i, o, prev, in);
        host_edges(i, o, in);
        polled_signal_edge(o, prev, in);
      } else {
        if (o.link != kNone) {
          EdgeType lt = t_.ops[o.link].api_class() == ApiClass::GraphLaunch ? EdgeType::GraphLaunch : EdgeType::Launch;
          in.push_back({o.link, lt, DepType::StartToStart, 0});
        }
        if (prev != kNone) in.push_back({prev, EdgeType::StreamOrder, DepType::EndToStart, 0});
        attach_waits(i, o, in);
        if (calibrate_ && !infer_waits_.empty() && infer_waits_[t_.lanes[o.lane].process]) infer_wait(i, o, prev, in, g);
        collective_edges(i, o, in, g);
      }
      if (auto it = explicit_in_.find(i); it != explicit_in_.end())
        for (const auto& d : it->second) in.push_back({d.from, EdgeType::Explicit, d.type, d.delay});
      if (calibrate_) reconcile(o, in);
      std::size_t first = props.size();
      for (const auto& e : in) {
        sources.push_back(e.src);
        targets.push_back(i);
        props.emplace_back(e.explicit_delay, e.type, e.attach);
        g.stats.edges_by_type[static_cast<int>(e.type)]++;
      }
      if (calibrate_)
        calibrate(i, o, in, props.data() + first, g);
      else
        nominal_only(in, props.data() + first);
    }
    if (calibrate_) {
      learn_nominals();
      finish_calibration(targets, props);
    }
    // The lane index goes before the CSR keeps these vectors' storage (no spare capacity), and the
    // node table comes after: the peak holds one of them.
    lanes_ = LaneIndex{};
    targets.shrink_to_fit();
    props.shrink_to_fit();
    g.csr = CsrGraph(boost::construct_inplace_from_sources_and_targets, sources, targets, props, static_cast<std::uint32_t>(t_.ops.size()));
    std::vector<std::uint32_t>().swap(sources);
    init_nodes(g);
    build_resources(g);
    g.anomalies = std::move(anomalies_);
    g.stats.nominal_stream_gap_ns = stream_gap_.empty() ? 0 : *std::min_element(stream_gap_.begin(), stream_gap_.end());
    return g;
  }

 private:
  // The graph's lanes, devices and processes are the trace's; node i is trace op i.
  void init_nodes(Graph& g) {
    g.lanes.resize(t_.lanes.size());
    for (LaneId l = 0; l < t_.lanes.size(); ++l) {
      const Lane& ln = t_.lanes[l];
      g.lanes[l].kind = ln.kind;
      g.lanes[l].device = ln.device;
      g.lanes[l].process = ln.process;
      g.lanes[l].fifo = ln.fifo;
    }
    g.num_devices = static_cast<std::uint32_t>(t_.devices.size());
    g.num_processes = static_cast<std::uint32_t>(t_.processes.size());
  }

  // ---- edges into host calls -------------------------------------------------------------
  void host_edges(OpId i, const Op& o, std::vector<PendingEdge>& in) {
    const ApiInfo* info = t_.api(o);
    auto sync_from = [&](OpId src) {
      if (src != kNone) in.push_back({src, EdgeType::HostSync, DepType::EndToEnd, 0});
    };
    auto sync_streams = [&](std::uint32_t device) {
      std::uint32_t proc = t_.lanes[o.lane].process;
      for (LaneId l = 0; l < t_.lanes.size(); ++l) {
        const Lane& ln = t_.lanes[l];
        if (ln.kind != LaneKind::Stream || ln.process != proc) continue;
        if (device != kNone && ln.device != device) continue;
        sync_from(lanes_.last_before(l, o.start));
      }
    };
    switch (o.api_class()) {
      case ApiClass::EventRecord:
        if (info && info->has_event && info->stream != kNone)
          last_record_[event_key(o, info->event)] = lanes_.last_before(info->stream, o.start);
        else
          missing("event record without its stream or event", o);
        break;
      case ApiClass::StreamWait:
        if (info && info->has_event && info->stream != kNone) {
          auto it = last_record_.find(event_key(o, info->event));
          if (it != last_record_.end() && it->second != kNone) waits_[info->stream].push_back({o.start, it->second});
        } else {
          missing("stream wait without its stream or event", o);
        }
        break;
      case ApiClass::StreamSync:
        if (info && info->stream != kNone)
          sync_from(lanes_.last_before(info->stream, o.start));
        else {
          missing("stream synchronize without its stream: synchronizing every stream", o);
          sync_streams(kNone);
        }
        break;
      case ApiClass::EventSync:
        if (info && info->has_event) {
          auto it = last_record_.find(event_key(o, info->event));
          if (it != last_record_.end()) sync_from(it->second);
        } else {
          missing("event synchronize without its event", o);
        }
        break;
      case ApiClass::DeviceSync: sync_streams(info && info->device != kNone ? info->device : kNone); break;
      default: break;
    }
    // A blocking copy returns when its own device op is done.
    if (o.api_class() == ApiClass::MemcpySync) {
      auto it = launched_.find(i);
      if (it != launched_.end())
        for (OpId d : it->second) sync_from(d);
    }
  }

  // See EdgeType::ThreadWake. Ops arrive in start order; per thread the last two API calls are
  // kept, the latest of them that ended before `o` started is that thread's candidate.
  static constexpr TimeNs kWakeGap = 20 * kNsPerUs;
  void wake_edge(OpId i, const Op& o, OpId prev, std::vector<PendingEdge>& in) {
    std::uint32_t proc = t_.lanes[o.lane].process;
    auto& threads = recent_[proc];
    TimeNs idle_from = prev == kNone ? std::numeric_limits<TimeNs>::min() : t_.ops[prev].end();
    if (prev == kNone || o.start - idle_from > kWakeGap) {
      OpId best = kNone;
      for (auto& [lane, last2] : threads) {
        if (lane == o.lane) continue;
        for (OpId c : {last2.older, last2.newer}) {
          if (c == kNone) continue;
          TimeNs e = t_.ops[c].end();
          if (e <= o.start && e > idle_from && (best == kNone || e > t_.ops[best].end())) best = c;
        }
      }
      if (best != kNone) in.push_back({best, EdgeType::ThreadWake, DepType::EndToStart, 0});
    }
    auto& mine = threads[o.lane];
    mine.older = mine.newer;
    mine.newer = i;
  }

  // A kernel that writes the host a count it polls for in mapped memory, with no runtime call to
  // wait on: DeepEP's notify_dispatch (the CPU spins until the number of tokens each rank sends
  // arrives, then allocates the receive buffers and launches the dispatch). The call after such a
  // launch that came after an idle gap starts when that kernel ends (HostSync, end -> start), or,
  // where it started before the kernel ended (the count arrives before the kernel's last barrier
  // ends), the measured time after the kernel started (start -> start, as reconcile makes it).
  void polled_signal_edge(const Op& o, OpId prev, std::vector<PendingEdge>& in) {
    if (prev == kNone || signal_launch_.empty()) return;
    auto it = signal_launch_.find(prev);
    if (it == signal_launch_.end()) return;
    const Op& k = t_.ops[it->second];
    if (o.start - t_.ops[prev].end() > kWakeGap && o.start >= k.start)
      in.push_back({it->second, EdgeType::HostSync, DepType::EndToStart, 0});
  }

  // Event ids are per process.
  std::uint64_t event_key(const Op& o, std::uint64_t ev) const { return (static_cast<std::uint64_t>(t_.lanes[o.lane].process) << 48) ^ ev; }

  void missing(const char* what, const Op& o) {
    auto& a = anomalies_[std::string("graph: ") + what];
    if (a.count++ == 0) {
      a.severity = Severity::Warning;
      a.example = t_.name(o) + " at " + std::to_string(o.start) + " ns";
    }
  }

  // An unresolved stream wait left a device op that started well after its launch and its stream
  // predecessor allowed: if an op on another stream of its device ended within kInferWindow before
  // it started, later than those two, it is taken as the event the stream waited for; so is the
  // last one to end before it, further back, where the op was held past its launch's return.
  static constexpr TimeNs kInferWindow = 20 * kNsPerUs;
  void infer_wait(OpId i, const Op& o, OpId prev, std::vector<PendingEdge>& in, Graph& g) {
    TimeNs allowed = o.link != kNone ? t_.ops[o.link].start : std::numeric_limits<TimeNs>::min();
    if (prev != kNone) allowed = std::max(allowed, t_.ops[prev].end());
    for (const auto& e : in)
      if (e.type == EdgeType::Event) allowed = std::max(allowed, t_.ops[e.src].end());
    std::size_t dev = std::min<std::size_t>(t_.lanes[o.lane].device, t_.devices.size());
    OpId best = kNone;
    for (LaneId l : device_streams_[dev]) {
      if (l == o.lane) continue;
      OpId c = lanes_.last_ended_by(t_, l, o.start);
      if (c != kNone && (best == kNone || t_.ops[c].end() > t_.ops[best].end())) best = c;
    }
    const TimeNs e = best == kNone ? std::numeric_limits<TimeNs>::min() : t_.ops[best].end();
    // Held past its launch call's return (not a slow launch: a lazy module load inside the call)
    // and its stream predecessor's end by more than the window: it waited for something unseen.
    const TimeNs returned = o.link != kNone ? std::max(allowed, t_.ops[o.link].end()) : allowed;
    const bool held = returned != std::numeric_limits<TimeNs>::min() && o.start - returned > kInferWindow;
    if (best == kNone || e <= allowed) {
      if (held) g.unknown_wait.push_back(i);
      return;
    }
    // Launched long before and released later than the window after another stream's op ended:
    // a launched kernel waits only for the device (an event, or the SMs another kernel holds), so
    // that op is still the likeliest cause, at its measured gap. Kept on the launch instead, the
    // wait (milliseconds where the host ran ahead) became a floor no faster kernel could move:
    // cuDNN's FFT convolutions on a second stream in a GPU-bound ResNet-50 profile held 6 ms a step.
    // (A collective held past its launch waits for its peers on other ranks, not for this device.)
    if (o.start - e > kInferWindow && (!held || (o.flags & Op::kFlagNccl))) return;
    in.push_back({best, EdgeType::Event, DepType::EndToStart, 0});
    g.stats.inferred_waits++;
  }

  // A collective member ends only after every other member arrived (started) and then ran its own
  // part: start->end edges from the other members. Its intrinsic duration is the part after the
  // last arrival (measured: its end minus the latest member start); the wait before is the engine's.
  void collective_edges(OpId i, const Op& o, std::vector<PendingEdge>& in, Graph& g) {
    auto it = member_of_.find(i);
    if (it == member_of_.end()) return;
    const Collective& c = t_.collectives[it->second.first];
    const TimeNs last = it->second.second;  // the last member's arrival
    if (t_.measured) g.intrinsic.set(i, std::clamp<TimeNs>(o.end() - last, 0, o.duration()));
    for (OpId m : c.members)
      if (m != i) in.push_back({m, EdgeType::Collective, DepType::StartToEnd, 0});
  }

  // Waits registered on the op's stream before the op was submitted become event edges.
  void attach_waits(OpId i, const Op& o, std::vector<PendingEdge>& in) {
    auto it = waits_.find(o.lane);
    if (it == waits_.end() || it->second.empty()) return;
    TimeNs submit = o.link != kNone ? t_.ops[o.link].start : o.start;
    auto& q = it->second;
    std::size_t k = 0;
    while (k < q.size() && q[k].first < submit) {
      if (q[k].second != i) in.push_back({q[k].second, EdgeType::Event, DepType::EndToStart, 0});
      ++k;
    }
    q.erase(q.begin(), q.begin() + static_cast<long>(k));
  }

  // ---- nominal delays (lower bounds) learned from the trace --------------------------------
  static constexpr TimeNs kFallbackLaunchLatency = 2 * kNsPerUs;  // cudaLaunchKernel to start, idle GPU

  // Nominal delay per (edge type, device, op category), learned from binding edges.
  static std::uint64_t nominal_key(EdgeType ty, std::uint32_t dev, int cat) {
    return (static_cast<std::uint64_t>(ty) << 40) | (static_cast<std::uint64_t>(dev) << 8) | static_cast<std::uint64_t>(cat);
  }
  // A deterministic reservoir of at most kReservoir samples per key keeps memory flat.
  static constexpr std::size_t kReservoir = 1 << 16;
  void sample(std::uint64_t key, TimeNs v) {
    // A trace's keys are a handful (edge types, devices, categories) that alternate: the maps are
    // looked up once a key, then remembered (their entries' addresses are stable).
    Recent* r = std::find_if(recent_samples_.begin(), recent_samples_.end(), [&](const Recent& x) { return x.samples && x.key == key; });
    if (r == recent_samples_.end()) {
      r = &recent_samples_[recent_next_++ % recent_samples_.size()];
      *r = {key, &samples_[key], &seen_[key]};
    }
    auto& s = *r->samples;
    auto& seen = *r->seen;
    ++seen;
    if (s.size() < kReservoir) {
      s.push_back(v);
      return;
    }
    rng_ = rng_ * 6364136223846793005ull + 1442695040888963407ull;
    std::uint64_t j = (rng_ >> 11) % seen;
    if (j < kReservoir) s[j] = v;
  }
  void learn_nominals() {
    for (auto& [k, v] : samples_) {
      TimeNs n = std::max<TimeNs>(0, quantile(std::move(v), 0.01));
      nominals_[k] = n;
      if ((k >> 40) == static_cast<std::uint64_t>(EdgeType::StreamOrder)) stream_gap_.push_back(n);
    }
    samples_.clear();
    recent_samples_.fill(Recent{});
  }

  int launch_category(const Op& o) const {
    if (o.kind != OpKind::Kernel) return 2;
    return o.link != kNone && t_.ops[o.link].api_class() == ApiClass::GraphLaunch ? 1 : 0;
  }

  TimeNs nominal(const Op& dst, EdgeType ty, TimeNs explicit_delay) const {
    if (ty == EdgeType::Explicit) return explicit_delay;
    if (ty == EdgeType::HostSync || ty == EdgeType::Event) return 0;
    std::uint32_t dev = t_.lanes[dst.lane].device;
    auto it = nominals_.find(nominal_key(ty, dev, launch_category(dst)));
    if (it != nominals_.end()) return it->second;
    return ty == EdgeType::Launch || ty == EdgeType::GraphLaunch ? kFallbackLaunchLatency : 0;
  }

  static TimeNs endpoint(const Op& o, bool end) { return end ? o.end() : o.start; }

  // Measured times can contradict an edge: a call that returned before the op it would wait for
  // ended (cudaMemset on device memory is asynchronous) did not wait, so the end->end edge goes;
  // an op that started before its FIFO predecessor ended (graph branches reported on one stream,
  // timer noise) keeps only the order of starts.
  void reconcile(const Op& o, std::vector<PendingEdge>& in) {
    std::size_t w = 0;
    for (std::size_t k = 0; k < in.size(); ++k) {
      PendingEdge e = in[k];
      const Op& s = t_.ops[e.src];
      if (e.attach == DepType::EndToEnd && o.end() < s.end()) {
        note_info("sync call returned before the op it waits for ended: dependency dropped", o);
        continue;
      }
      if (e.attach == DepType::EndToStart && o.start < s.end() && e.type != EdgeType::Explicit) {
        e.attach = DepType::StartToStart;
        if (o.start < s.start) {
          note_info("op starts before its predecessor: dependency dropped", o);
          continue;
        }
      }
      in[w++] = e;
    }
    in.resize(w);
  }

  void note_info(const char* what, const Op& o) {
    auto& a = anomalies_[std::string("graph: ") + what];
    if (a.count++ == 0) {
      a.severity = Severity::Info;
      a.example = t_.name(o) + " at " + std::to_string(o.start) + " ns";
    }
  }

  // Pass 1 (per op, see graph.hpp): each edge's delay is set to the observed gap, the binding
  // in-edges are marked and their gaps sampled for the nominals.
  static int tie_rank(EdgeType t) {
    switch (t) {
      case EdgeType::StreamOrder: return 0;
      case EdgeType::Event: return 1;
      case EdgeType::Explicit: return 2;
      case EdgeType::HostSync: return 3;
      case EdgeType::Launch:
      case EdgeType::GraphLaunch: return 4;
      case EdgeType::HostOrder: return 5;
      case EdgeType::ThreadWake: return 6;
      case EdgeType::Collective: return 7;
      case EdgeType::CopyEngine: return 8;
    }
    return 7;
  }
  void calibrate(OpId i, const Op& o, const std::vector<PendingEdge>& in, EdgeProps* props, Graph& g) {
    int bind_start = -1, bind_end = -1;
    TimeNs best_start = 0, best_end = 0;
    for (std::size_t k = 0; k < in.size(); ++k) {
      const PendingEdge& e = in[k];
      if (e.type == EdgeType::Collective) continue;  // delay 0: see collective_edges
      const Op& s = t_.ops[e.src];
      bool to_end = e.attach == DepType::EndToEnd;
      TimeNs src_t = endpoint(s, e.attach != DepType::StartToStart);
      props[k].set_delay(endpoint(o, to_end) - src_t);
      int& bind = to_end ? bind_end : bind_start;
      TimeNs& best = to_end ? best_end : best_start;
      if (bind < 0 || src_t > best || (src_t == best && tie_rank(e.type) < tie_rank(in[static_cast<std::size_t>(bind)].type))) {
        bind = static_cast<int>(k);
        best = src_t;
      }
    }
    if (bind_start >= 0) {
      auto k = static_cast<std::size_t>(bind_start);
      props[k].set_binding(true);
      g.stats.bound_by_type[static_cast<int>(in[k].type)]++;
      sample(nominal_key(in[k].type, t_.lanes[o.lane].device, o.kind == OpKind::Api ? 3 : launch_category(o)), props[k].delay());
    }
    if (bind_end >= 0 && best_end > o.start) {
      // The call was blocked: it returned `wake` after the awaited op ended.
      auto k = static_cast<std::size_t>(bind_end);
      props[k].set_binding(true);
      g.intrinsic.set(i, std::clamp<TimeNs>(props[k].delay(), 0, o.duration()));
      g.stats.blocked_syncs++;
    }
  }

  // Pass 2: non-binding edges get min(nominal, observed).
  void finish_calibration(const std::vector<std::uint32_t>& targets, std::vector<EdgeProps>& props) {
    for (std::size_t k = 0; k < props.size(); ++k) {
      EdgeProps& p = props[k];
      if (p.binding()) continue;
      const Op& dst = t_.ops[targets[k]];
      p.set_delay(std::min(nominal(dst, p.type(), p.delay()), p.delay()));
    }
  }

  void nominal_only(const std::vector<PendingEdge>& in, EdgeProps* props) {
    for (std::size_t k = 0; k < in.size(); ++k) props[k].set_delay(in[k].explicit_delay);
  }

  // ---- copy engines --------------------------------------------------------------------------
  void build_resources(Graph& g) {
    std::vector<std::uint32_t> cap(t_.lanes.size(), 1);
    if (t_.measured) {
      // Peak overlap per lane (ops are sorted by start; a lane's ops overlap only through
      // measurement noise or graph branches reported on one stream).
      std::vector<TimeNs> last_end(t_.lanes.size(), std::numeric_limits<TimeNs>::min());
      std::vector<std::vector<TimeNs>> open(t_.lanes.size());
      for (const Op& o : t_.ops) {
        if (o.start >= last_end[o.lane]) {
          last_end[o.lane] = o.end();
          continue;
        }
        auto& v = open[o.lane];
        v.erase(std::remove_if(v.begin(), v.end(), [&](TimeNs e) { return e <= o.start; }), v.end());
        if (v.empty()) v.push_back(last_end[o.lane]);
        v.push_back(o.end());
        last_end[o.lane] = std::max(last_end[o.lane], o.end());
        cap[o.lane] = std::max<std::uint32_t>(cap[o.lane], static_cast<std::uint32_t>(v.size()));
      }
    }
    for (LaneId l = 0; l < t_.lanes.size(); ++l)
      if (t_.lanes[l].capacity)
        cap[l] = t_.lanes[l].capacity == kNone ? std::numeric_limits<std::uint32_t>::max() / 2 : t_.lanes[l].capacity;
    for (LaneId l = 0; l < t_.lanes.size(); ++l) g.lanes[l].capacity = cap[l];
    std::map<std::pair<std::uint32_t, int>, std::vector<std::pair<TimeNs, int>>> sweeps;
    bool any = false;
    for (const Op& o : t_.ops) {
      int c = copy_class(t_, o);
      if (c < 0) continue;
      any = true;
      auto& v = sweeps[{t_.lanes[o.lane].device, c}];
      v.emplace_back(o.start, 1);
      v.emplace_back(o.end(), -1);
    }
    if (!any) return;
    static const char* const names[] = {"H2D copy engine", "D2H copy engine", "D2D copy engine"};
    std::map<std::pair<std::uint32_t, int>, std::uint16_t> ids;
    for (auto& [k, v] : sweeps) {
      std::sort(v.begin(), v.end());  // ends (-1) before starts (+1) at equal times
      int cur = 0, peak = 1;
      for (auto& [tm, d] : v) {
        cur += d;
        peak = std::max(peak, cur);
      }
      if (!t_.measured) peak = 1;
      std::string dev = k.first < t_.devices.size() ? std::to_string(t_.devices[k.first].id) : "?";
      g.resources.push_back({"gpu" + dev + " " + names[k.second], static_cast<std::uint32_t>(peak)});
      ids[k] = static_cast<std::uint16_t>(g.resources.size() - 1);
    }
    g.trace_resource.assign(t_.ops.size(), kNoResource);
    for (OpId i = 0; i < t_.ops.size(); ++i) {
      int c = copy_class(t_, t_.ops[i]);
      if (c >= 0) g.trace_resource[i] = ids[{t_.lanes[t_.ops[i].lane].device, c}];
    }
  }

  std::vector<std::uint8_t> infer_waits_;                                 // per process: its stream waits lack their events
  std::vector<std::vector<LaneId>> device_streams_;                       // per device: its stream lanes
  std::unordered_map<OpId, std::pair<std::uint32_t, TimeNs>> member_of_;  // collective, its last arrival
  const Trace& t_;
  bool calibrate_;
  LaneIndex lanes_;
  std::unordered_map<std::uint64_t, OpId> last_record_;
  std::unordered_map<LaneId, std::vector<std::pair<TimeNs, OpId>>> waits_;
  std::unordered_map<OpId, std::vector<OpId>> launched_;
  std::unordered_map<OpId, OpId> signal_launch_;  // launch call -> the kernel whose signal its thread polls for
  std::unordered_map<OpId, std::vector<ExplicitDep>> explicit_in_;
  std::unordered_map<std::uint64_t, std::vector<TimeNs>> samples_;
  std::unordered_map<std::uint64_t, std::uint64_t> seen_;
  struct Recent {  // samples_ and seen_ of a key sampled lately
    std::uint64_t key = 0;
    std::vector<TimeNs>* samples = nullptr;
    std::uint64_t* seen = nullptr;
  };
  std::array<Recent, 8> recent_samples_{};
  std::size_t recent_next_ = 0;
  std::uint64_t rng_ = 0x853c49e6748fea9bull;
  std::unordered_map<std::uint64_t, TimeNs> nominals_;
  std::vector<TimeNs> stream_gap_;
  std::vector<TimeNs> obs_;
  std::map<std::string, Anomaly> anomalies_;
  struct LastTwo {
    OpId older = kNone, newer = kNone;
  };
  std::unordered_map<std::uint32_t, std::map<LaneId, LastTwo>> recent_;  // per process, per thread
};

}  // namespace

Graph build_graph(const Trace& trace, const GraphOptions& opt) { return Builder(trace, opt).run(); }

}  // namespace bneck
