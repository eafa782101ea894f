// Dependency graph over a Trace: node i is trace op i; typed edges carry a delay and say which
// endpoints they join (end->start, start->start, end->end). Stored as a Boost compressed sparse
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
#include <cstdint>
#include <map>
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
  HostSync = 5,     // awaited device op ends -> blocking call returns (end -> end)
  Explicit = 6,     // workload dependency
  ThreadWake = 7,   // inferred: a host thread's burst of calls after an idle gap follows the latest
                    // call another thread of its process finished during that gap (the trace has no
                    // CPU-side synchronization; this is the cross-thread causality replay needs)
  Collective = 8,   // another member of the same collective starts -> this member can end
                    // (start -> end; see DepType::StartToEnd)
};
inline constexpr int kEdgeTypeCount = 9;
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

using CsrGraph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, EdgeProps,
                                                     boost::no_property, std::uint32_t, std::uint32_t>;

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

struct Graph {
  const Trace* trace = nullptr;
  CsrGraph csr;
  // Shared hardware an op holds while it runs besides its lane (copy engines); kNoResource if none.
  std::vector<std::uint16_t> resource;  // per node, empty if no node needs one
  std::vector<Resource> resources;
  std::vector<std::uint32_t> lane_capacity;  // per trace lane: ops it runs at once (1, or the trace's peak overlap)
  // Intrinsic duration of blocking calls that waited (see header comment); others use the op's.
  std::unordered_map<OpId, TimeNs> intrinsic;
  GraphStats stats;
  std::map<std::string, Anomaly> anomalies;  // dependencies the builder could not resolve

  std::size_t num_nodes() const { return boost::num_vertices(csr); }
  std::size_t num_edges() const { return boost::num_edges(csr); }
  std::uint16_t resource_of(OpId n) const { return resource.empty() ? kNoResource : resource[n]; }
};

struct GraphOptions {
  bool calibrate = true;  // measured traces: calibrate edge delays (see header comment)
  // The --overlap-comm what-if: communication kernels no longer wait for where the trace launched
  // them; each starts as soon as its inputs are ready: the end of the last non-communication device
  // op of its device issued before it (program order), and its stream predecessor. Their in-edges
  // take no calibrated delay.
  bool overlap_comm = false;
};

// Builds the dependency graph of a finalized trace. Throws InputError if explicit dependencies
// form a cycle.
Graph build_graph(const Trace& trace, const GraphOptions& opt = {});

}  // namespace bneck
