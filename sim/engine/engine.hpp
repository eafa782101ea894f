// Discrete-event engine: replays a dependency graph with durations from a CostModel.
//
// Events are ordered by (time, sequence number), so equal-time events run in the order they
// were scheduled and the result is deterministic. A node becomes ready when all its start
// dependencies have fired (start->start edges fire when their source starts, end->start edges
// when it ends), at the latest source time plus edge delay. It then acquires its lane (a host
// thread or stream, with the capacity the trace showed, normally 1) and any shared resource
// (copy engines); if one is busy it waits in that resource's FIFO queue. It runs for its
// intrinsic duration and completes at the later of that and its end->end dependencies
// (a blocking call returns only after the awaited op ended, plus the edge delay).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/engine/cost_model.hpp"

namespace bneck {

struct SimResult {
  std::vector<TimeNs> start, end;  // per node, simulated
  // What determined each node's start: the source node of the binding edge (kNone for a root),
  // with kViaStart set when the edge left the source's start (start->start) and kViaResource
  // when the node waited for a lane or resource that the source released.
  std::vector<std::uint32_t> start_src;
  std::unordered_map<OpId, std::uint32_t> end_src;  // nodes whose end an end->end (or, with kViaStart,
                                                    // a start->end) edge determined
  std::vector<TimeNs> resource_busy;                // per Graph::resources entry, ns busy (summed over capacity)
  // Sharing (Graph::sharing), per node: 0 if it ran at full speed, else what slowed it (1 SMs,
  // 2 HBM); empty without sharing. Its time alone is the cost model's duration.
  std::vector<std::uint8_t> shared;
  std::uint64_t events = 0;
  static constexpr std::uint32_t kViaStart = 0x80000000u;
  static constexpr std::uint32_t kViaResource = 0x40000000u;
  static constexpr std::uint32_t kSrcMask = 0x3FFFFFFFu;
};

// Throws InputError naming the trace's source if the graph has a cycle (some node never runs).
SimResult simulate(const Graph& g, const CostModel& model);

}  // namespace bneck
