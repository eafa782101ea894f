#include <catch2/catch.hpp>
#include <sstream>

#include "helpers.hpp"
#include "sim/base/error.hpp"

using namespace bneck;
using namespace bneck::test;

TEST_CASE("the canonical JSON form round-trips a real trace", "[json]") {
  Trace a = load_trace(demo_trace());
  std::stringstream ss;
  write_trace_json(a, ss);
  Trace b = read_trace_json(ss, "roundtrip.json");
  REQUIRE(b.ops.size() == a.ops.size());
  CHECK(b.lanes.size() == a.lanes.size());
  CHECK(b.ranges.size() == a.ranges.size());
  CHECK(b.devices.size() == a.devices.size());
  CHECK(b.devices[0].sm_count == 132);
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    INFO("op " << i);
    CHECK(b.ops[i].start == a.ops[i].start);
    CHECK(b.ops[i].end() == a.ops[i].end());
    CHECK(b.ops[i].kind == a.ops[i].kind);
    CHECK(b.ops[i].link == a.ops[i].link);
    CHECK(b.ops[i].lane == a.ops[i].lane);
    CHECK(b.name(b.ops[i]) == a.name(a.ops[i]));
    CHECK(b.ops[i].api_class() == a.ops[i].api_class());
  }
  // Replaying the JSON form gives the same schedule as replaying the SQLite export.
  auto ra = replay(std::move(a));
  auto rb = replay(std::move(b));
  CHECK(ra.sim.start == rb.sim.start);
  CHECK(ra.sim.end == rb.sim.end);
}

TEST_CASE("malformed workloads are rejected naming the file and the record", "[json][errors]") {
  auto bad = [](const std::string& text) {
    try {
      workload(text);
    } catch (const InputError& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  CHECK_THAT(bad("{\"format\": \"bneck-workload\", \"lanes\": [{\"kind\": \"stream\"}], \"ops\": [{\"lane\": 0}]}"),
             Catch::Contains("workload.json: ops[0]") && Catch::Contains("duration"));
  CHECK_THAT(bad("{\"format\": \"bneck-workload\", \"lanes\": [{\"kind\": \"stream\"}], \"ops\": [{\"lane\": 0, \"duration\": 5}]}"),
             Catch::Contains("ops[0]"));
  CHECK_THAT(bad("{\"format\": \"bneck-workload\", \"lanes\": [{\"kind\": \"stream\"}], \"ops\": [{\"lane\": 3, \"duration\": \"1 ms\"}]}"),
             Catch::Contains("lane"));
  CHECK_THAT(bad("{\"format\": \"bneck-workload\", \"lanes\": [{\"kind\": \"stream\"}], \"ops\": [{\"lane\": 0, \"duration\": \"1 ms\", "
                 "\"after\": [7]}]}"),
             Catch::Contains("after"));
  CHECK_THAT(bad("{\"format\": \"something-else\"}"), Catch::Contains("format"));
  CHECK_THAT(bad("{\"format\": \"bneck-workload\", \"ops\": [ {"), Catch::Contains("malformed JSON"));
}
