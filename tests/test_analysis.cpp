// sim/analysis on hand-written workloads: overlap of compute and communication, the critical path
// and slack; every expected number is computed by hand.
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
