// GraphEditor: the small API through which transforms change a graph's work (add, remove, split,
// repeat and re-time nodes; add edges and lanes). Node edits apply at once; edge edits are
// collected and the compressed sparse row graph is rebuilt once, by commit() (or the destructor).
//
// Semantics:
// - add_node: a synthetic node on a lane, with a duration source (Fixed, or Origin: the cost
//   model's time of an op times a work fraction) and a release time (its earliest start when no
//   start dependency holds it back). Reports show its name and the transform that made it.
// - move: a trace node runs on another lane (its edges unchanged).
// - remove: the node stays as a zero-time pass-through (its dependencies still order the nodes
//   around it) and leaves every analysis (spans, overlap, paths by device op).
// - retime: a fixed duration, or a fraction of the cost model's.
// - split(n, parts, lanes): n keeps 1/parts of its work; parts-1 clones take the rest on the lanes
//   given (n's own lane when empty: they follow n there). Each clone gets n's in-edges; every
//   successor of n waits for every part.
// - repeat(nodes, times): the set is cloned `times` times with its internal edges. Copy k+1
//   follows copy k lane by lane: the first node of the set on each lane waits for the last node
//   of the previous copy on that lane (the gap the lane showed inside the set's first node's
//   predecessor edge is kept). Edges from the set to the rest of the graph leave from the last
//   copy instead, so what followed the set follows all its copies. An op outside the set on a path
//   from the set back into it (another thread's kernel between the set's on a stream, a call the
//   set's work wakes that the set then waits for) follows the last copy too, and the set and its
//   copies stop waiting for it; the set's ops on a lane that it separated follow each other.
#pragma once
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim/graph/graph.hpp"

namespace bneck {

struct NewNode {
  std::string name;
  OpKind kind = OpKind::Kernel;
  LaneId lane = kNone;
  OpId origin = kNone;  // the op whose measured or modelled time it takes (Origin)
  DurationSource source = DurationSource::Fixed;
  TimeNs fixed_ns = 0;
  double work_fraction = 1;
  bool nccl = false;  // a communication kernel
  std::uint16_t resource = kNoResource;
  TimeNs release = 0;
};

class GraphEditor {
 public:
  // `transform` names the edits in reports ("--repeat", "--data-parallel 2", ...).
  GraphEditor(Graph& g, std::string transform);
  ~GraphEditor();
  GraphEditor(const GraphEditor&) = delete;
  GraphEditor& operator=(const GraphEditor&) = delete;

  LaneId add_lane(GraphLane lane);
  // A new device (a GPU of a new rank) and a new process (rank).
  std::uint32_t add_device();
  std::uint32_t add_process();
  NodeId add_node(const NewNode& n);
  void add_edge(NodeId from, NodeId to, EdgeType type, DepType attach, TimeNs delay = 0);
  // Drops the edges into `to` for which drop(source, props, graph) is true (applied at commit).
  void drop_in_edges(NodeId to, bool (*drop)(NodeId src, const EdgeProps& p, const Graph& g));
  void remove(NodeId n);
  // Removes `n` and the time after it: its out-edges' delays (the CPU time a host thread spent
  // before its next call, a stream's gap) become 0, so a removed stretch of work takes no time.
  void remove_with_gaps(NodeId n);
  // Moves trace node `n` to `lane` (another stream, or a stream of a new device: a pipeline stage);
  // its edges stay: the caller rewires stream order (drop_in_edges, add_edge).
  void move(NodeId n, LaneId lane);
  void retime_fixed(NodeId n, TimeNs d);
  void retime_fraction(NodeId n, double work_fraction);
  std::vector<NodeId> split(NodeId n, std::uint32_t parts, const std::vector<LaneId>& lanes = {});
  // Returns, per copy, the clone of every node of `set` (same order as `set`).
  std::vector<std::vector<NodeId>> repeat(const std::vector<NodeId>& set, std::uint32_t times);
  void commit();

 private:
  SideInfo& side(NodeId n);
  NodeId clone(NodeId n, LaneId lane, const std::string& suffix);
  // f(target, props) for each edge the graph had out of `u` that this editor has not dropped.
  template <class F>
  void for_base_out(NodeId u, F&& f) const;
  // Ops outside `set` on a path from one of its ops to another.
  std::unordered_set<NodeId> sandwiched(const std::unordered_map<NodeId, std::size_t>& set) const;
  struct PendingEdge {
    NodeId from, to;
    EdgeProps props;
  };
  Graph& g_;
  std::string transform_;
  std::vector<PendingEdge> add_;
  std::vector<std::pair<NodeId, bool (*)(NodeId, const EdgeProps&, const Graph&)>> drop_;
  // Base edges (from, to) that commit() drops (repeat moves them to the last copy).
  std::set<std::pair<NodeId, NodeId>> drop_set_;
  bool dirty_ = false;
};

}  // namespace bneck
