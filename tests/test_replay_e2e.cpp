// End to end: replay real traces and compare with their measured ground truth.
#include <catch2/catch.hpp>
#include <cmath>
#include <regex>
#include <unordered_set>

#include "helpers.hpp"
#include "tools/views/replay_view.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {

// Every NVTX range: |simulated - measured| / measured span <= 3 %, and the median <= 1 %.
void check_fidelity(const std::string& path, const std::string& range_re, std::size_t min_ranges) {
  INFO(path);
  Trace t = load_trace(path);
  ReplayOptions opt;
  opt.range_regex = range_re;
  ReplayReport rep = run_replay(t, opt);
  std::vector<double> errs;
  for (const auto& r : rep.ranges) {
    if (r.measured_span_ns == 0) continue;
    double e = std::fabs(static_cast<double>(r.simulated_span_ns - r.measured_span_ns)) / static_cast<double>(r.measured_span_ns);
    INFO(r.name << " measured " << r.measured_span_ns << " simulated " << r.simulated_span_ns);
    CHECK(e <= 0.03);
    errs.push_back(e);
  }
  CHECK(errs.size() >= min_ranges);
  CHECK(median(errs) <= 0.01);
  double whole =
      std::fabs(static_cast<double>(rep.simulated.length() - rep.measured.length())) / static_cast<double>(rep.measured.length());
  CHECK(whole <= 0.01);
}

}  // namespace

TEST_CASE("replay reproduces the bundled demo trace's iteration spans", "[e2e]") { check_fidelity(demo_trace(), "iter.*", 6); }

namespace {
void fidelity_of_set(TracePath at) {
  check_fidelity(at("streams_base.sqlite"), "round.*", 6);
  check_fidelity(at("streams_fast.sqlite"), "round.*", 6);
  check_fidelity(at("chain.sqlite"), ".*", 48);
  check_fidelity(at("memcpy.sqlite"), ".*", 48);
  check_fidelity(at("block_fp32.sqlite"), ".*", 5);
  check_fidelity(at("block_bf16.sqlite"), ".*", 5);
  check_fidelity(at("decode_eager.sqlite"), "tok.*", 20);
  check_fidelity(at("decode_graph.sqlite"), "tok.*", 20);
}
}  // namespace

TEST_CASE("replay fidelity on every core H200 trace and every range", "[e2e]") { fidelity_of_set(core); }
TEST_CASE("replay fidelity on every H200 trace of the extra folder and every range", "[e2e][extended]") { fidelity_of_set(h200); }

TEST_CASE("measured spans match the ground truth table of the H200 README", "[e2e][extended]") {
  // Medians from $BNECK_EXTRA_TRACES/traces/h200/README.md.
  struct Case {
    const char* file;
    const char* range;
    double ms;
  };
  const Case cases[] = {{"streams_base.sqlite", "round.*", 12.20}, {"streams_fast.sqlite", "round.*", 9.69},
                        {"chain.sqlite", "fp32_chain2", 0.879},    {"chain.sqlite", "bf16_fused4", 0.405},
                        {"decode_eager.sqlite", "tok.*", 1.29},    {"decode_graph.sqlite", "tok.*", 0.144},
                        {"block_fp32.sqlite", "step.*", 109.7},    {"memcpy.sqlite", "h2d_pinned_268435456", 4.85}};
  for (const auto& c : cases) {
    INFO(c.file << " " << c.range);
    Trace t = load_trace(h200(c.file));
    ReplayOptions opt;
    opt.range_regex = c.range;
    ReplayReport rep = run_replay(t, opt);
    std::vector<double> spans;
    for (const auto& r : rep.ranges) spans.push_back(static_cast<double>(r.simulated_span_ns) / 1e6);
    CHECK(median(spans) == Approx(c.ms).epsilon(0.01));
  }
}

namespace {
// Per round: H2D 128 MiB, k_load 1 ms, k_compute 4 + 2 ms on stream B while k_aux 3.5 ms runs
// on stream C, then k_reduce and the D2H copy. k_aux's slack: 4 + 2 - 3.5 = 2.5 ms.
// round0 is not a steady round: the GPU ran its k_aux only after both k_compute (first launches
// of each kernel), so k_aux is on its path and its span is 15.9 ms; the test takes rounds 1-5.
void streams_path(TracePath at) {
  Trace t = load_trace(at("streams_base.sqlite"));
  ReplayOptions opt;
  opt.range_regex = "round[1-5]";
  ReplayReport rep = run_replay(t, opt);
  REQUIRE(rep.ranges.size() == 5);
  for (const auto& r : rep.ranges) {
    INFO(r.name);
    std::vector<std::string> dev;
    for (OpId n : r.critical_path)
      if (is_device_op(t.ops[n].kind)) dev.push_back(t.name(t.ops[n]));
    std::vector<std::string> want = {"memcpy HtoD", "k_load", "k_compute", "k_compute", "k_reduce", "memcpy DtoH"};
    std::vector<std::string> got;
    for (const auto& d : dev) got.push_back(d.substr(0, d.find('(')));
    CHECK(got == want);
    for (auto& [o, slack] : r.slack) {
      std::string n = t.name(t.ops[o]);
      if (n.rfind("k_aux", 0) == 0)
        CHECK(slack == Approx(2.5e6).epsilon(0.02));
      else
        CHECK(slack < 50'000);  // the path's ops: (near) zero
    }
  }
}
}  // namespace

TEST_CASE("streams_base: the critical path and k_aux's slack", "[e2e][critical]") { streams_path(core); }
TEST_CASE("streams_base of the extra folder: the critical path and k_aux's slack", "[e2e][critical][extended]") { streams_path(h200); }
