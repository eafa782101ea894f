// Graphs with synthetic nodes (GraphEditor): repeated work, an added collective on a new stream,
// a split kernel, removal. Every expected number is computed by hand.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "sim/analysis/ranges.hpp"
#include "sim/graph/edit.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {
// a 1 ms -> b 2 ms -> c 1 ms on one stream.
const char* kChain = R"({"format": "bneck-workload", "lanes": [{"kind": "stream", "name": "s0"}], "ops": [
    {"kind": "kernel", "name": "a", "lane": 0, "duration": "1 ms"},
    {"kind": "kernel", "name": "b", "lane": 0, "duration": "2 ms"},
    {"kind": "kernel", "name": "c", "lane": 0, "duration": "1 ms"}]})";

std::vector<std::string> path_names(const Graph& g, const SimResult& r) {
  std::vector<std::string> out;
  for (OpId n : critical_path(r, last_device_op(g, sim_schedule(r))))
    if (g.is_device(n)) out.push_back(g.name(n));  // removed nodes are pass-throughs
  return out;
}
}  // namespace

TEST_CASE("repeat: b runs three times in all, c follows the last copy", "[graph][edit]") {
  // a 0..1, b 1..3, b (repeat 2) 3..5, b (repeat 3) 5..7, c 7..8: makespan 8 ms, and every node is
  // on the critical path (one stream, no gaps).
  Trace t = workload(kChain);
  Graph g = build_graph(t);
  std::vector<std::vector<NodeId>> copies;
  {
    GraphEditor ed(g, "--repeat");
    copies = ed.repeat({1}, 2);
  }
  REQUIRE(g.num_nodes() == 5);
  REQUIRE(copies.size() == 2);
  SimResult r = simulate(g, MeasuredCostModel());
  CHECK(r.start[copies[0][0]] == 3 * kNsPerMs);
  CHECK(r.start[copies[1][0]] == 5 * kNsPerMs);
  CHECK(r.start[2] == 7 * kNsPerMs);
  CHECK(device_span(g, sim_schedule(r)).length() == 8 * kNsPerMs);
  CHECK(path_names(g, r) == std::vector<std::string>{"a", "b", "b (repeat 2)", "b (repeat 3)", "c"});
  CHECK(g.synthetic(copies[1][0]));
  CHECK(g.side_of(copies[1][0])->transform == "--repeat");
  // The measured schedule knows only the trace's 3 ops.
  CHECK(last_device_op(g, measured_schedule(t)) < 3);
}

TEST_CASE("repeat: an op between the set's ops (another thread's kernel on the stream) follows the copies", "[graph][edit]") {
  // One stream: a 1 ms, x 2 ms, b 1 ms, c 1 ms; the set {a, b}, x outside it between them. Run
  // twice: a 0..1, b right after a (x no longer between them) 1..2, the copies a' 2..3 and b' 3..4
  // or later; x and c follow the last copy. Six ops on one stream: 7 ms. (Before: x waited for the
  // last copy while b, which the copies follow, waited for x: "dependency cycle".)
  Trace t = workload(R"({"format": "bneck-workload", "lanes": [{"kind": "stream", "name": "s0"}], "ops": [
    {"kind": "kernel", "name": "a", "lane": 0, "duration": "1 ms"},
    {"kind": "kernel", "name": "x", "lane": 0, "duration": "2 ms"},
    {"kind": "kernel", "name": "b", "lane": 0, "duration": "1 ms"},
    {"kind": "kernel", "name": "c", "lane": 0, "duration": "1 ms"}]})");
  Graph g = build_graph(t);
  std::vector<std::vector<NodeId>> copies;
  {
    GraphEditor ed(g, "--repeat");
    copies = ed.repeat({0, 2}, 1);
  }
  REQUIRE(copies.size() == 1);
  SimResult r = simulate(g, MeasuredCostModel());
  CHECK(r.start[2] == 1 * kNsPerMs);
  CHECK(r.start[copies[0][0]] == 2 * kNsPerMs);
  CHECK(r.start[copies[0][1]] >= 3 * kNsPerMs);
  CHECK(r.start[1] >= 3 * kNsPerMs);
  CHECK(r.start[3] >= r.end[copies[0][1]]);
  CHECK(device_span(g, sim_schedule(r)).length() == 7 * kNsPerMs);
}

