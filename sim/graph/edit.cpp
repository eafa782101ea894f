#include "sim/graph/edit.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "sim/base/error.hpp"

namespace bneck {

GraphEditor::GraphEditor(Graph& g, std::string transform) : g_(g), transform_(std::move(transform)) {}

GraphEditor::~GraphEditor() {
  try {
    commit();
  } catch (...) {  // commit() is called explicitly where errors matter
  }
}

LaneId GraphEditor::add_lane(GraphLane lane) {
  if (lane.name.empty()) lane.name = transform_ + " lane " + std::to_string(g_.lanes.size());
  g_.lanes.push_back(std::move(lane));
  return static_cast<LaneId>(g_.lanes.size() - 1);
}

std::uint32_t GraphEditor::add_device() { return g_.num_devices++; }
std::uint32_t GraphEditor::add_process() { return g_.num_processes++; }

SideInfo& GraphEditor::side(NodeId n) {
  if (g_.synthetic(n)) return g_.side[g_.synth(n).side];
  auto [it, fresh] = g_.trace_side.emplace(n, static_cast<std::uint32_t>(g_.side.size()));
  if (fresh) g_.side.emplace_back();
  return g_.side[it->second];
}

NodeId GraphEditor::add_node(const NewNode& n) {
  if (n.lane >= g_.lanes.size()) throw std::logic_error("GraphEditor::add_node: no lane " + std::to_string(n.lane));
  if (n.source == DurationSource::Op) throw std::logic_error("GraphEditor::add_node: a synthetic node needs a Fixed or Origin duration");
  Node nd;
  nd.lane = n.lane;
  nd.kind = n.kind;
  nd.resource = n.resource;
  nd.flags = static_cast<std::uint8_t>(n.nccl ? Node::kNccl : 0);
  nd.side = static_cast<std::uint32_t>(g_.side.size());
  g_.side.emplace_back();
  g_.nodes.push_back(nd);
  NodeId id = static_cast<NodeId>(g_.num_nodes() - 1);
  SideInfo& s = g_.side[nd.side];
  s.origin = n.origin;
  s.source = n.source;
  s.fixed_ns = n.fixed_ns;
  s.work_fraction = n.work_fraction;
  s.release = n.release;
  s.name = n.name;
  s.transform = transform_;
  dirty_ = true;
  return id;
}

void GraphEditor::add_edge(NodeId from, NodeId to, EdgeType type, DepType attach, TimeNs delay) {
  add_.push_back({from, to, EdgeProps(delay, type, attach)});
  dirty_ = true;
}

void GraphEditor::drop_in_edges(NodeId to, bool (*drop)(NodeId, const EdgeProps&, const Graph&)) {
  drop_.emplace_back(to, drop);
  dirty_ = true;
}

void GraphEditor::remove(NodeId n) {
  if (g_.synthetic(n)) {
    g_.synth(n).flags |= Node::kRemoved;
    return;
  }
  if (g_.trace_removed.empty()) g_.trace_removed.assign(g_.num_trace_nodes(), false);
  g_.trace_removed[n] = true;
}

void GraphEditor::remove_with_gaps(NodeId n) {
  remove(n);
  if (n < boost::num_vertices(g_.csr))
    for (auto e : boost::make_iterator_range(boost::out_edges(n, g_.csr))) g_.csr[e].set_delay(0);
  for (auto& p : add_)
    if (p.from == n) p.props.set_delay(0);
}

void GraphEditor::move(NodeId n, LaneId lane) {
  if (g_.synthetic(n)) {
    g_.synth(n).lane = lane;
    return;
  }
  if (g_.trace_lane.empty()) g_.trace_lane.assign(g_.num_trace_nodes(), kNone);
  g_.trace_lane[n] = lane;
}

void GraphEditor::retime_fixed(NodeId n, TimeNs d) {
  SideInfo& s = side(n);
  s.source = DurationSource::Fixed;
  s.fixed_ns = d;
  s.transform = transform_;
}

void GraphEditor::retime_fraction(NodeId n, double work_fraction) {
  SideInfo& s = side(n);
  if (s.source == DurationSource::Fixed) {
    s.fixed_ns = static_cast<TimeNs>(std::llround(static_cast<double>(s.fixed_ns) * work_fraction));
  } else {
    s.source = DurationSource::Origin;
    s.work_fraction *= work_fraction;
  }
  s.transform = transform_;
}

NodeId GraphEditor::clone(NodeId n, LaneId lane, const std::string& suffix) {
  NewNode c;
  c.name = g_.name(n) + suffix;
  c.kind = g_.kind(n);
  c.lane = lane;
  c.nccl = g_.nccl(n);
  c.resource = g_.resource_of(n);
  c.release = g_.release(n);
  const SideInfo* s = g_.side_of(n);
  if (s && s->source == DurationSource::Fixed) {
    c.source = DurationSource::Fixed;
    c.fixed_ns = s->fixed_ns;
  } else {
    c.source = DurationSource::Origin;
    c.origin = g_.origin(n) == kNone ? n : g_.origin(n);
    c.work_fraction = s && s->source == DurationSource::Origin ? s->work_fraction : 1.0;
  }
  NodeId id = add_node(c);
  if (g_.removed(n)) g_.synth(id).flags |= Node::kRemoved;
  return id;
}

std::vector<NodeId> GraphEditor::split(NodeId n, std::uint32_t parts, const std::vector<LaneId>& lanes) {
  std::vector<NodeId> out{n};
  if (parts <= 1) return out;
  // n's in- and out-edges as they are now (base graph and pending additions).
  std::vector<PendingEdge> in, outs;
  for (NodeId u = 0; u < boost::num_vertices(g_.csr); ++u)
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g_.csr)))
      if (boost::target(e, g_.csr) == n) in.push_back({u, n, g_.csr[e]});
  if (n < boost::num_vertices(g_.csr))
    for (auto e : boost::make_iterator_range(boost::out_edges(n, g_.csr))) outs.push_back({n, boost::target(e, g_.csr), g_.csr[e]});
  for (const auto& p : add_) {
    if (p.to == n) in.push_back(p);
    if (p.from == n) outs.push_back(p);
  }
  retime_fraction(n, 1.0 / parts);
  for (std::uint32_t k = 1; k < parts; ++k) {
    LaneId lane = lanes.empty() ? g_.lane(n) : lanes[(k - 1) % lanes.size()];
    NodeId c = clone(n, lane, " (part " + std::to_string(k + 1) + "/" + std::to_string(parts) + ")");
    for (const auto& e : in) add_.push_back({e.from, c, e.props});
    for (const auto& e : outs) add_.push_back({c, e.to, e.props});
    out.push_back(c);
  }
  dirty_ = true;
  return out;
}

