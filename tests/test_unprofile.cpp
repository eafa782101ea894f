// The profiler's host cost (--unprofile): which profiler and setting a trace was recorded with, and
// replays of real profiled traces without it against the same programs timed unprofiled.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sqlite3.h>

#include "helpers.hpp"
#include "models/whatif/transform.hpp"

using namespace bneck;
using namespace bneck::test;
namespace fs = std::filesystem;

namespace {
ProfilerSetting setting_of(const std::string& extra_events, bool shapes) {
  std::string p = tmp("setting.json");
  std::ofstream(p) << R"({"traceEvents": [)" << extra_events << R"(
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20, "dur": 10)"
                   << (shapes ? R"(, "args": {"Input Dims": [[64, 128], [128, 32]], "Input type": ["float", "float"]})" : "") << R"(},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 21, "dur": 2, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 25, "dur": 3, "args": {"correlation": 1, "stream": 7, "device": 0}}]})";
  ProfilerSetting s = profiler_setting(load_trace(p));
  std::remove(p.c_str());
  return s;
}
}  // namespace

TEST_CASE("unprofile: the PyTorch profiler's setting read from the trace", "[whatif][unprofile]") {
  // Costs measured on the H200 host (validate/reference/h200/profiler_overhead): without shapes
  // 4.58 us an event; with record_shapes 2.25 us per input an op records (nothing per call); with
  // with_stack (python_function events) 8.88 us an event.
  ProfilerSetting plain = setting_of("", false), shapes = setting_of("", true);
  ProfilerSetting stack = setting_of(
      R"({"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": 1, "tid": 1, "ts": 5, "dur": 40},)", true);
  CHECK(plain.name == "PyTorch profiler");
  CHECK(plain.per_call == 4580);
  CHECK(shapes.name == "PyTorch profiler, record_shapes");
  CHECK(shapes.per_input == 2250);
  CHECK(shapes.per_call == 0);
  CHECK(stack.name == "PyTorch profiler, record_shapes, with_stack");
  CHECK(stack.per_call == 8880);
  CHECK(stack.unmodelled.empty());
  // profile_memory ([memory] instant events): named; no cost of their own (measured: -1.9 / -4.0 /
  // +0.8 us an event), so record_shapes' per-input cost alone and nothing kept.
  ProfilerSetting mem = setting_of(
      R"({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 22, "s": "t", "args": {"Bytes": 512}},)",
      true);
  CHECK(mem.name == "PyTorch profiler, record_shapes, profile_memory");
  CHECK(mem.per_input == 2250);
  CHECK(mem.unmodelled.empty());
}

TEST_CASE("unprofile: an Nsight Systems capture with OS runtime tracing is said to keep that cost", "[whatif][unprofile]") {
  // The bundled nsys export with an OSRT_API table of two calls added (nsys -t cuda,osrt).
  const std::string p = tmp("osrt.sqlite");
  fs::copy_file(source_dir() + "/traces/data/demo_pipeline.sqlite", p, fs::copy_options::overwrite_existing);
  CHECK(profiler_setting(load_trace(p)).unmodelled.empty());
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(p.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db,
                       "CREATE TABLE OSRT_API(start INTEGER, end INTEGER, globalTid INTEGER, nameId INTEGER);"
                       "INSERT INTO OSRT_API VALUES (1, 2, 1, 1), (3, 4, 1, 1);",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  const ProfilerSetting s = profiler_setting(load_trace(p));
  CHECK(s.name == "Nsight Systems");
  CHECK(s.unmodelled.find("OS runtime tracing") != std::string::npos);
  std::remove(p.c_str());
}

TEST_CASE("unprofile: profile_memory traces replay at their programs' unprofiled step times (H200)", "[whatif][unprofile][e2e]") {
  // validate/reference/h200/profiler_overhead/more: the kineto_memory traces of the MLP and GPT-2
  // small inference (record_shapes + profile_memory) against the same programs timed unprofiled on
  // that machine (medians of 3 processes: 1.983 and 8.457 ms). Forecast: record_shapes' 2.25 us an
  // input taken out, nothing for the [memory] events: 1.947 ms (-1.8 %) and 8.676 ms (+2.6 %).
  const std::string dir = source_dir() + "/validate/reference/h200/profiler_overhead/more/";
  for (const auto& [prog, plain_ms] : std::vector<std::pair<std::string, double>>{{"mlp", 1.983}, {"gpt2_inf", 8.457}}) {
    const WhatIfReport w = whatif_of(dir + prog + ".kineto_memory.json.gz", "step.*", {});
    const double ms = static_cast<double>(w.baseline_ns) / 1e6;
    INFO(prog << " baseline " << ms << " ms, unprofiled " << plain_ms << " ms; " << w.unprofiled);
    CHECK(w.unprofiled.find("profile_memory") != std::string::npos);
    CHECK(w.unprofiled.find("kept") == std::string::npos);
    CHECK(std::abs(ms / plain_ms - 1) < 0.05);
  }
}

TEST_CASE("unprofile: fp32 Hugging Face traces replay at their unprofiled step times (H200)", "[whatif][unprofile][e2e]") {
  if (!fs::exists(hf("bert_large-inf-8x512"))) {
    WARN("no unpacked hf_models traces: skipped");
    return;
  }
  // The profiled steps ran 3-13 % slower than the unprofiled medians (hf_measured) on the
  // host-bound parts; the baseline of a what-if (the trace without the profiler's cost) should be
  // the unprofiled run within 3 %.
  for (const auto& c : hf_measured()) {
    const WhatIfReport w = whatif_of(hf(c.workload), "step.*", {});
    const double ms = static_cast<double>(w.baseline_ns) / 1e6;
    INFO(c.workload << " baseline " << ms << " ms, unprofiled " << c.fp32_ms << " ms");
    CHECK(w.unprofiled.find("record_shapes") != std::string::npos);
    CHECK(std::abs(ms / c.fp32_ms - 1) < 0.03);
  }
}