TEST_CASE("an all-reduce added on a new stream after a, c waits for it", "[graph][edit]") {
  // a 0..1, then the synthetic all-reduce (fixed 3 ms) on the new stream 1..4, b 1..3 beside it,
  // c after b and the all-reduce: 4..5. Compute 4 ms; communication 3 ms of which b overlaps
  // 2 ms (1..3): 1 ms exposed. Critical path: a, all-reduce, c.
  Trace t = workload(kChain);
  Graph g = build_graph(t);
  NodeId ar;
  {
    GraphEditor ed(g, "--test");
    GraphLane comm;
    comm.kind = LaneKind::Stream;
    comm.device = 0;
    comm.name = "comm stream";
    LaneId l = ed.add_lane(comm);
    NewNode n;
    n.name = "ncclAllReduce (synthetic)";
    n.lane = l;
    n.fixed_ns = 3 * kNsPerMs;
    n.nccl = true;
    ar = ed.add_node(n);
    ed.add_edge(0, ar, EdgeType::Event, DepType::EndToStart);
    ed.add_edge(ar, 2, EdgeType::Event, DepType::EndToStart);
  }
  SimResult r = simulate(g, MeasuredCostModel());
  CHECK(r.start[ar] == 1 * kNsPerMs);
  CHECK(r.end[ar] == 4 * kNsPerMs);
  CHECK(r.start[2] == 4 * kNsPerMs);
  Overlap ov = compute_overlap(g, sim_schedule(r));
  CHECK(ov.compute_ns == 4 * kNsPerMs);
  CHECK(ov.communication_ns == 3 * kNsPerMs);
  CHECK(ov.compute_comm_overlap_ns == 2 * kNsPerMs);
  CHECK(ov.exposed_communication_ns == 1 * kNsPerMs);
  CHECK(path_names(g, r) == std::vector<std::string>{"a", "ncclAllReduce (synthetic)", "c"});
  CHECK(g.lane_label(g.lane(ar)) == "comm stream");
}

TEST_CASE("split: b in two halves on two streams, or back to back on its own", "[graph][edit]") {
  // Two streams: b's halves (1 ms each) both run 1..2 after a; c waits for both: 2..3, span 3 ms.
  Trace t = workload(kChain);
  Graph g = build_graph(t);
  std::vector<NodeId> parts;
  {
    GraphEditor ed(g, "--split");
    GraphLane s1;
    s1.kind = LaneKind::Stream;
    s1.device = 0;
    LaneId l = ed.add_lane(s1);
    parts = ed.split(1, 2, {l});
  }
  REQUIRE(parts.size() == 2);
  SimResult r = simulate(g, MeasuredCostModel());
  CHECK(r.start[parts[1]] == 1 * kNsPerMs);
  CHECK(r.end[parts[0]] == 2 * kNsPerMs);
  CHECK(r.end[parts[1]] == 2 * kNsPerMs);
  CHECK(r.end[2] == 3 * kNsPerMs);
  // One stream: the halves run 1..2 and 2..3, c 3..4: the work is the same, so is the span.
  Graph g1 = build_graph(t);
  {
    GraphEditor ed(g1, "--split");
    parts = ed.split(1, 2);
  }
  SimResult r1 = simulate(g1, MeasuredCostModel());
  CHECK(r1.start[parts[1]] == 2 * kNsPerMs);
  CHECK(r1.end[2] == 4 * kNsPerMs);
}

TEST_CASE("remove: b becomes a pass-through, re-time: c fixed at 5 ms", "[graph][edit]") {
  // a 0..1, b takes no time and leaves the device ops, c 1..6.
  Trace t = workload(kChain);
  Graph g = build_graph(t);
  {
    GraphEditor ed(g, "--test");
    ed.remove(1);
    ed.retime_fixed(2, 5 * kNsPerMs);
  }
  SimResult r = simulate(g, MeasuredCostModel());
  CHECK(r.start[2] == 1 * kNsPerMs);
  CHECK(r.end[2] == 6 * kNsPerMs);
  CHECK(path_names(g, r) == std::vector<std::string>{"a", "c"});
  Overlap ov = compute_overlap(g, sim_schedule(r));
  CHECK(ov.compute_ns == 6 * kNsPerMs);
}
