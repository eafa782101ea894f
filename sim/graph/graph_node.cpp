// The graph's per-node and per-lane accessors (the builder is graph.cpp).
#include <algorithm>

#include "sim/graph/graph.hpp"

namespace bneck {

std::uint32_t Graph::rank_of_process(std::uint32_t p) const {
  if (trace && p < trace->processes.size()) return trace->processes[p].rank != kNone ? trace->processes[p].rank : p;
  // Synthetic ranks follow the trace's highest rank.
  std::uint32_t top = 0;
  if (trace)
    for (std::uint32_t q = 0; q < trace->processes.size(); ++q) top = std::max(top, rank_of_process(q) + 1);
  return top + (p - (trace ? static_cast<std::uint32_t>(trace->processes.size()) : 0));
}

TimeNs Graph::release(NodeId n) const {
  if (synthetic(n)) return side[synth(n).side].release;
  OpId o = origin(n);
  return trace && o < trace->ops.size() ? trace->ops[o].start : 0;
}

std::uint32_t Graph::name_id(NodeId n) const {
  if (const SideInfo* s = side_of(n); s && !s->name.empty()) return kNone;
  OpId o = origin(n);
  return trace && o < trace->ops.size() ? trace->ops[o].name : kNone;
}

std::string Graph::name(NodeId n) const {
  if (std::uint32_t id = name_id(n); id != kNone) return trace->strings.str(id);
  if (const SideInfo* s = side_of(n); s && !s->name.empty()) return s->name;
  return "node " + std::to_string(n);
}

std::string Graph::lane_label(LaneId l) const {
  if (l < lanes.size() && !lanes[l].name.empty()) return lanes[l].name;
  return trace && l < trace->lanes.size() ? trace->lane_label(l) : "lane " + std::to_string(l);
}

const char* to_string(EdgeType t) {
  static const char* const names[] = {"host_order", "launch",   "graph_launch", "stream_order", "event",
                                      "host_sync",  "explicit", "thread_wake",  "collective",   "copy_engine"};
  return names[static_cast<int>(t)];
}

}  // namespace bneck
