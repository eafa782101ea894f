// Dependency graph over a Trace. The graph owns its nodes (sim/graph: Node, GraphLane): node i
// of a freshly built graph is trace op i; transforms add, remove, split and repeat nodes and add
// lanes through GraphEditor (sim/graph/edit.hpp). The engine reads only the graph. Typed edges
// carry a delay and say which endpoints they join (end->start, start->start, end->end). Stored as a Boost compressed sparse
// row graph of out-edges (16 bytes per edge): tens of millions of ops fit in memory.
//
// Edge delays of a measured trace are calibrated so that replaying the measured durations
// reproduces the measured schedule: for each op, the in-edge that bound its measured start (the
// predecessor that came last: latest source time, ties to stream order, then events, launches,
// host order) gets the observed gap; every other edge gets min(nominal, observed). Nominal delays
// are learned from the binding edges of the trace itself: the 1st percentile of the observed gap
// per edge type, device and op kind (launch latency of ops that were launch-bound, turnaround of
// ops queued behind their predecessor), else 2 us for launches and 0 otherwise. A blocking call whose
// awaited op ended after the call began keeps, as its own duration, the time it took to return
// after that op ended (its wake-up), so that it returns as soon as faster work allows.
#pragma once
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/range/iterator_range.hpp>
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "traces/ir.hpp"

namespace bneck {

enum class EdgeType : std::uint8_t {
  HostOrder = 0,    // program order on a host thread (delay: measured CPU time between calls)
  Launch = 1,       // API call start -> device op start (launch latency)
  GraphLaunch = 2,  // cudaGraphLaunch start -> node op start
  StreamOrder = 3,  // previous op on the stream ends -> next op starts (FIFO)
  Event = 4,        // op before cudaEventRecord ends -> first op after cudaStreamWaitEvent starts
  HostSync = 5,     // awaited device op ends -> blocking call returns (end -> end), or the host's
                    // next call starts (end -> start: a CPU polling a count a kernel writes to
                    // mapped memory, DeepEP's notify_dispatch)
  Explicit = 6,     // workload dependency
  ThreadWake = 7,   // inferred: a host thread's burst of calls after an idle gap follows the latest
                    // call another thread of its process finished during that gap (the trace has no
                    // CPU-side synchronization; this is the cross-thread causality replay needs)
  Collective = 8,   // another member of the same collective starts -> this member can end
                    // (start -> end; see DepType::StartToEnd)
  CopyEngine = 9,   // inferred (sharing calibration): a copy that the trace shows ending with a
                    // later copy of the same kind on its GPU, which started while it ran, ends
                    // when that one ends (end -> end); its own work ended when the later began
};
inline constexpr int kEdgeTypeCount = 10;
const char* to_string(EdgeType t);

// 8 bytes: a 56-bit signed delay and the edge's type and attachment packed together.
class EdgeProps {
 public:
  EdgeProps() = default;
  EdgeProps(TimeNs delay, EdgeType type, DepType attach) { set(delay, type, attach); }
  TimeNs delay() const { return static_cast<TimeNs>(bits_) >> 8; }
  EdgeType type() const { return static_cast<EdgeType>(bits_ & 0xF); }
  DepType attach() const { return static_cast<DepType>((bits_ >> 5) & 0x3); }
  // Calibration: this edge bound its target's measured start (or end) in the trace.
  bool binding() const { return (bits_ >> 4) & 1; }
  void set(TimeNs delay, EdgeType type, DepType attach, bool binding = false) {
    bits_ = (static_cast<std::uint64_t>(delay) << 8) | (static_cast<std::uint64_t>(attach) << 5) |
            (static_cast<std::uint64_t>(binding) << 4) | static_cast<std::uint64_t>(type);
  }
  void set_delay(TimeNs d) { set(d, type(), attach(), binding()); }
  void set_binding(bool b) { set(delay(), type(), attach(), b); }

