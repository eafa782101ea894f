// Diffusion: `bneck pipeline`'s budget, the --steps / --cfg / --resolution what-ifs against a DiT
// pipeline measured on an H200 (validate/reference/h200/diffusion, validate/reference/h200/diffusion/run_diffusion.sh), and
// the launch-queue backpressure the what-if engine models (hand-computed).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <deque>
#include <fstream>
#include <sstream>

#include "helpers.hpp"
#include "sim/analysis/pipeline.hpp"
#include "sim/analysis/structure.hpp"
#include "sim/base/error.hpp"
#include "tools/views/whatif_view.hpp"
#include "traces/importer.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {

const std::string kDiff = std::string(BNECK_SOURCE_DIR) + "/validate/reference/h200/diffusion/";

WhatIfReport run(const std::string& path, const std::string& range, std::vector<std::string> args) {
  static std::deque<Trace> keep;  // the reports point at their traces
  Trace* t = &keep.emplace_back(load_trace(path));
  WhatIfOptions opt;
  opt.range_regex = range;
  opt.sharing = false;
  std::string scenario;
  opt.transforms = parse_transform_args(args, scenario);
  return run_whatif(*t, opt);
}

// The measured medians of validate/reference/h200/diffusion/diffusion.log, by configuration.
std::map<std::string, double> measured() {
  std::ifstream in(kDiff + "diffusion.log");
  std::map<std::string, double> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string w, name;
    s >> w >> name;
    if (w != "config") continue;
    while (s >> w)
      if (w == "median_ms") s >> out[name];
  }
  return out;
}

}  // namespace

TEST_CASE("launch-queue backpressure: a faster GPU releases a host that waited on a full queue (hand-computed)", "[whatif]") {
  // 1000 kernels of 100 us on one stream, each launched by a 1 us call 1 us after the previous
  // call; the queue holds 600: call k >= 600 returns when kernel k - 600 ends. Measured: kernel k
  // starts at max(call k's end, kernel k-1's end) = 1 us + k x 100 us; the range's device work
  // spans 100 ms. --scale 2 on the kernels: the GPU needs 50 ms and the host, at its own pace (2 us
  // a launch), 2 ms: 50 ms. Kept as measured, the blocked calls would hold the host to 100 ms.
  const int n = 1000, q = 600;
  std::vector<double> call_s(n), call_e(n), ks(n), ke(n);
  for (int k = 0; k < n; ++k) {
    call_s[k] = k == 0 ? 0 : call_e[k - 1] + 1;
    call_e[k] = std::max(call_s[k] + 1, k >= q ? ke[k - q] : 0.0);
    ks[k] = std::max(call_e[k], k ? ke[k - 1] : 0.0);
    ke[k] = ks[k] + 100;
  }
  std::ostringstream ops;
  for (int k = 0; k < n; ++k) {
    ops << (k ? ",\n" : "") << R"({"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "api_class": "launch", "start": ")" << call_s[k]
        << R"( us", "duration": ")" << call_e[k] - call_s[k] << R"( us"}, {"kind": "kernel", "name": "k", "lane": 1, "start": ")" << ks[k]
        << R"( us", "duration": "100 us", "launched_by": )" << 2 * k << "}";
  }
  const std::string w = R"({"format": "bneck-workload", "measured": true,
    "devices": [{"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}],
    "lanes": [{"kind": "thread", "name": "host"}, {"kind": "stream", "name": "s", "device": 0}],
    "ops": [)" + ops.str() +
                        R"(], "ranges": [{"name": "gen", "lane": 0, "start": "0 us", "end": ")" + std::to_string(call_e[n - 1] + 1) +
                        R"( us"}]})";
  const std::string path = "/tmp/bneck_queue_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << w;
  WhatIfReport none = run(path, "gen", {"--scale", "1:kind=kernel"});
  CHECK(none.ranges[0].baseline_ns == 100'000'000);
  CHECK(none.ranges[0].predicted_ns == 100'000'000);  // the rewrite alone changes nothing
  WhatIfReport r = run(path, "gen", {"--scale", "2:kind=kernel"});
  CHECK(static_cast<double>(r.ranges[0].predicted_ns) == Approx(50'000'000).epsilon(0.01));
  std::remove(path.c_str());
}

