// bneck serve from the command line (bad input, JSON keys, a rate sweep) and the engines' own step
// names in vLLM's and SGLang's Kineto traces.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "helpers.hpp"
#include "serve_helpers.hpp"
#include "models/serving/calibrate.hpp"
#include "sim/base/error.hpp"
#include "traces/importer.hpp"

using namespace bneck;
using namespace bneck::serve;
using namespace bneck::test;
namespace fs = std::filesystem;

TEST_CASE("vLLM's and SGLang's Kineto traces: their steps, engine, mode and shape from the engines' own step names", "[serve][extended]") {
  const std::string dir = extra_dir() + "/traces/thirdparty/tracelens/";
  if (!fs::exists(dir)) {
    WARN("no " << dir << ": skipped");
    return;
  }
  struct Case {
    const char* file;
    const char* engine;
    const char* mode;
    std::int64_t q, kv, seqs, prefills;
  };
  // From the names: vLLM "execute_32_context_0(sq0sk0...)_generation_32(sq32sk55086...)": 32 decodes,
  // q = 32, kv = 55086; "execute_8192_context_9(sq8155sk8430...)_generation_37(sq37sk34489...)": q =
  // 8155 + 37, kv = 8430 + 34489, 46 sequences; the older "execute_context_1(888_788544)": one
  // prefill of 888 tokens; SGLang "step[EXTEND bs=15 toks=15360]". Modes from the launches inside:
  // one graph launch and no kernel launch of its own (full), graph launches beside kernel launches
  // (piecewise), none (eager).
  const Case cases[] = {
      {"inference__vllm_decode_full__graph_execution.json.gz", "vLLM", "full CUDA graphs", 32, 55086, 32, 0},
      {"inference__vllm_prefilldecode_piecewise__graph_execution.json.gz", "vLLM", "piecewise CUDA graphs", 8192, 42919, 46, 9},
      {"inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz", "SGLang", "full CUDA graphs", 32, 32785, 32, 0},
      {"inference__sglang_prefilldecode__sglang_Qwen3-8B_prefilldecode.json.gz", "SGLang", "eager", 15360, 15360, 15, 15},
      {"b200__eager_trace.json.gz", "vLLM", "eager", 888, 888, 1, 1},
  };
  for (const auto& c : cases) {
    INFO(c.file);
    const NamedSteps ns = read_named_steps(load_trace(dir + c.file));
    REQUIRE(ns.steps.size() == 1);
    const NamedStep& s = ns.steps[0];
    CHECK(s.engine == c.engine);
    CHECK(s.mode == c.mode);
    CHECK(s.shape.q == c.q);
    CHECK(s.shape.kv == c.kv);
    CHECK(s.shape.seqs == c.seqs);
    CHECK(s.prefills == c.prefills);
    CHECK(s.gpu_busy > 0);
    CHECK(s.device_ops > 100);
  }
  const NamedSteps cap = read_named_steps(load_trace(dir + "inference__sglang_decode__capture_traces__bs_32_rank0.json.gz"));
  CHECK(cap.steps.empty());
  CHECK(cap.captures == std::vector<std::string>{"capture_32_DECODE"});
  CliRun r = run_bneck("serve --model '" + kServe + "config.json' --hw h200-sxm --step-costs '" + dir +
                       "inference__vllm_decode_full__graph_execution.json.gz' --json -");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\"mode\": \"full CUDA graphs\"") && Catch::Contains("\"kv\": 55086"));
}