 private:
  std::uint64_t bits_ = 0;
};
static_assert(sizeof(EdgeProps) == 8);

using CsrGraph =
    boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, EdgeProps, boost::no_property, std::uint32_t, std::uint32_t>;

inline constexpr std::uint16_t kNoResource = 0xFFFF;

struct Resource {
  std::string name;
  std::uint32_t capacity = 1;
};

struct GraphStats {
  std::uint64_t edges_by_type[kEdgeTypeCount] = {};
  std::uint64_t bound_by_type[kEdgeTypeCount] = {};  // ops whose measured start an edge type bound
  std::uint64_t blocked_syncs = 0;
  std::uint64_t inferred_waits = 0;  // event edges inferred for stream waits the trace left unresolved
  TimeNs nominal_stream_gap_ns = 0;
};

using NodeId = std::uint32_t;

// A lane of the graph: a host thread or a stream. The trace's lanes come first (same ids);
// transforms add lanes (a communication stream, the streams and threads of a new rank).
struct GraphLane {
  LaneKind kind = LaneKind::Thread;
  std::uint32_t device = kNone;  // graph device index (trace devices first, then synthetic ones)
  std::uint32_t process = 0;     // graph process index (one per rank)
  std::uint32_t capacity = 1;    // ops it runs at once (1, or the trace's peak overlap)
  bool fifo = true;
  std::string name;  // set for synthetic lanes; trace lanes use Trace::lane_label
};

// Where a node's intrinsic duration comes from.
enum class DurationSource : std::uint8_t {
  Op = 0,      // the cost model's duration of the trace op it is (measured, model or hybrid)
  Origin = 1,  // the cost model's duration of its origin op, times a work fraction (clones, splits)
  Fixed = 2,   // a fixed duration a transform computed (a synthesized collective, a re-timed op)
};

// A synthetic node (12 bytes). Node n < trace ops is trace op n and takes its lane, kind and
// flags from the op (no row is stored for it: a graph of a trace costs nothing per node beyond
// its edges); synthetic nodes follow, node T + k being nodes[k]. Details of synthetic or re-timed
// nodes live in a side table (Graph::side).
struct Node {
  LaneId lane = kNone;  // graph lane
  std::uint32_t side = kNone;
  OpKind kind = OpKind::Api;
  std::uint8_t flags = 0;                      // Node::k*
  std::uint16_t resource = kNoResource;        // shared hardware held while running (copy engine)
  static constexpr std::uint8_t kRemoved = 2;  // removed by a transform: a zero-time pass-through
  static constexpr std::uint8_t kNccl = 8;     // communication kernel
};
static_assert(sizeof(Node) == 12, "Node must stay compact");

struct SideInfo {
  OpId origin = kNone;  // synthetic nodes: the op cloned (its time and work); kNone: none
  DurationSource source = DurationSource::Op;
  TimeNs fixed_ns = 0;       // Fixed
  double work_fraction = 1;  // Origin: share of the origin op's work (a split kernel: 1/N)
  TimeNs release = 0;        // earliest start when the node has no start dependency
  std::string name;          // synthetic nodes: shown in reports
  std::string transform;     // the transform that synthesized or re-timed it
};

class ShareModel;  // sim/engine/sharing.hpp

struct Graph {
  const Trace* trace = nullptr;
  CsrGraph csr;
  std::vector<Node> nodes;  // synthetic nodes: node num_trace_nodes() + k is nodes[k]
  std::vector<SideInfo> side;
  std::unordered_map<NodeId, std::uint32_t> trace_side;  // trace nodes with side info (re-timed)
  std::vector<bool> trace_removed;                       // trace nodes removed by a transform (empty: none)
  std::vector<std::uint16_t> trace_resource;             // per trace node, empty if no node needs one
  std::vector<LaneId> trace_lane;                        // per trace node, the lane a transform moved it to
                                                         // (kNone: its op's; empty: none moved)
  std::vector<GraphLane> lanes;                          // trace lanes first
  std::uint32_t num_devices = 0;                         // trace devices, then synthetic ones
  std::uint32_t num_processes = 0;                       // trace processes (ranks), then synthetic ones
  std::vector<Resource> resources;
  // Intrinsic duration of blocking calls that waited (see header comment) and of collective members
  // (their part after the last arrival); others use the op's.
  class Intrinsic {
   public:
    void set(OpId n, TimeNs d) {
      if (n >= marked_.size()) marked_.resize(n + 1, false);
      marked_[n] = true;
      times_[n] = d;
    }
    // Its intrinsic duration, or nullptr: a bit per op answers first (the engine asks for every op).
    const TimeNs* find(OpId n) const {
      if (n >= marked_.size() || !marked_[n]) return nullptr;
      auto it = times_.find(n);
      return it == times_.end() ? nullptr : &it->second;
    }