template <class F>
void GraphEditor::for_base_out(NodeId u, F&& f) const {
  if (u >= boost::num_vertices(g_.csr)) return;
  for (auto e : boost::make_iterator_range(boost::out_edges(u, g_.csr))) {
    const NodeId v = static_cast<NodeId>(boost::target(e, g_.csr));
    if (drop_set_.empty() || !drop_set_.count({u, v})) f(v, g_.csr[e]);
  }
}

std::unordered_set<NodeId> GraphEditor::sandwiched(const std::unordered_map<NodeId, std::size_t>& set) const {
  // The graph's edges and the pending ones, forward from the set: what the set's ops reach.
  const std::size_t n = g_.num_nodes();
  std::unordered_map<NodeId, std::vector<NodeId>> pending;
  for (const auto& p : add_) pending[p.from].push_back(p.to);
  auto for_out = [&](NodeId u, auto&& f) {
    for_base_out(u, [&](NodeId v, const EdgeProps&) { f(v); });
    if (auto it = pending.find(u); it != pending.end())
      for (NodeId v : it->second) f(v);
  };
  std::vector<char> reached(n, 0);
  std::vector<NodeId> stack;
  for (const auto& [u, k] : set) stack.push_back(u);
  while (!stack.empty()) {
    NodeId u = stack.back();
    stack.pop_back();
    for_out(u, [&](NodeId v) {
      if (v < n && !reached[v] && !set.count(v)) {
        reached[v] = 1;
        stack.push_back(v);
      }
    });
  }
  // Of those, the ones that reach the set again: backward from the set over reached ops (the
  // reversed edges among them, counted into offsets; edges may run both ways between two ops: a
  // launch and the completion a blocking call waits for).
  std::vector<std::uint32_t> first(n + 1, 0);
  for (NodeId u = 0; u < n; ++u)
    if (reached[u])
      for_out(u, [&](NodeId v) {
        if (v < n && (reached[v] || set.count(v))) ++first[v + 1];
      });
  for (std::size_t v = 0; v < n; ++v) first[v + 1] += first[v];
  std::vector<NodeId> from(first[n]);
  std::vector<std::uint32_t> fill(first.begin(), first.end() - 1);
  for (NodeId u = 0; u < n; ++u)
    if (reached[u])
      for_out(u, [&](NodeId v) {
        if (v < n && (reached[v] || set.count(v))) from[fill[v]++] = u;
      });
  std::unordered_set<NodeId> out;
  for (const auto& [u, k] : set) stack.push_back(u);
  while (!stack.empty()) {
    NodeId v = stack.back();
    stack.pop_back();
    for (std::uint32_t k = first[v]; k < first[v + 1]; ++k)
      if (out.insert(from[k]).second) stack.push_back(from[k]);
  }
  return out;
}