TEST_CASE("pipeline: K x denoiser step + fixed adds up to the measured generation (H200 DiT)", "[diffusion][e2e]") {
  // validate/reference/h200/diffusion/run_diffusion.sh: one generation at 1024 px, 20 steps with guidance, profiled: 847.14
  // ms of wall time (median unprofiled 847.53 ms).
  Trace t = load_trace(kDiff + "diffusion_base.json.gz");
  auto gens = pipeline_budget(t, "generation", "step_.*");
  REQUIRE(gens.size() == 1);
  const auto& b = gens[0];
  CHECK(b.step_ns.size() == 20);
  CHECK(std::abs(b.formula_error()) < 0.03);
  CHECK(static_cast<double>(b.total_ns) / 1e6 == Approx(847.14).epsilon(0.03));
  TimeNs sum = 0;
  for (TimeNs s : b.step_ns) sum += s;
  CHECK(sum + b.fixed_ns == b.total_ns);
  bool vae = false, text = false;
  for (const auto& s : b.stages) vae = vae || s.name == "vae_decode", text = text || s.name == "text_encoder";
  CHECK(vae);
  CHECK(text);
  CHECK_THROWS_WITH(pipeline_budget(t, "generation", "nothing.*"), Catch::Contains("holds no range matching"));
  CHECK_THROWS_WITH(pipeline_budget(t, "nope", "step_.*"), Catch::Contains("matches no NVTX range"));
}

// Measured ratios to the baseline (unprofiled medians): 50 steps 2.431, 10 steps 0.521, guidance
// off 0.529, 1536 px 3.101. Forecasts at this commit from the one profiled trace: 2.424 (-0.3 %),
// 0.528 (+1.3 %), 0.545 (+3.1 %), 3.078 (-0.7 %). Checked: the issue's bounds (5 %, 5 %, 10 %, 15 %).
TEST_CASE("diffusion what-ifs forecast the measured step, guidance and resolution changes (H200 DiT)", "[diffusion][whatif][e2e]") {
  auto m = measured();
  REQUIRE(m.count("base"));
  struct Case {
    std::vector<std::string> args;
    const char* config;
    double tol;
  } cases[] = {{{"--step-range", "step_.*", "--steps", "50"}, "steps50", 0.05},
               {{"--steps", "10", "--step-range", "step_.*"}, "steps10", 0.05},
               {{"--step-range", "step_.*", "--cfg", "off"}, "nocfg", 0.10},
               {{"--step-range", "step_.*", "--resolution", "1.5"}, "res1536", 0.15}};
  for (const auto& c : cases) {
    WhatIfReport r = run(kDiff + "diffusion_base.json.gz", "generation", c.args);
    const double ratio = static_cast<double>(r.ranges[0].predicted_ns) / static_cast<double>(r.ranges[0].baseline_ns);
    const double want = m[c.config] / m["base"];
    INFO(c.config << ": forecast ratio " << ratio << ", measured " << want);
    CHECK(std::abs(ratio / want - 1) < c.tol);
  }
  // Without --step-range the structure's loop is taken; a trace without structure ranges says what is missing.
  CHECK_THROWS_WITH(run(kDiff + "diffusion_base.json.gz", "generation", {"--steps", "10"}), Catch::Contains("needs --step-range"));
  CHECK_THROWS_WITH(run(kDiff + "diffusion_base.json.gz", "generation", {"--step-range", "step_.*"}), Catch::Contains("goes with"));
}

