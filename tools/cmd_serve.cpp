// bneck serve --model CONFIG.json --hw SPEC (--requests LOG.jsonl | --rate R --num N ...)
//             [--calibrate TRACE [--trace-log LOG.jsonl] --calibrate-log LOG.jsonl] [--step-costs TRACE] [--warmup-requests LOG.jsonl]
//             [--engine-wake T] [--policy continuous|static]
//             [--max-batch-tokens N] [--max-seqs N] [--block-size N] [--num-blocks N | --kv-memory M]
//             [--chunked-prefill N] [--cuda-graph] [--slo-ttft T --slo-tpot T] [--rates R1,R2,...]
//             [--json FILE] [--chrome-trace FILE]
// LLM serving: a request-level simulation of an inference engine (models/serving/serve.hpp) over a
// per-step cost model (models/serving/llm.hpp), calibrated from a trace of the real engine; the run
// itself is tools/views/serve_view.cpp (shared with the Python module).
#include <iostream>

#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "tools/views/serve_view.hpp"

namespace bneck {

void add_serve(CLI::App& sub, Action& action) {
  static ServeArgs a;
  static std::string json_out;
  add_serve_options(sub, a);
  sub.add_option("--json", json_out, "write the report as JSON to FILE ('-' for stdout)");
  sub.callback([&action] {
    action = [] {
      nlohmann::json j = run_serve(a, json_out == "-" ? nullptr : &std::cout);
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(j, 1) << "\n"; });
      return 0;
    };
  });
}

}  // namespace bneck
