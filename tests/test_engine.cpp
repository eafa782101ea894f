// The engine on hand-written workloads (analysis: test_analysis.cpp); every expected number is computed by hand.
#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "sim/base/error.hpp"

using namespace bneck;
using namespace bneck::test;

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

TEST_CASE("a node with hundreds of start dependencies waits for the last of them", "[engine]") {
  // N kernels of 1 us back to back on stream 0, then one on stream 1 after every one of them
  // (N explicit end->start edges, past the byte a node's count starts in): it starts when the
  // last ends, N us, and ends 1 us later. 254, 255 and 256 straddle where the count moves aside.
  for (int n : {3, 254, 255, 256, 300}) {
    std::string ops, after;
    for (int i = 0; i < n; ++i) {
      ops += R"({"kind": "kernel", "name": "k", "lane": 0, "duration": "1 us"},)";
      after += (i ? ", " : "") + std::to_string(i);
    }
    auto r = replay(workload(R"({"format": "bneck-workload", "lanes": [{"kind": "stream"}, {"kind": "stream"}], "ops": [)" + ops +
                             R"({"kind": "kernel", "name": "last", "lane": 1, "duration": "1 us", "after": [)" + after + "]}]}"));
    INFO(n << " dependencies");
    CHECK(r.sim.start[static_cast<std::size_t>(n)] == n * kNsPerUs);
    CHECK(r.sim.end[static_cast<std::size_t>(n)] == (n + 1) * kNsPerUs);
  }
}
