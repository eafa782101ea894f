// What-ifs against the measured what-if pairs of ../shared/traces/h200 and the text's examples.
#include <catch2/catch.hpp>
#include <cmath>
#include <deque>

#include "helpers.hpp"
#include "sim/base/error.hpp"
#include "tools/views/whatif_view.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {

WhatIfReport whatif(const std::string& path, const std::string& range, std::vector<Transform> tr) {
  static std::deque<Trace> keep;  // the reports point at their traces
  Trace* t = &keep.emplace_back(load_trace(path));
  WhatIfOptions opt;
  if (!range.empty()) opt.range_regex = range;
  opt.transforms = std::move(tr);
  return run_whatif(*t, opt);
}

double measured_median(const std::string& path, const std::string& range) {
  Trace t = load_trace(path);
  ReplayOptions o;
  o.range_regex = range;
  ReplayReport r = run_replay(t, o);
  std::vector<double> v;
  for (const auto& rr : r.ranges) v.push_back(static_cast<double>(rr.measured_span_ns));
  return median(v);
}

double rel(double a, double b) { return std::fabs(a - b) / b; }

}  // namespace

TEST_CASE("the text's examples: overlap and a 5 ms kernel 3x faster", "[whatif]") {
  // Serialized: 8 + 6 = 14 ms; overlapped from 4 ms: 10 ms with 6 - 4 = 2 ms exposed.
  Trace t = load_trace(source_dir() + "/tests/data/overlap_workload.json");
  auto r = replay(std::move(t));
  CHECK(r.sim.end[0] == 8 * kNsPerMs);
  OpId over = 0, serial = 0;
  for (OpId i = 0; i < r.trace.ops.size(); ++i) {
    if (r.trace.name(r.trace.ops[i]) == "ncclAllReduce overlapped") over = i;
    if (r.trace.name(r.trace.ops[i]) == "ncclAllReduce serialized") serial = i;
  }
  CHECK(r.sim.end[serial] == 14 * kNsPerMs);
  CHECK(r.sim.end[over] == 10 * kNsPerMs);
  Overlap ov = compute_overlap(r.graph, sim_schedule(r.sim), [&](OpId o) { return o != serial; });
  CHECK(ov.exposed_communication_ns == 2 * kNsPerMs);
  // 100 ms serial, the 5 ms kernel 3x faster: 100 - 5 + 5/3 = 96.667 ms, 3.33 ms saved; Amdahl agrees
  // on a serial run (fraction 0.05).
  WhatIfReport w = whatif(source_dir() + "/tests/data/serial_100ms.json", "", {parse_transform("scale", "3:name~hot_kernel")});
  CHECK(w.baseline_ns == 100 * kNsPerMs);
  CHECK(w.predicted_ns == Approx(96'666'667).margin(1));
  CHECK(w.amdahl_fraction == Approx(0.05));
  CHECK(w.amdahl_ns == Approx(96'666'667).margin(1));
  WhatIfReport gone = whatif(source_dir() + "/tests/data/serial_100ms.json", "", {parse_transform("remove", "name~hot_kernel")});
  CHECK(gone.predicted_ns == 95 * kNsPerMs);
}

TEST_CASE("streams: k_compute 2x faster predicts streams_fast; the path moves to k_aux", "[whatif][shared]") {
  double fast = measured_median(h200("streams_fast.sqlite"), "round[1-5]");
  WhatIfReport w = whatif(h200("streams_base.sqlite"), "round[1-5]", {parse_transform("scale", "2:name~k_compute")});
  INFO("predicted " << w.predicted_ns << " measured fast " << fast);
  CHECK(rel(static_cast<double>(w.predicted_ns), fast) <= 0.03);
  REQUIRE(w.has_amdahl);
  // Amdahl: k_compute is about half the busy time; 2x would give ~9.2 ms, not the ~9.7 ms measured.
  CHECK(rel(static_cast<double>(w.amdahl_ns), static_cast<double>(w.predicted_ns)) > 0.03);
  CHECK(std::find(w.onto_cp.begin(), w.onto_cp.end(), "k_aux") != w.onto_cp.end());
  for (const auto& r : w.ranges) {
    INFO(r.name);
    CHECK(std::find(r.cp_after.begin(), r.cp_after.end(), "k_aux") != r.cp_after.end());
    CHECK(std::find(r.cp_before.begin(), r.cp_before.end(), "k_aux") == r.cp_before.end());
  }
}

TEST_CASE("chain: fusing each chain predicts the fused kernel's span", "[whatif][shared]") {
  for (std::string p : {"fp32", "bf16"})
    for (std::string n : {"2", "4"}) {
      std::string chain = p + "_chain" + n, fused = p + "_fused" + n;
      WhatIfReport w = whatif(h200("chain.sqlite"), chain, {parse_transform("fuse", "range~" + chain)});
      double truth = measured_median(h200("chain.sqlite"), fused);
      INFO(chain << " predicted " << w.predicted_ns << " measured " << fused << " " << truth);
      CHECK(rel(static_cast<double>(w.predicted_ns), truth) <= 0.10);
    }
}

TEST_CASE("block_fp32 with --precision bf16 predicts block_bf16", "[whatif][shared]") {
  double bf16 = measured_median(h200("block_bf16.sqlite"), "step.*");
  WhatIfReport w = whatif(h200("block_fp32.sqlite"), "step.*", {parse_transform("precision", "bf16")});
  INFO("predicted " << w.predicted_ns << " measured bf16 " << bf16);
  CHECK(rel(static_cast<double>(w.predicted_ns), bf16) <= 0.15);
}

TEST_CASE("decode_eager with --cuda-graph predicts decode_graph", "[whatif][shared]") {
  double graph = measured_median(h200("decode_graph.sqlite"), "tok.*");
  WhatIfReport w = whatif(h200("decode_eager.sqlite"), "tok.*", {parse_transform("cuda-graph", "")});
  INFO("predicted " << w.predicted_ns << " measured graph " << graph);
  CHECK(rel(static_cast<double>(w.predicted_ns), graph) <= 0.15);
}

TEST_CASE("transforms parse, compose, and reject bad input", "[whatif]") {
  CHECK_THROWS_AS(parse_transform("scale", "fast:name~x"), InputError);
  CHECK_THROWS_AS(parse_transform("scale", "2"), InputError);
  CHECK_THROWS_AS(parse_transform("precision", "fp7"), InputError);
  CHECK_THROWS_AS(parse_transform("hw", "imaginary-gpu"), InputError);
  CHECK_THROWS_AS(parse_transform("remove", "speed>3"), InputError);
  Scenario s = load_scenario(source_dir() + "/tests/data/scenario_fast_compute.json");
  CHECK(s.name == "fast-compute");
  REQUIRE(s.transforms.size() == 1);
  CHECK(s.transforms[0]->text == "--scale 2:name~k_compute");
  // Scaling by 2 then by 0.5 is the baseline again.
  WhatIfReport w = whatif(demo_trace(), "iter.*", {parse_transform("scale", "2:kind=kernel"), parse_transform("scale", "0.5:kind=kernel")});
  CHECK(w.predicted_ns == Approx(static_cast<double>(w.baseline_ns)).epsilon(1e-4));
}