std::vector<std::vector<NodeId>> GraphEditor::repeat(const std::vector<NodeId>& set, std::uint32_t times) {
  std::vector<std::vector<NodeId>> copies;
  if (set.empty() || times == 0) return copies;
  std::unordered_map<NodeId, std::size_t> pos;
  for (std::size_t k = 0; k < set.size(); ++k) pos[set[k]] = k;
  // Edges touching the set, from the base graph and pending additions.
  std::vector<PendingEdge> internal, into, out_of;
  auto classify = [&](NodeId u, NodeId v, const EdgeProps& p) {
    bool iu = pos.count(u), iv = pos.count(v);
    if (iu && iv)
      internal.push_back({u, v, p});
    else if (iv)
      into.push_back({u, v, p});
    else if (iu)
      out_of.push_back({u, v, p});
  };
  // (Edges an earlier repeat of this editor dropped are gone already.)
  for (NodeId u = 0; u < boost::num_vertices(g_.csr); ++u) for_base_out(u, [&](NodeId v, const EdgeProps& p) { classify(u, v, p); });
  for (const auto& p : add_) classify(p.from, p.to, p.props);
  // Ops outside the set on a path from the set back into it (another thread's kernels between the
  // set's on a stream, a call the set's work wakes that the set then waits for) follow the last
  // copy like everything after the set, and the set no longer waits for them: waiting, the copies
  // would wait for what waits for them (a cycle), and a blocking call among them would hold its
  // thread while the copies need it.
  const std::unordered_set<NodeId> between = sandwiched(pos);
  if (!between.empty()) {
    into.erase(std::remove_if(into.begin(), into.end(),
                              [&](const PendingEdge& e) {
                                if (!between.count(e.from)) return false;
                                drop_set_.insert({e.from, e.to});
                                return true;
                              }),
               into.end());
    add_.erase(std::remove_if(add_.begin(), add_.end(), [&](const PendingEdge& e) { return between.count(e.from) && pos.count(e.to); }),
               add_.end());
  }
  // Per lane: the set's first and last node (by id: trace order), and how the first one follows
  // its lane predecessor outside the set.
  struct LaneEnds {
    NodeId first = kNone, last = kNone;
    EdgeProps chain{0, EdgeType::StreamOrder, DepType::EndToStart};
  };
  std::unordered_map<LaneId, LaneEnds> ends;
  std::vector<NodeId> sorted = set;
  std::sort(sorted.begin(), sorted.end());
  for (NodeId n : sorted) {
    auto& le = ends[g_.lane(n)];
    if (le.first == kNone) {
      le.first = n;
      le.chain = EdgeProps(0, g_.kind(n) == OpKind::Api ? EdgeType::HostOrder : EdgeType::StreamOrder, DepType::EndToStart);
    }
    le.last = n;
  }
  for (const auto& e : into) {
    auto& le = ends[g_.lane(e.to)];
    if (e.to == le.first && g_.lane(e.from) == g_.lane(e.to) &&
        (e.props.type() == EdgeType::HostOrder || e.props.type() == EdgeType::StreamOrder))
      le.chain = e.props;
  }
  std::vector<PendingEdge> bridges;
  if (!between.empty()) {
    std::unordered_set<std::uint64_t> linked;
    for (const auto& e : internal) linked.insert(std::uint64_t{e.from} << 32 | e.to);
    std::unordered_map<LaneId, NodeId> last_on;
    for (NodeId n : sorted) {
      auto [it, fresh] = last_on.emplace(g_.lane(n), n);
      if (!fresh) {
        if (!linked.count(std::uint64_t{it->second} << 32 | n))
          bridges.push_back(
              {it->second, n, EdgeProps(0, g_.kind(n) == OpKind::Api ? EdgeType::HostOrder : EdgeType::StreamOrder, DepType::EndToStart)});
        it->second = n;
      }
    }
  }
  add_.insert(add_.end(), bridges.begin(), bridges.end());  // the original set's too
  std::vector<NodeId> prev(set);
  for (std::uint32_t c = 0; c < times; ++c) {
    std::vector<NodeId> cur(set.size());
    std::string suffix = " (repeat " + std::to_string(c + 2) + ")";
    for (std::size_t k = 0; k < set.size(); ++k) cur[k] = clone(set[k], g_.lane(set[k]), suffix);
    for (const auto& e : internal) add_.push_back({cur[pos[e.from]], cur[pos[e.to]], e.props});
    // A lane's ops in the set that followed each other through ops outside it follow each other
    // directly, in the set and in its copies.
    for (const auto& [a, b, p] : bridges) add_.push_back({cur[pos[a]], cur[pos[b]], p});
    // Edges from outside: kept, except the lane predecessor of each lane's first node, which is
    // now the previous copy's last node on that lane, and those from ops between the set's.
    for (const auto& e : into) {
      const auto& le = ends[g_.lane(e.to)];
      if (e.to == le.first && g_.lane(e.from) == g_.lane(e.to)) continue;
      add_.push_back({e.from, cur[pos[e.to]], e.props});
    }
    for (const auto& [lane, le] : ends) {
      EdgeProps p = le.chain;
      p.set_binding(false);
      add_.push_back({prev[pos[le.last]], cur[pos[le.first]], p});
    }
    copies.push_back(cur);
    prev = std::move(cur);
  }
  // What followed the set follows its last copy.
  for (const auto& e : out_of) {
    add_.push_back({prev[pos[e.from]], e.to, e.props});
    drop_set_.insert({e.from, e.to});
  }
  dirty_ = true;
  return copies;
}

