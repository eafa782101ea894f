#include "sim/engine/engine.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>

#include "sim/base/error.hpp"
#include "sim/engine/sharing.hpp"

namespace bneck {
namespace {

constexpr TimeNs kMinTime = std::numeric_limits<TimeNs>::min() / 4;
constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();
constexpr TimeNs kHeld = kNever - 1;

enum class EvType : std::uint8_t { Ready = 0, WorkDone = 1, Complete = 2, SharedDone = 3 };

struct Event {
  TimeNs t;
  std::uint64_t seq;
  OpId node;
  EvType type;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  bool operator<(const Event& o) const { return o > *this; }
};

class Engine {
 public:
  Engine(const Graph& g, const CostModel& m) : g_(g), m_(m) {}

  SimResult run() {
    const std::size_t n = g_.num_nodes();
    SimResult r;
    r.start.assign(n, kMinTime);  // start-dependency accumulator until the node starts
    r.end.assign(n, kMinTime);    // end-dependency accumulator until the node ends
    r.start_src.assign(n, kNone);
    r.resource_busy.assign(g_.resources.size(), 0);
    pending_start_.assign(n, 0);
    has_end_deps_.assign(n, false);
    const std::size_t lanes = g_.lanes.size();
    in_use_.assign(lanes + g_.resources.size(), 0);
    capacity_.assign(lanes + g_.resources.size(), 1);
    for (std::size_t l = 0; l < lanes; ++l) capacity_[l] = g_.lanes[l].capacity;
    for (std::size_t k = 0; k < g_.resources.size(); ++k) capacity_[lanes + k] = g_.resources[k].capacity;
    waiters_.resize(lanes + g_.resources.size());
    busy_since_.assign(g_.resources.size(), 0);
    if (g_.sharing) {
      std::uint32_t devices = g_.num_devices;
      for (const auto& l : g_.lanes)
        if (l.device != kNone) devices = std::max(devices, l.device + 1);
      running_.resize(devices);
      for (std::uint32_t d = 0; d < devices; ++d) solvers_.emplace_back(g_.sharing->sm_count(d), g_.sharing->drain_weight(d));
      shared_at_.assign(devices, kNever);
      shared_seq_.assign(devices, 0);
      nothing_id_.assign(devices, kUnset);
      r.shared.assign(n, 0);
    }

    for (OpId u = 0; u < n; ++u) {
      for (auto e : boost::make_iterator_range(boost::out_edges(u, g_.csr))) {
        OpId v = boost::target(e, g_.csr);
        DepType at = g_.csr[e].attach();
        if (at == DepType::EndToEnd || at == DepType::StartToEnd) {
          pending_end_[v]++;
          has_end_deps_[v] = true;
        } else
          add_pending_start(v);
      }
    }
    for (OpId u = 0; u < n; ++u) {
      if (pending_start_[u] == 0)
        push(g_.release(u), u, EvType::Ready, r);
      else if (g_.released(u))
        r.start[u] = g_.release(u);
    }
    while (true) {
      // The earliest event: the queue's first, or a GPU's pending SharedDone (kept beside the
      // queue: each re-solve moves it, and queued copies would mostly be stale).
      const bool shared_first = shared_min_ != kNone &&
                                (q_.empty() || Event{shared_at_[shared_min_], shared_seq_[shared_min_], 0, EvType::SharedDone} < q_.top());
      if (!shared_first && q_.empty()) break;
      Event ev;
      if (shared_first) {
        ev = Event{shared_at_[shared_min_], shared_seq_[shared_min_], static_cast<OpId>(shared_min_), EvType::SharedDone};
        set_shared(shared_min_, kNever);
      } else {
        ev = q_.top();
        q_.pop();
      }
      ++r.events;
      now_ = ev.t;
      switch (ev.type) {
        case EvType::Ready: try_start(ev.node, r); break;
        case EvType::WorkDone: work_done(ev.node, r); break;
        case EvType::SharedDone: shared_done(ev, r); break;
        case EvType::Complete: complete(ev.node, r); break;
      }
    }
    if (completed_ != n) {
      OpId stuck = 0;
      for (OpId u = 0; u < n; ++u)
        if (pending_start_[u] != 0 || r.end[u] == kMinTime) {
          stuck = u;
          break;
        }
      throw InputError(g_.trace ? g_.trace->source : std::string("graph"), "dependency cycle: op " + std::to_string(stuck) + " (" +
                                                                               g_.name(stuck) + ") never becomes ready; " +
                                                                               std::to_string(n - completed_) + " ops cannot run");
    }
    return r;
  }

 private:
  void push(TimeNs t, OpId u, EvType ty, SimResult&) { q_.push(Event{t, seq_++, u, ty}); }

