// Engine and analysis on hand-written workloads; every expected number is computed by hand.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "sim/base/error.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {
const char* kTwoStreams = R"({"format": "bneck-workload",
  "lanes": [{"kind": "stream", "name": "compute"}, {"kind": "stream", "name": "comm"}],
  "ops": [)";
}

TEST_CASE("the text's overlap example: 8 ms compute, 6 ms communication from 4 ms", "[engine][overlap]") {
  // Compute runs 0..8 ms; communication is released at 4 ms on its own stream and runs 4..10 ms.
  // Makespan 10 ms; communication overlaps compute for 8 - 4 = 4 ms, so 6 - 4 = 2 ms is exposed.
  auto r = replay(workload(std::string(kTwoStreams) + R"(
    {"kind": "kernel", "name": "gemm", "lane": 0, "duration": "8 ms"},
    {"kind": "kernel", "name": "ncclAllReduce", "lane": 1, "duration": "6 ms", "start": "4 ms"}]})"));
  Span s = device_span(r.graph, sim_schedule(r.sim));
  CHECK(s.length() == 10 * kNsPerMs);
  Overlap ov = compute_overlap(r.graph, sim_schedule(r.sim));
  CHECK(ov.compute_ns == 8 * kNsPerMs);
  CHECK(ov.communication_ns == 6 * kNsPerMs);
  CHECK(ov.compute_comm_overlap_ns == 4 * kNsPerMs);
  CHECK(ov.exposed_communication_ns == 2 * kNsPerMs);
  CHECK(ov.gpu_idle_ns == 0);
}

TEST_CASE("serialized communication: 8 ms + 6 ms = 14 ms, all 6 ms exposed", "[engine][overlap]") {
  auto r = replay(workload(std::string(kTwoStreams) + R"(
    {"kind": "kernel", "name": "gemm", "lane": 0, "duration": "8 ms"},
    {"kind": "kernel", "name": "ncclAllReduce", "lane": 1, "duration": "6 ms", "after": [0]}]})"));
  CHECK(device_span(r.graph, sim_schedule(r.sim)).length() == 14 * kNsPerMs);
  Overlap ov = compute_overlap(r.graph, sim_schedule(r.sim));
  CHECK(ov.exposed_communication_ns == 6 * kNsPerMs);
  CHECK(ov.compute_comm_overlap_ns == 0);
}

TEST_CASE("ops on one stream run back to back in FIFO order", "[engine]") {
  // 1 + 2 + 3 ms on one stream = 6 ms; the second starts at 1 ms, the third at 3 ms.
  auto r = replay(workload(R"({"format": "bneck-workload", "lanes": [{"kind": "stream"}], "ops": [
    {"kind": "kernel", "name": "a", "lane": 0, "duration": "1 ms"},
    {"kind": "kernel", "name": "b", "lane": 0, "duration": "2 ms"},
    {"kind": "kernel", "name": "c", "lane": 0, "duration": "3 ms"}]})"));
  CHECK(r.sim.start[1] == 1 * kNsPerMs);
  CHECK(r.sim.start[2] == 3 * kNsPerMs);
  CHECK(r.sim.end[2] == 6 * kNsPerMs);
}

TEST_CASE("fork-join: the critical path takes the longer branch, the other has slack", "[engine][critical]") {
  // load 1 ms, then compute 4 + 2 ms on stream B while aux 3.5 ms runs on stream C, then reduce
  // 1.5 ms after both (streams_base in miniature). Path: load, compute, compute, reduce = 8.5 ms.
  // aux ends at 1 + 3.5 = 4.5 ms, reduce starts at 7 ms: aux has 2.5 ms of slack.
  auto r = replay(workload(R"({"format": "bneck-workload",
    "lanes": [{"kind": "stream"}, {"kind": "stream"}, {"kind": "stream"}], "ops": [
    {"kind": "kernel", "name": "k_load", "lane": 0, "duration": "1 ms"},
    {"kind": "kernel", "name": "k_compute", "lane": 1, "duration": "4 ms", "after": [0]},
    {"kind": "kernel", "name": "k_compute", "lane": 1, "duration": "2 ms"},
    {"kind": "kernel", "name": "k_aux", "lane": 2, "duration": "3.5 ms", "after": [0]},
    {"kind": "kernel", "name": "k_reduce", "lane": 0, "duration": "1.5 ms", "after": [2, 3]}]})"));
  OpId reduce = 0;  // ops are renumbered in start order by the import
  for (OpId i = 0; i < r.trace.ops.size(); ++i)
    if (r.trace.name(r.trace.ops[i]) == "k_reduce") reduce = i;
  CHECK(r.sim.end[reduce] == 8'500'000);
  auto path = critical_path(r.sim, last_device_op(r.graph, sim_schedule(r.sim)));
  std::vector<std::string> names;
  for (OpId n : path) names.push_back(r.trace.name(r.trace.ops[n]));
  CHECK(names == std::vector<std::string>{"k_load", "k_compute", "k_compute", "k_reduce"});
  auto slack = compute_slack(r.graph, r.sim);
  OpId aux = 0;
  for (OpId i = 0; i < r.trace.ops.size(); ++i)
    if (r.trace.name(r.trace.ops[i]) == "k_aux") aux = i;
  CHECK(slack[aux] == 2'500'000);
  for (OpId n : path) CHECK(slack[n] == 0);
}