void GraphEditor::commit() {
  if (!dirty_) return;
  dirty_ = false;
  const std::size_t n = g_.num_nodes();
  std::unordered_map<NodeId, std::vector<bool (*)(NodeId, const EdgeProps&, const Graph&)>> drops;
  for (auto& [to, f] : drop_) drops[to].push_back(f);
  std::vector<std::uint32_t> sources, targets;
  std::vector<EdgeProps> props;
  const std::size_t e0 = boost::num_edges(g_.csr) + add_.size();
  sources.reserve(e0);
  targets.reserve(e0);
  props.reserve(e0);
  // Drops apply to the edges the graph had; edges added by this editor are kept.
  auto keep = [&](NodeId u, NodeId v, const EdgeProps& p) {
    if (!drop_set_.empty() && drop_set_.count({u, v})) return false;
    auto it = drops.find(v);
    if (it != drops.end())
      for (auto f : it->second)
        if (f(u, p, g_)) return false;
    return true;
  };
  for (NodeId u = 0; u < boost::num_vertices(g_.csr); ++u)
    for (auto e : boost::make_iterator_range(boost::out_edges(u, g_.csr))) {
      NodeId v = boost::target(e, g_.csr);
      if (!keep(u, v, g_.csr[e])) continue;
      sources.push_back(u);
      targets.push_back(v);
      props.push_back(g_.csr[e]);
    }
  for (const auto& p : add_) {
    if (p.from >= n || p.to >= n) throw std::logic_error("GraphEditor: edge to a node that does not exist");
    sources.push_back(p.from);
    targets.push_back(p.to);
    props.push_back(p.props);
    g_.stats.edges_by_type[static_cast<int>(p.props.type())]++;
  }
  add_.clear();
  drop_.clear();
  drop_set_.clear();
  g_.csr = CsrGraph(boost::construct_inplace_from_sources_and_targets, sources, targets, props, static_cast<std::uint32_t>(n));
}

}  // namespace bneck