TEST_CASE("bneck serve: bad input exits 2 with one line naming the file and line", "[serve][cli]") {
  std::string cfg = kServe + "config.json";
  std::string log = write_tmp("unordered.jsonl",
                              "{\"id\": 1, \"arrival_s\": 0, \"prompt_tokens\": 5, \"output_tokens\": 2, \"token_times_s\": [2, 1]}\n");
  CliRun r = run_bneck("serve --model '" + cfg + "' --hw h200-sxm --requests '" + log + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains(log + ":1") && Catch::Contains("not ordered"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  std::string bad_cfg = write_tmp("cfg.json", "{\"hidden_size\": 64}");
  r = run_bneck("serve --model '" + bad_cfg + "' --hw h200-sxm --num 5");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains(bad_cfg) && Catch::Contains("missing field"));
  std::string longreq = write_tmp("long.jsonl", "{\"id\": \"x\", \"arrival_s\": 0, \"prompt_tokens\": 5000, \"output_tokens\": 10}\n");
  r = run_bneck("serve --model '" + cfg + "' --hw h200-sxm --block-size 16 --num-blocks 100 --requests '" + longreq + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains(longreq + ":1: request x") && Catch::Contains("KV blocks"));
  // A trace without engine step ranges cannot calibrate.
  r = run_bneck("serve --model '" + cfg + "' --hw h200-sxm --num 5 --calibrate '" + demo_trace() + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("demo_pipeline.sqlite") && Catch::Contains("forward q=N kv=N seqs=N"));
  // A bad warm-up log is named with its line; a negative wake-up time is refused (it would never
  // reach the first arrival).
  std::string wu = write_tmp("wu.jsonl", "{\"id\": \"a\", \"arrival_s\": -1, \"prompt_tokens\": 5, \"output_tokens\": 2}\n");
  r = run_bneck("serve --model '" + cfg + "' --hw h200-sxm --num 5 --warmup-requests '" + wu + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains(wu + ":1"));
  r = run_bneck("serve --model '" + cfg + "' --hw h200-sxm --num 5 --engine-wake '-3 ms'");
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--engine-wake"));
}

TEST_CASE("bneck serve: JSON keys as vllm bench serve names them, a rate sweep with its knee", "[serve][cli]") {
  std::string out = (fs::temp_directory_path() / ("bneck_serve_" + std::to_string(::getpid()) + ".json")).string();
  CliRun r = run_bneck("serve --model '" + kServe + "config.json' --hw h200-sxm --requests '" + kServe +
                       "rate3.jsonl' --slo-ttft '200 ms' --slo-tpot '50 ms' --rates 1,4,16,64 --json '" + out + "'");
  REQUIRE(r.code == 0);
  std::ifstream in(out);
  nlohmann::json j = nlohmann::json::parse(in);
  for (const char* k : {"mean_ttft_ms", "median_tpot_ms", "p99_itl_ms", "median_e2el_ms", "request_throughput", "output_throughput",
                        "duration_s", "request_goodput"}) {
    CHECK(j.contains(k));
    CHECK(j["measured"].contains(k));
  }
  CHECK(j["requests"].size() == 100);
  CHECK(j["requests"][0].contains("queue_ms"));
  CHECK(j["sweep"].size() == 4);
  CHECK(j.contains("knee_rate"));
  fs::remove(out);
}

TEST_CASE("bneck serve: several runs of the calibration requests, the median of their host scales", "[serve][cli][e2e]") {
  // The plain capture's calibration requests served unprofiled three times (serving/plain and
  // plain/repeats): each run's scale is fitted alone (0.877, 0.919, 0.873 on these logs; 0.909, 0.953, 0.906 before the
  // forward's per-sequence host work was assumed) and the
  // forecast takes their median.
  const std::string d = kServe + "plain/";
  const std::string trace = fs::path(BNECK_SERVING_TRACE).parent_path().string() + "/plain/cal.sqlite";
  const std::string logs =
      d + "cal_plain_unprof.jsonl," + d + "repeats/cal_plain_unprof.r1.jsonl," + d + "repeats/cal_plain_unprof.r2.jsonl";
  CliRun r =
      run_bneck("serve --model '" + d +
                "config.json' --hw h200-sxm --max-batch-tokens 512 --max-seqs 64 --block-size 64 --num-blocks 1024 --requests '" + d +
                "rate4.jsonl' --calibrate '" + trace + "' --trace-log '" + d + "cal_plain.jsonl' --calibrate-log '" + logs + "'");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("the median over 3 runs of the calibration requests (0.877, 0.919, 0.873)"));
}