TEST_CASE("a copy engine serializes two host-to-device copies on different streams", "[engine][resources]") {
  // One H2D engine (capacity 1 in a workload): 2 ms then 3 ms = 5 ms, though the streams differ.
  // A D2H copy uses the other engine and overlaps them: it ends at 4 ms.
  auto r = replay(workload(R"({"format": "bneck-workload",
    "lanes": [{"kind": "stream"}, {"kind": "stream"}, {"kind": "stream"}], "ops": [
    {"kind": "memcpy", "name": "h2d a", "lane": 0, "duration": "2 ms", "copy_kind": "HtoD", "size": "64 MiB"},
    {"kind": "memcpy", "name": "h2d b", "lane": 1, "duration": "3 ms", "copy_kind": "HtoD", "size": "96 MiB"},
    {"kind": "memcpy", "name": "d2h", "lane": 2, "duration": "4 ms", "copy_kind": "DtoH", "size": "128 MiB"}]})"));
  CHECK(device_span(r.graph, sim_schedule(r.sim)).length() == 5 * kNsPerMs);
  CHECK(r.sim.end[2] == 4 * kNsPerMs);
  REQUIRE(r.graph.resources.size() == 2);
  // The path of the last copy goes through the engine wait: h2d a, then h2d b.
  auto path = critical_path(r.sim, 1);
  CHECK(path == std::vector<OpId>{0, 1});
}

TEST_CASE("a blocking call returns when the op it waits for ends, plus the edge delay", "[engine][sync]") {
  // Host: launch (10 us), then a sync call of 5 us of its own work that must also wait for the
  // 2 ms kernel launched at 0 (start->start, 0 delay) and return 3 us after it ends: 2.003 ms.
  auto r = replay(workload(R"({"format": "bneck-workload",
    "lanes": [{"kind": "thread"}, {"kind": "stream"}], "ops": [
    {"kind": "api", "name": "cudaLaunchKernel", "api_class": "launch", "lane": 0, "duration": "10 us"},
    {"kind": "kernel", "name": "k", "lane": 1, "duration": "2 ms", "launched_by": 0},
    {"kind": "api", "name": "cudaDeviceSynchronize", "lane": 0, "duration": "5 us"}],
    "deps": [{"from": 1, "to": 2, "type": "end_to_end", "delay": "3 us"}]})"));
  const auto& t = r.trace;
  OpId sync = 0;
  for (OpId i = 0; i < t.ops.size(); ++i)
    if (t.name(t.ops[i]) == "cudaDeviceSynchronize") sync = i;
  CHECK(r.sim.start[sync] == 10'000);
  CHECK(r.sim.end[sync] == 2'003'000);
}

TEST_CASE("a dependency cycle is reported as bad input", "[engine]") {
  auto t = workload(R"({"format": "bneck-workload", "lanes": [{"kind": "stream"}, {"kind": "stream"}], "ops": [
    {"kind": "kernel", "name": "a", "lane": 0, "duration": "1 ms", "after": [1]},
    {"kind": "kernel", "name": "b", "lane": 1, "duration": "1 ms", "after": [0]}]})");
  Graph g = build_graph(t);
  MeasuredCostModel m;
  CHECK_THROWS_WITH(simulate(g, m), Catch::Contains("dependency cycle") && Catch::Contains("workload.json"));
}

TEST_CASE("replay is deterministic", "[engine]") {
  auto a = replay(load_trace(demo_trace()));
  auto b = replay(load_trace(demo_trace()));
  CHECK(a.sim.start == b.sim.start);
  CHECK(a.sim.end == b.sim.end);
  CHECK(a.sim.start_src == b.sim.start_src);
}
