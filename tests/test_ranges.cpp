// Ranges hold the work they bracket: a range around loss.backward() covers the kernels PyTorch's
// autograd thread launches while the caller waits (validate/reference/h200/train_ranges: a GPT-style
// training step on an H200, CUDA events around each phase as ground truth).
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "helpers.hpp"
#include "models/replay.hpp"
#include "traces/importer.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {

std::string train(const std::string& f) { return source_dir() + "/validate/reference/h200/train_ranges/" + f; }

// The CUDA-event times of `key` (e.g. "bw_ms") of the timed steps in a log ("step N ... key V ...").
std::vector<double> log_times(const std::string& path, const std::string& key, bool profiled_only) {
  std::ifstream in(path);
  std::vector<double> v;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("step ", 0) != 0 || (profiled_only && line.find("profiled") == std::string::npos)) continue;
    std::istringstream ls(line);
    for (std::string w; ls >> w;)
      if (w == key) {
        double x;
        ls >> x;
        v.push_back(x);
      }
  }
  return v;
}

std::vector<RangeResult> ranges(Trace t, const std::string& re) {
  ReplayOptions opt;
  opt.range_regex = re;
  return run_replay(t, opt).ranges;
}

}  // namespace

TEST_CASE("a range around backward() holds the autograd thread's kernels: nsys, 8 steps within 1 % of CUDA events", "[ranges]") {
  Trace t = load_trace(train("nsys_nvtx.sqlite"));
  auto want = log_times(train("nsys_nvtx.log"), "bw_ms", false);  // step3..step10
  REQUIRE(want.size() == 8);
  auto got = ranges(t, "bw");
  REQUIRE(got.size() == 11);  // 3 warm-up steps and 8 timed ones
  for (std::size_t i = 0; i < 8; ++i) {
    const RangeResult& r = got[3 + i];
    INFO("step " << 3 + i << ": " << r.measured_span_ns << " ns vs " << want[i] << " ms");
    CHECK(r.measured_span_ns == r.simulated_span_ns);
    // The events are recorded just before and after backward() on the stream: the GPU span of
    // its 214 kernels (one seed fill from the caller, 213 from pt_autograd_0) within 1 %.
    CHECK(std::fabs(static_cast<double>(r.measured_span_ns) / (want[i] * 1e6) - 1) < 0.01);
  }
  // Strict per-thread projection keeps only the caller's one kernel (the 1.1 us gradient seed).
  t.range_scope = RangeScope::Thread;
  auto strict = ranges(t, "bw");
  REQUIRE(strict.size() == 11);
  CHECK(strict[5].measured_span_ns < 10'000);
}

TEST_CASE("a range around backward() from Kineto: 214 device ops a step, the span within 3 % of CUDA events", "[ranges][kineto]") {
  Trace t = load_trace(train("train_kineto.json.gz"));
  auto want = log_times(train("kineto.log"), "bw_ms", true);  // step7..step10
  REQUIRE(want.size() == 4);
  RangeIndex idx(t);
  auto bw = idx.match(Regex("bw"));
  REQUIRE(bw.size() == 4);
  for (std::size_t ri : bw) CHECK(idx.device_ops(ri).size() == 214);
  auto got = ranges(t, "bw");
  REQUIRE(got.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("step " << 7 + i << ": " << got[i].measured_span_ns << " ns vs " << want[i] << " ms");
    // The profiled run is host-bound: the GPU idles 0.1-0.2 ms between the event before backward()
    // and its first kernel, which the events count and the span does not.
    double ratio = static_cast<double>(got[i].measured_span_ns) / (want[i] * 1e6);
    CHECK(ratio < 1.0);
    CHECK(ratio > 0.97);
    CHECK(got[i].measured_span_ns == got[i].simulated_span_ns);
  }
}

TEST_CASE("process scope: another thread's launches join a range unless that thread is inside an earlier range of its own", "[ranges]") {
  // Thread 1 opens "outer" at 0 and "bw" at 100 us; thread 2 launches k_a at 150 us (inside no
  // range of its own: it works for the ranges open then); thread 3 opened "own" at 50 us and
  // launches k_b at 160 us. "bw" holds k_a only: thread 3 has been inside its own range since before
  // "bw" opened. "own" holds both (thread 2 is in no range), "outer" both (thread 3's range opened
  // after it). Strictly per thread, "bw" holds none and "own" k_b.
  Trace t = workload(R"({"format": "bneck-workload", "measured": true,
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "thread", "name": "autograd"}, {"kind": "thread", "name": "worker"},
              {"kind": "stream", "name": "s"}],
    "ranges": [{"name": "outer", "lane": 0, "start": "0 us", "end": "400 us"}, {"name": "bw", "lane": 0, "start": "100 us", "end": "300 us"},
               {"name": "own", "lane": 2, "start": "50 us", "end": "350 us"}],
    "ops": [{"kind": "api", "name": "cudaLaunchKernel", "lane": 1, "start": "150 us", "duration": "5 us"},
            {"kind": "api", "name": "cudaLaunchKernel", "lane": 2, "start": "160 us", "duration": "5 us"},
            {"kind": "kernel", "name": "k_a", "lane": 3, "start": "170 us", "duration": "10 us", "launched_by": 0},
            {"kind": "kernel", "name": "k_b", "lane": 3, "start": "180 us", "duration": "10 us", "launched_by": 1}]})");
  auto names = [&](const std::string& re) {
    RangeIndex idx(t);
    std::vector<std::string> v;
    for (std::size_t ri : idx.match(Regex(re)))
      for (OpId o : idx.device_ops(ri)) v.push_back(t.name(t.ops[o]));
    return v;
  };
  CHECK(names("bw") == std::vector<std::string>{"k_a"});
  CHECK(names("own") == std::vector<std::string>{"k_a", "k_b"});
  CHECK(names("outer") == std::vector<std::string>{"k_a", "k_b"});
  t.range_scope = RangeScope::Thread;
  CHECK(names("bw").empty());
  CHECK(names("own") == std::vector<std::string>{"k_b"});
}
