#pragma once
// What the serving tests share: the serving references' folder, a temporary file writer, the captured
// engine's settings and the unpacked calibration traces.
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "models/serving/pipeline.hpp"
#include "models/serving/serve.hpp"

namespace bneck::test {

inline const std::string kServe = std::string(BNECK_SOURCE_DIR) + "/validate/reference/h200/serving/";

// `text` in a temporary file of this process named after `name` (kept as given: extensions matter).
inline std::string write_tmp(const std::string& name, const std::string& text) {
  std::filesystem::path p = std::filesystem::temp_directory_path() / ("bneck_serve_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

// transformers' continuous-batching engine as the H200 serving captures ran it
// (validate/workloads/serving.py's defaults): 512 tokens and 64 sequences a step, 1024 KV blocks of 64.
inline serve::EngineConfig captured_engine() {
  serve::EngineConfig e;
  e.max_batch_tokens = 512;
  e.max_seqs = 64;
  e.block_size = 64;
  e.num_blocks = 1024;
  return e;
}

// A calibration trace unpacked beside the first (tests/CMakeLists.txt): "run2", "plain", "static", "prefix".
inline std::string serving_trace(const std::string& sub) {
  return std::filesystem::path(BNECK_SERVING_TRACE).parent_path().string() + "/" + sub + "/cal.sqlite";
}

// A forecast of `requests` (after its warm-up; "": none) by the captured engine and the model of
// `model_dir`, calibrated from `trace` with the traced run's log (`trace_log`; "": the calibration
// log) and the log the host's speed is fitted to (`calibrate_log`).
inline serve::ServeJob calibrated_job(const std::string& model_dir, const std::string& requests, const std::string& warmup,
                                      const std::string& trace, const std::string& trace_log, const std::string& calibrate_log) {
  serve::ServeJob j;
  j.model_path = model_dir + "config.json";
  j.hw = "h200-sxm";
  j.requests_path = requests;
  j.warmup_path = warmup;
  j.engine = captured_engine();
  j.calibrate_trace = trace;
  j.trace_log = trace_log;
  j.calibrate_log = calibrate_log;
  return j;
}

}  // namespace bneck::test
