#pragma once
#include <filesystem>
#include <string>

#include "models/measured.hpp"
#include "sim/analysis/analysis.hpp"
#include "tools/views/whatif_view.hpp"
#include "traces/json_io.hpp"

namespace bneck::test {

inline std::string source_dir() { return BNECK_SOURCE_DIR; }
// The folder of extra traces the extended tests ([extended]) read: $BNECK_EXTRA_TRACES, laid out as
// traces/h200, traces/thirdparty, traces/kineto, traces/nsys, traces/chakra and fuzz-findings
// (tests/CMakeLists.txt registers those tests only when it is set). Empty when it is not.
std::string extra_dir();
inline std::string demo_trace() { return source_dir() + "/traces/data/demo_pipeline.sqlite"; }
// A trace of the extra folder's H200 set (traces/h200), for the extended tests.
inline std::string h200(const std::string& f) {
  std::string p = extra_dir();  // appended piecewise (GCC 12 warns falsely on one expression)
  p += "/traces/h200/";
  p += f;
  return p;
}

// A trace of the core H200 reference set (validate/reference/h200/core, unpacked into the test data
// folder by tests/CMakeLists.txt): the same programs as the extra folder's traces/h200, captured again.
inline std::string core(const std::string& f) {
  std::string p = BNECK_TEST_DATA;  // appended piecewise (GCC 12 warns falsely on one expression)
  p += "/core/";
  p += f;
  return p;
}
// Where a test's reference traces come from: core or h200.
using TracePath = std::string (*)(const std::string&);

// A Hugging Face workload's fp32 PyTorch profiler trace (validate/reference/h200/hf_models,
// unpacked into the test data folder by tests/CMakeLists.txt).
inline std::string hf(const std::string& w) {
  std::string p = BNECK_TEST_DATA;  // appended piecewise (GCC 12 warns falsely on one expression)
  p += "/hf_models/k_fp32/";
  p += w;
  p += ".fp32.kineto.json.gz";
  return p;
}

// The same programs timed unprofiled (validate/reference/h200/hf_models/summary.txt, medians, ms):
// fp32 eager (the traces' run), with TF32 matmuls, under bf16 autocast, and torch.compile'd.
struct HfMeasured {
  const char* workload;
  double fp32_ms, tf32_ms, autocast_ms, compile_ms;
};
inline const std::vector<HfMeasured>& hf_measured() {
  static const std::vector<HfMeasured> rows = {{"bert_large-inf-8x512", 64.863, 26.366, 34.713, 61.546},
                                               {"gpt2_large-inf-4x1024", 199.350, 74.088, 75.172, 170.981},
                                               {"gpt2_large-train-1x1024", 182.231, 107.275, 120.876, 165.438},
                                               {"opt_1.3b-inf-2x2048", 315.007, 105.546, 102.566, 280.025}};
  return rows;
}

Trace workload(const std::string& json_text);

struct Replayed {
  Trace trace;
  Graph graph;
  SimResult sim;
};
Replayed replay(Trace t);

// A temporary file name of this process for the Kineto tests.
std::string tmp(const std::string& name);
// One rank of a data-parallel step as a Kineto file: a GEMM of `gemm_us`, then an all-reduce on
// the same stream that ends at `end_us` (when the last rank arrived plus 500 us of transfer).
// With `comm_stream` != 7 the all-reduce runs on its own stream, launched at `launch_us`.
std::string rank_trace(int rank, double gemm_us, double end_us, int comm_stream = 7, double launch_us = 20);

// Runs the bneck executable with `args` (shell words); its exit code, stdout and stderr.
struct CliRun {
  int code;
  std::string out, err;
};
CliRun run_bneck(const std::string& args);
using Run = CliRun;
inline Run run(const std::string& args) { return run_bneck(args); }
// A file's bytes; a temporary folder of this process for the CLI tests; the lines of a text.
std::string slurp(const std::filesystem::path& p);
std::filesystem::path tmp_dir();
std::size_t lines(const std::string& s);

// Writes `text` to a temporary file of this process named after `tag` (.json); its path.
std::string write_temp(const std::string& text, const std::string& tag);
// Writes `text` gzip-compressed the same way: one member, or two split at `split` where it lies
// inside the text; its path.
std::string write_gzip(const std::string& text, const std::string& tag, std::size_t split = std::string::npos);
// `bneck whatif PATH --range RANGE ARGS...` in process (no --range when RANGE is empty; the trace
// is kept alive for the report);
// "--sharing on|off" among the args sets the sharing model.
// whatif --json's memory_per_gpu of a report (null where it has none).
nlohmann::json memory_per_gpu_json(const WhatIfReport& r);
// The median measured span of a trace's ranges matching `range`.
double measured_median(const std::string& path, const std::string& range);
// A line of the what-if's log holds `what`.
bool has_line(const WhatIfReport& r, const std::string& what);
WhatIfReport whatif_of(const std::string& path, const std::string& range, const std::vector<std::string>& args);

}  // namespace bneck::test