  // ---- sharing (sim/engine/sharing.hpp) ------------------------------------------------------
  struct Running {  // 56 bytes: the engine walks a GPU's running ops at every event
    OpId node;
    std::uint32_t demand_id;  // its demand's in its GPU's RateSolver (kNone: none interned)
    double remaining;         // ns of alone-speed work
    double rate;
    TimeNs since;
    TimeNs finish;    // when its work is done at the current rate
    double drain_at;  // remaining work (ns) at which it starts draining (0: never)
    bool draining;    // its SMs are free for later kernels
    bool has_demand;  // demand_id is set
    bool done;        // its work is done; it holds the GPU until it completes (end dependencies)
    bool kernel;      // a kernel (else a copy or a memset)
  };
  static_assert(sizeof(Running) == 56);
  // Work done on the GPU's running ops up to now.
  void advance(std::vector<Running>& run) {
    for (auto& x : run) {
      x.remaining -= x.rate * static_cast<double>(now_ - x.since);
      x.since = now_;
    }
  }
  // New rates for the GPU's running ops; WorkDone events for those whose rate changed.
  void resolve(std::uint32_t dev, SimResult& r) {
    auto& run = running_[dev];
    static constexpr double kAlone = 1.0;
    const double* rates = &kAlone;
    const std::uint8_t* binding = nullptr;
    if (run.size() > 1) {
      // A copy whose work is done holds nothing while it waits to complete; a kernel keeps its SMs
      // (a collective's member spins until its peers arrive).
      auto holds_nothing = [&](const Running& x) { return x.done && !x.kernel; };
      RateSolver& solver = solvers_[dev];
      Running* const ops = run.data();
      auto id = [&](std::size_t k) {
        Running& x = ops[k];
        if (!x.has_demand) {
          x.demand_id = solver.intern(g_.sharing->demand(x.node, g_));
          x.has_demand = true;
        }
        if (!holds_nothing(x)) return x.demand_id;
        if (nothing_id_[dev] == kUnset) nothing_id_[dev] = solver.intern(ShareDemand{});
        return nothing_id_[dev];
      };
      auto draining = [&](std::size_t k) { return ops[k].draining; };
      // (asked only where more distinct demands than the solver interns run at once: a rare case)
      auto demand = [&](std::size_t k) { return holds_nothing(ops[k]) ? ShareDemand{} : g_.sharing->demand(ops[k].node, g_); };
      const RateSolver::Rates solved = solver.solve_ops(run.size(), id, draining, demand);
      rates = solved.rate;
      binding = solved.binding;
    }
    for (std::size_t k = 0; k < run.size(); ++k) {
      Running& x = run[k];
      double rate = rates[k];
      if (x.done || (rate == x.rate && x.finish != kNever)) continue;
      x.rate = rate;
      if (rate < 1.0 && binding) {
        std::uint8_t& b = r.shared[x.node];
        if (b == 0 || binding[k] == 1) b = binding[k];
      }
      // Held at rate 0: not scheduled until its rate rises (kHeld, unlike a new op's kNever, is
      // a rate already solved).
      x.finish = rate > 0 ? now_ + static_cast<TimeNs>(std::ceil(std::max(0.0, x.remaining) / rate - 1e-6)) : kHeld;
    }
    schedule_shared(dev);
  }
  // One event per GPU: the earliest moment one of its running ops finishes its work.
  void schedule_shared(std::uint32_t dev) {
    TimeNs next = kNever;
    for (const Running& x : running_[dev]) {
      if (x.done) continue;
      next = std::min(next, x.finish);
      if (!x.draining && x.drain_at > 0 && x.rate > 0)  // when its drain begins
        next = std::min(next, x.since + static_cast<TimeNs>(std::ceil(std::max(0.0, x.remaining - x.drain_at) / x.rate - 1e-6)));
    }
    if (next >= kHeld) next = kNever;
    if (next == shared_at_[dev]) return;  // the pending event stands
    shared_seq_[dev] = seq_++;
    set_shared(dev, next);
  }
  // A GPU's pending SharedDone moves to `t` (kNever: none); the earliest GPU is kept.
  void set_shared(std::uint32_t dev, TimeNs t) {
    shared_at_[dev] = t;
    if (shared_min_ != kNone && shared_min_ != dev && t != kNever &&
        Event{shared_at_[shared_min_], shared_seq_[shared_min_], 0, EvType::SharedDone} < Event{t, shared_seq_[dev], 0, EvType::SharedDone})
      return;  // another GPU stays first
    shared_min_ = kNone;
    for (std::uint32_t d = 0; d < shared_at_.size(); ++d)
      if (shared_at_[d] != kNever &&
          (shared_min_ == kNone || Event{shared_at_[d], shared_seq_[d], 0, EvType::SharedDone} <
                                       Event{shared_at_[shared_min_], shared_seq_[shared_min_], 0, EvType::SharedDone}))
        shared_min_ = d;
  }
  // A device op starts on a GPU whose ops share it. False if it does not take part.
  bool start_shared(OpId u, TimeNs d, SimResult& r) {
    if (!g_.sharing || !g_.is_device(u) || d <= 0) return false;
    std::uint32_t dev = g_.device(u);
    if (dev == kNone || dev >= running_.size()) return false;
    auto& run = running_[dev];
    advance(run);
    run.push_back(Running{u, kNone, static_cast<double>(d), 1.0, now_, kNever,
                          g_.drain_fraction(u, &drain_cursor_) * static_cast<double>(d), false, false, false,
                          g_.kind(u) == OpKind::Kernel});
    resolve(dev, r);
    return true;
  }
  // A GPU's SharedDone event: the ops whose work is done by now are done.
  void shared_done(const Event& ev, SimResult& r) {
    std::uint32_t dev = ev.node;
    if (dev >= running_.size()) return;
    auto& run = running_[dev];
    advance(run);
    done_now_.clear();
    bool freed = false;  // a copy's work is done (it stops taking bandwidth), or a kernel drains
    for (auto& x : run) {
      if (x.done) continue;
      if (x.finish <= now_) {
        x.done = true;
        x.remaining = 0;
        done_now_.push_back(x.node);
        freed = freed || !x.kernel;
      } else if (!x.draining && x.drain_at > 0 && x.remaining <= x.drain_at + 0.5) {
        x.draining = true;
        freed = true;
      }
    }
    if (freed)
      resolve(dev, r);
    else
      schedule_shared(dev);
    for (std::size_t k = 0; k < done_now_.size(); ++k) work_done(done_now_[k], r);
  }
  // A shared op completes: it leaves its GPU, whose other ops are re-solved.
  void leave_shared(OpId u, SimResult& r) {
    if (running_.empty()) return;
    std::uint32_t dev = g_.device(u);
    if (dev == kNone || dev >= running_.size()) return;
    auto& run = running_[dev];
    auto it = std::find_if(run.begin(), run.end(), [&](const Running& x) { return x.node == u; });
    if (it == run.end()) return;
    advance(run);
    run.erase(it);
    // Ops that all run at full speed keep it when one leaves (it frees SMs and bandwidth; rates
    // never fall when demand falls), so their finishes stand.
    const bool all_full =
        std::all_of(run.begin(), run.end(), [](const Running& x) { return x.done || (x.rate == 1.0 && x.finish != kNever); });
    if (!run.empty() && !all_full) resolve(dev, r);
  }