// The same baseline under Nsight Systems with torch's emit_nvtx (every op a range with its shapes;
// validate/reference/h200/diffusion/run_diffusion_nsys.sh; 857.9 ms of wall time): the budget and the step and resolution
// forecasts hold (2.419, 0.554, 3.050 at this commit: -0.5 %, +6.5 %, -1.6 %), but guidance off
// does not (0.99 vs 0.53 measured): emit_nvtx's per-op host work makes the profiled host as slow as
// the GPU (the host's pace while the queue was not full equals its pace while full: x 1.00), so
// the trace shows no headroom for a faster GPU. The Kineto trace's lighter profiler does.
TEST_CASE("diffusion from Nsight Systems (emit_nvtx): the budget, steps and resolution", "[diffusion][e2e]") {
  auto m = measured();
  Trace t = load_trace(BNECK_DIFFUSION_NSYS);
  auto gens = pipeline_budget(t, "generation.*", "step_.*");
  REQUIRE(gens.size() == 1);
  CHECK(gens[0].step_ns.size() == 20);
  CHECK(std::abs(gens[0].formula_error()) < 0.03);
  CHECK(static_cast<double>(gens[0].total_ns) / 1e6 == Approx(857.87).epsilon(0.03));
  struct Case {
    std::vector<std::string> args;
    const char* config;
    double tol;
  } cases[] = {{{"--step-range", "step_.*", "--steps", "50"}, "steps50", 0.05},
               {{"--step-range", "step_.*", "--steps", "10"}, "steps10", 0.10},
               {{"--step-range", "step_.*", "--resolution", "1.5"}, "res1536", 0.15}};
  for (const auto& c : cases) {
    WhatIfReport r = run(BNECK_DIFFUSION_NSYS, "generation.*", c.args);
    const double ratio = static_cast<double>(r.ranges[0].predicted_ns) / static_cast<double>(r.ranges[0].baseline_ns);
    INFO(c.config << ": forecast ratio " << ratio << ", measured " << m[c.config] / m["base"]);
    CHECK(std::abs(ratio / (m[c.config] / m["base"]) - 1) < c.tol);
  }
}

// Without any range (every annotation removed), the structure's loop stands in for the step
// ranges: @iteration finds the 20 denoiser steps, @run the generation. The budget and the
// what-ifs agree with the named runs within 2 % (the fixed part: within 5 %, it starts at the
// first launch instead of the range's push).
TEST_CASE("pipeline and the diffusion what-ifs on a trace with no ranges agree with the named runs", "[diffusion][structure][e2e]") {
  Trace named = load_trace(kDiff + "diffusion_base.json.gz");
  auto gn = pipeline_budget(named, "generation", "step_.*");
  Trace bare = load_trace(kDiff + "diffusion_base.json.gz");
  bare.ranges.clear();
  add_structure_ranges(bare, find_structure(bare));
  auto [gen, step] = default_loop_ranges(bare);
  CHECK(gen == "@run");
  CHECK(step == "@iteration");
  auto gb = pipeline_budget(bare, gen, step);
  REQUIRE(gn.size() == 1);
  REQUIRE(gb.size() == 1);
  CHECK(gb[0].step_ns.size() == gn[0].step_ns.size());
  CHECK(std::abs(static_cast<double>(gb[0].denoiser_step_ns) / static_cast<double>(gn[0].denoiser_step_ns) - 1) < 0.02);
  CHECK(std::abs(static_cast<double>(gb[0].total_ns) / static_cast<double>(gn[0].total_ns) - 1) < 0.02);
  CHECK(std::abs(static_cast<double>(gb[0].fixed_ns) / static_cast<double>(gn[0].fixed_ns) - 1) < 0.05);
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--steps", "50"}, {"--steps", "10"}, {"--cfg", "off"}, {"--resolution", "1.5"}}) {
    std::vector<std::string> with = args;
    with.insert(with.begin(), {"--step-range", "step_.*"});
    WhatIfReport rn = run(kDiff + "diffusion_base.json.gz", "generation", with);
    WhatIfOptions opt;
    opt.sharing = false;
    std::string scenario;
    opt.transforms = parse_transform_args(args, scenario);
    WhatIfReport rb = run_whatif(bare, opt);
    const double want = static_cast<double>(rn.ranges[0].predicted_ns) / static_cast<double>(rn.ranges[0].baseline_ns);
    const double got = static_cast<double>(rb.predicted_ns) / static_cast<double>(rb.baseline_ns);
    INFO(args[0] << " " << args[1] << ": named " << want << ", from the structure " << got);
    CHECK(std::abs(got / want - 1) < 0.02);
  }
}