   private:
    std::vector<bool> marked_;
    std::unordered_map<OpId, TimeNs> times_;
  };
  Intrinsic intrinsic;
  // Sharing (sim/engine/sharing.hpp): when set, concurrent device ops share their GPU's SMs and HBM
  // and durations emerge; `sharing_lost` holds, per trace op, the ns that sharing cost it in the
  // trace (calibrated; its time alone is its measured time less that; empty: none lost).
  std::shared_ptr<const ShareModel> sharing;
  std::vector<std::uint32_t> sharing_lost;
  TimeNs lost_to_sharing(NodeId n) const { return n < sharing_lost.size() ? sharing_lost[n] : 0; }
  // Kernels the trace shows draining (a later kernel got SMs before they ended): the fraction of
  // their alone work done while draining, when their SMs are free for later kernels (calibrated;
  // sparse, trace nodes).
  std::vector<std::pair<NodeId, float>> sharing_drain;  // sorted by node
  // `cursor` (optional): where the previous lookup ended; lookups in node order then cost O(1).
  double drain_fraction(NodeId n, std::size_t* cursor = nullptr) const {
    const std::size_t size = sharing_drain.size();
    if (size == 0) return 0;
    std::size_t k = 0;
    if (cursor && *cursor < size && sharing_drain[*cursor].first <= n) {
      k = *cursor;  // gallop forward from the hint
      std::size_t step = 1;
      while (k + step < size && sharing_drain[k + step].first <= n) {
        k += step;
        step *= 2;
      }
      while (step > 1) {
        step /= 2;
        if (k + step < size && sharing_drain[k + step].first <= n) k += step;
      }
    } else {
      auto it = std::upper_bound(sharing_drain.begin(), sharing_drain.end(), n, [](NodeId v, const auto& e) { return v < e.first; });
      if (it == sharing_drain.begin()) {
        if (cursor) *cursor = 0;
        return 0;
      }
      k = static_cast<std::size_t>(it - sharing_drain.begin()) - 1;
    }
    if (cursor) *cursor = k;
    return sharing_drain[k].first == n ? sharing_drain[k].second : 0;
  }
  void set_lost_to_sharing(NodeId n, std::uint32_t ns) {  // trace nodes only
    if (n >= num_trace_nodes()) return;
    if (sharing_lost.empty()) sharing_lost.assign(num_trace_nodes(), 0);
    sharing_lost[n] = ns;
  }
  GraphStats stats;
  // Device ops that started well after their launch and stream allowed, in a process whose stream
  // waits the trace does not resolve, with no op of another stream ending just before to wait for
  // (sorted): they waited for something the trace does not show, kept in their launch edge's
  // measured delay. Transforms that re-time launches keep that delay (it is no launch overhead).
  std::vector<NodeId> unknown_wait;
  bool waited_unknown(NodeId n) const { return std::binary_search(unknown_wait.begin(), unknown_wait.end(), n); }
  std::map<std::string, Anomaly> anomalies;  // dependencies the builder could not resolve

  std::size_t num_trace_nodes() const { return trace ? trace->ops.size() : 0; }
  std::size_t num_nodes() const { return num_trace_nodes() + nodes.size(); }
  std::size_t num_edges() const { return boost::num_edges(csr); }

  bool synthetic(NodeId n) const { return n >= num_trace_nodes(); }
  const Node& synth(NodeId n) const { return nodes[n - num_trace_nodes()]; }
  Node& synth(NodeId n) { return nodes[n - num_trace_nodes()]; }
  OpKind kind(NodeId n) const { return synthetic(n) ? synth(n).kind : trace->ops[n].kind; }
  bool removed(NodeId n) const {
    return synthetic(n) ? (synth(n).flags & Node::kRemoved) != 0 : !trace_removed.empty() && trace_removed[n];
  }
  bool is_device(NodeId n) const { return is_device_op(kind(n)) && !removed(n); }
  bool nccl(NodeId n) const { return synthetic(n) ? (synth(n).flags & Node::kNccl) != 0 : (trace->ops[n].flags & Op::kFlagNccl) != 0; }
  LaneId lane(NodeId n) const {
    if (synthetic(n)) return synth(n).lane;
    return trace_lane.empty() || trace_lane[n] == kNone ? trace->ops[n].lane : trace_lane[n];
  }
  std::uint32_t device(NodeId n) const { return lanes[lane(n)].device; }
  std::uint32_t process(NodeId n) const { return lanes[lane(n)].process; }
  // The rank of a node's process (trace ranks; synthetic processes are numbered after them).
  std::uint32_t rank(NodeId n) const { return rank_of_process(process(n)); }
  std::uint32_t rank_of_process(std::uint32_t p) const;
  // The trace op a node is or was cloned from; kNone for work synthesized from nothing.
  OpId origin(NodeId n) const { return synthetic(n) ? side[synth(n).side].origin : n; }
  std::uint16_t resource_of(NodeId n) const {
    if (synthetic(n)) return synth(n).resource;
    return trace_resource.empty() ? kNoResource : trace_resource[n];
  }
  const SideInfo* side_of(NodeId n) const {
    if (synthetic(n)) return &side[synth(n).side];
    if (trace_side.empty()) return nullptr;
    auto it = trace_side.find(n);
    return it == trace_side.end() ? nullptr : &side[it->second];
  }
  // Earliest start of a node without start dependencies, and whether it has one (synthetic
  // nodes always do).
  bool released(NodeId n) const { return synthetic(n) || (trace->ops[n].flags & Op::kFlagReleased); }
  TimeNs release(NodeId n) const;
  // A node's name: its op's, or the synthetic name a transform gave it.
  std::string name(NodeId n) const;
  // The trace string id of that name when it is its origin op's (kNone: a synthetic name, or none).
  std::uint32_t name_id(NodeId n) const;
  std::string lane_label(LaneId l) const;
  // Measured times exist for trace nodes only.
  bool measured(NodeId n) const { return !synthetic(n); }
};

struct GraphOptions {
  bool calibrate = true;  // measured traces: calibrate edge delays (see header comment)
};

// Builds the dependency graph of a finalized trace. Throws InputError if explicit dependencies
// form a cycle.
Graph build_graph(const Trace& trace, const GraphOptions& opt = {});

}  // namespace bneck