  std::size_t lane_res(OpId u) const { return g_.lane(u); }
  std::size_t extra_res(OpId u) const {
    auto r = g_.resource_of(u);
    return r == kNoResource ? kNone : g_.lanes.size() + r;
  }
  TimeNs duration(OpId u) const { return std::max<TimeNs>(0, node_duration(m_, g_, u)); }

  void try_start(OpId u, SimResult& r) {
    std::size_t lr = lane_res(u), er = extra_res(u);
    if (in_use_[lr] >= capacity_[lr]) {
      waiters_[lr].push_back(u);
      return;
    }
    if (er != kNone && in_use_[er] >= capacity_[er]) {
      waiters_[er].push_back(u);
      return;
    }
    in_use_[lr]++;
    if (er != kNone) {
      if (in_use_[er]++ == 0) busy_since_[er - g_.lanes.size()] = now_;
    }
    r.start[u] = now_;
    TimeNs d = duration(u);
    if (!start_shared(u, d, r)) push(now_ + d, u, EvType::WorkDone, r);
    // start->start and start->end edges fire now
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g_.csr))) {
      const EdgeProps& p = g_.csr[e];
      OpId v = boost::target(e, g_.csr);
      if (p.attach() == DepType::StartToStart)
        relax_start(v, now_ + p.delay(), u | SimResult::kViaStart, r);
      else if (p.attach() == DepType::StartToEnd)
        relax_end(v, now_ + p.delay() + duration(v), u | SimResult::kViaStart, r);
    }
  }

  // An end dependency of v fired: v completes no earlier than t (once its own work is done).
  void relax_end(OpId v, TimeNs t, std::uint32_t src, SimResult& r) {
    if (t > r.end[v]) {
      r.end[v] = t;
      r.end_src[v] = src;
    }
    auto& pe = pending_end_[v];
    if (--pe == 0) {
      auto w = work_done_at_.find(v);
      if (w != work_done_at_.end()) {
        TimeNs at = std::max(w->second, r.end[v]);
        if (r.end[v] <= w->second) r.end_src.erase(v);
        work_done_at_.erase(w);
        push(std::max(at, now_), v, EvType::Complete, r);
      }
    }
  }

  void relax_start(OpId v, TimeNs t, std::uint32_t src, SimResult& r) {
    if (t > r.start[v] || (r.start_src[v] == kNone && t >= r.start[v])) {
      r.start[v] = t;
      r.start_src[v] = src;
    }
    if (release_pending_start(v)) push(std::max(r.start[v], now_), v, EvType::Ready, r);
  }

  void work_done(OpId u, SimResult& r) {
    if (!has_end_deps_[u] && r.end[u] <= now_) {  // the usual op: nothing else holds its end
      complete(u, r);
      return;
    }
    auto it = pending_end_.find(u);
    if (it != pending_end_.end() && it->second > 0) {
      work_done_at_[u] = now_;
      return;
    }
    if (r.end[u] > now_) {
      push(r.end[u], u, EvType::Complete, r);
      return;
    }
    if (it != pending_end_.end()) r.end_src.erase(u);  // its own work ended last
    complete(u, r);
  }

  void complete(OpId u, SimResult& r) {
    r.end[u] = now_;
    ++completed_;
    leave_shared(u, r);
    std::size_t lr = lane_res(u);
    in_use_[lr]--;
    wake(lr, u, r);
    if (auto er = extra_res(u); er != kNone) {
      if (--in_use_[er] == 0) r.resource_busy[er - g_.lanes.size()] += now_ - busy_since_[er - g_.lanes.size()];
      wake(er, u, r);
    }
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g_.csr))) {
      const EdgeProps& p = g_.csr[e];
      OpId v = boost::target(e, g_.csr);
      TimeNs t = now_ + p.delay();
      if (p.attach() == DepType::EndToStart) {
        relax_start(v, t, u, r);
      } else if (p.attach() == DepType::EndToEnd) {
        relax_end(v, t, u, r);
      }
    }
  }

  // The first waiter of a freed lane or resource retries now; its start is then bound by `by`.
  void wake(std::size_t res, OpId by, SimResult& r) {
    auto& w = waiters_[res];
    if (w.empty()) return;
    OpId v = w.front();
    w.pop_front();
    r.start_src[v] = by | SimResult::kViaResource;
    push(now_, v, EvType::Ready, r);
  }

  const Graph& g_;
  const CostModel& m_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> q_;
  std::uint64_t seq_ = 0;
  TimeNs now_ = 0;
  // Start dependencies not yet fired, per node: a byte (nearly every node has one to three); a node
  // with kManyPending or more keeps its count in pending_start_many_ while the byte holds the mark.
  static constexpr std::uint8_t kManyPending = 0xFF;
  std::vector<std::uint8_t> pending_start_;
  std::unordered_map<OpId, std::uint32_t> pending_start_many_;
  void add_pending_start(OpId v) {
    std::uint8_t& c = pending_start_[v];
    if (c < kManyPending - 1) {
      ++c;
    } else if (c == kManyPending - 1) {
      c = kManyPending;
      pending_start_many_[v] = kManyPending;
    } else {
      ++pending_start_many_[v];
    }
  }
  // One start dependency of v fired; true when it was the last.
  bool release_pending_start(OpId v) {
    std::uint8_t& c = pending_start_[v];
    if (c != kManyPending) return --c == 0;
    auto it = pending_start_many_.find(v);
    if (--it->second != 0) return false;
    pending_start_many_.erase(it);
    c = 0;
    return true;
  }
  std::unordered_map<OpId, std::uint32_t> pending_end_;
  std::vector<bool> has_end_deps_;  // per node: end -> end or start -> end edges into it (pending_end_'s keys)
  std::unordered_map<OpId, TimeNs> work_done_at_;
  std::vector<std::uint32_t> in_use_, capacity_;
  std::vector<std::deque<OpId>> waiters_;
  std::vector<TimeNs> busy_since_;
  std::size_t completed_ = 0;
  std::vector<std::vector<Running>> running_;  // per GPU, in start order (sharing only)
  std::vector<TimeNs> shared_at_;              // per GPU: when its pending SharedDone fires (kNever: none)
  std::vector<std::uint64_t> shared_seq_;      // per GPU: that event's sequence number (ties in time)
  std::uint32_t shared_min_ = kNone;           // the GPU whose SharedDone comes first (kNone: none)
  std::vector<OpId> done_now_;
  std::size_t drain_cursor_ = 0;     // Graph::drain_fraction's hint (ops start nearly in node order)
  std::vector<RateSolver> solvers_;  // per GPU (sharing only)
  static constexpr std::uint32_t kUnset = kNone - 1;
  std::vector<std::uint32_t> nothing_id_;  // per GPU: the id of a demand of nothing in its solver (kUnset: not asked yet)
};

}  // namespace

SimResult simulate(const Graph& g, const CostModel& model) { return Engine(g, model).run(); }

}  // namespace bneck
