// bneck serve's run (tools/cmd_serve.cpp and the Python module): the simulation, its JSON report
// (the keys `vllm bench serve` uses) and the text view.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "models/serving/pipeline.hpp"

namespace CLI {
class App;
}

namespace bneck {

struct ServeArgs {
  std::string model_path, hw_name, requests_path, calib_trace, calib_log,
      policy = "continuous", kv_memory, slo_ttft, slo_tpot, rates, chrome_out, warmup_path, wake, trace_log, step_costs,
      prompt_len = "32..512", output_len = "16..128", arrival = "poisson", shared_prefix;
  std::int64_t max_batch_tokens = 8192, max_seqs = 256, block_size = 16, num_blocks = 0, chunked = 0, num = 0, q_pad = 64, kv_pad = 16384,
               prefix_hash_block = 512, trace_max_seqs = 0;
  double rate = 0, watermark = 0;
  std::uint64_t seed = 1;
  bool cuda_graph = false, prefix_caching = false;
};

// bneck serve's options (all but --json) on `app`, filling `a`: the CLI's subcommand and the Python
// module's keyword arguments (serve(max_batch_tokens=512) is --max-batch-tokens 512) share them.
void add_serve_options(CLI::App& app, ServeArgs& a);

// Runs it; writes the chrome trace if asked and the text view to `text` if given; returns the JSON report.
nlohmann::json run_serve(const ServeArgs& a, std::ostream* text);

// The report of a run of the serving pipeline (models/serving/pipeline.hpp): the JSON (the keys
// `vllm bench serve` uses), the chrome trace to `chrome_out` when given, the text view to `text`.
nlohmann::json serve_report(const serve::ServeJob& job, const serve::ServeOutcome& out, const std::string& chrome_out, std::ostream* text);

}  // namespace bneck
