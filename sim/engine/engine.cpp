#include "sim/engine/engine.hpp"

#include <deque>
#include <limits>
#include <queue>

#include "sim/base/error.hpp"

namespace bneck {
namespace {

constexpr TimeNs kMinTime = std::numeric_limits<TimeNs>::min() / 4;

enum class EvType : std::uint8_t { Ready = 0, WorkDone = 1, Complete = 2 };

struct Event {
  TimeNs t;
  std::uint64_t seq;
  OpId node;
  EvType type;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

class Engine {
 public:
  Engine(const Graph& g, const CostModel& m) : g_(g), m_(m) {}

  SimResult run() {
    const std::size_t n = g_.num_nodes();
    SimResult r;
    r.start.assign(n, kMinTime);   // start-dependency accumulator until the node starts
    r.end.assign(n, kMinTime);     // end-dependency accumulator until the node ends
    r.start_src.assign(n, kNone);
    r.resource_busy.assign(g_.resources.size(), 0);
    pending_start_.assign(n, 0);
    const std::size_t lanes = g_.lanes.size();
    in_use_.assign(lanes + g_.resources.size(), 0);
    capacity_.assign(lanes + g_.resources.size(), 1);
    for (std::size_t l = 0; l < lanes; ++l) capacity_[l] = g_.lanes[l].capacity;
    for (std::size_t k = 0; k < g_.resources.size(); ++k) capacity_[lanes + k] = g_.resources[k].capacity;
    waiters_.resize(lanes + g_.resources.size());
    busy_since_.assign(g_.resources.size(), 0);

    for (OpId u = 0; u < n; ++u) {
      for (auto e : boost::make_iterator_range(boost::out_edges(u, g_.csr))) {
        OpId v = boost::target(e, g_.csr);
        DepType at = g_.csr[e].attach();
        if (at == DepType::EndToEnd || at == DepType::StartToEnd) pending_end_[v]++;
        else pending_start_[v]++;
      }
    }
    for (OpId u = 0; u < n; ++u) {
      if (pending_start_[u] == 0) push(g_.release(u), u, EvType::Ready, r);
      else if (g_.released(u)) r.start[u] = g_.release(u);
    }
    while (!q_.empty()) {
      Event ev = q_.top();
      q_.pop();
      ++r.events;
      now_ = ev.t;
      switch (ev.type) {
        case EvType::Ready: try_start(ev.node, r); break;
        case EvType::WorkDone: work_done(ev.node, r); break;
        case EvType::Complete: complete(ev.node, r); break;
      }
    }
    if (completed_ != n) {
      OpId stuck = 0;
      for (OpId u = 0; u < n; ++u)
        if (pending_start_[u] != 0 || r.end[u] == kMinTime) { stuck = u; break; }
      throw InputError(g_.trace ? g_.trace->source : std::string("graph"), "dependency cycle: op " + std::to_string(stuck) + " (" + g_.name(stuck) +
                                      ") never becomes ready; " + std::to_string(n - completed_) + " ops cannot run");
    }
    return r;
  }

 private:
  void push(TimeNs t, OpId u, EvType ty, SimResult&) { q_.push(Event{t, seq_++, u, ty}); }

  std::size_t lane_res(OpId u) const { return g_.lane(u); }
  std::size_t extra_res(OpId u) const {
    auto r = g_.resource_of(u);
    return r == kNoResource ? kNone : g_.lanes.size() + r;
  }
  TimeNs duration(OpId u) const { return std::max<TimeNs>(0, node_duration(m_, g_, u)); }

  void try_start(OpId u, SimResult& r) {
    std::size_t lr = lane_res(u), er = extra_res(u);
    if (in_use_[lr] >= capacity_[lr]) { waiters_[lr].push_back(u); return; }
    if (er != kNone && in_use_[er] >= capacity_[er]) { waiters_[er].push_back(u); return; }
    in_use_[lr]++;
    if (er != kNone) {
      if (in_use_[er]++ == 0) busy_since_[er - g_.lanes.size()] = now_;
    }
    r.start[u] = now_;
    TimeNs d = duration(u);
    push(now_ + d, u, EvType::WorkDone, r);
    // start->start and start->end edges fire now
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g_.csr))) {
      const EdgeProps& p = g_.csr[e];
      OpId v = boost::target(e, g_.csr);
      if (p.attach() == DepType::StartToStart) relax_start(v, now_ + p.delay(), u | SimResult::kViaStart, r);
      else if (p.attach() == DepType::StartToEnd)
        relax_end(v, now_ + p.delay() + duration(v), u | SimResult::kViaStart, r);
    }
  }

  // An end dependency of v fired: v completes no earlier than t (once its own work is done).
  void relax_end(OpId v, TimeNs t, std::uint32_t src, SimResult& r) {
    if (t > r.end[v]) { r.end[v] = t; r.end_src[v] = src; }
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
    if (--pending_start_[v] == 0) push(std::max(r.start[v], now_), v, EvType::Ready, r);
  }

  void work_done(OpId u, SimResult& r) {
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
  std::vector<std::uint32_t> pending_start_;
  std::unordered_map<OpId, std::uint32_t> pending_end_;
  std::unordered_map<OpId, TimeNs> work_done_at_;
  std::vector<std::uint32_t> in_use_, capacity_;
  std::vector<std::deque<OpId>> waiters_;
  std::vector<TimeNs> busy_since_;
  std::size_t completed_ = 0;
};

}  // namespace

SimResult simulate(const Graph& g, const CostModel& model) { return Engine(g, model).run(); }

}  // namespace bneck
