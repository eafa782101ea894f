// bneck serve --model CONFIG.json --hw SPEC (--requests LOG.jsonl | --rate R --num N ...)
//             [--calibrate TRACE --calibrate-log LOG.jsonl] [--warmup-requests LOG.jsonl] [--engine-wake T] [--policy continuous|static]
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
  sub.add_option("--model", a.model_path, "a Hugging Face config.json (hidden_size, layers, heads, ...)")->required();
  sub.add_option("--hw", a.hw_name, "the GPU: a preset (bneck hw list) or a spec file")->required();
  sub.add_option("--requests", a.requests_path, "request log, JSONL: id, arrival_s, prompt_tokens, output_tokens [, token_times_s ...]");
  sub.add_option("--rate", a.rate, "generate requests: arrivals per second (0: all at t = 0)");
  sub.add_option("--num", a.num, "generate requests: how many");
  sub.add_option("--prompt-len", a.prompt_len, "generated prompt lengths: N, LO..HI (uniform) or lognormal:MEDIAN,SIGMA")->capture_default_str();
  sub.add_option("--output-len", a.output_len, "generated output lengths: N, LO..HI or lognormal:MEDIAN,SIGMA")->capture_default_str();
  sub.add_option("--arrival", a.arrival, "generated arrivals: poisson or gamma:CV")->capture_default_str();
  sub.add_option("--seed", a.seed, "generator seed")->capture_default_str();
  sub.add_option("--calibrate", a.calib_trace, "a trace (nsys, Kineto) of the real engine, its steps marked (README)");
  sub.add_option("--calibrate-log", a.calib_log, "the request log of the calibration run (or of its requests served unprofiled)");
  sub.add_option("--warmup-requests", a.warmup_path, "requests the engine served before these (its warm-up), JSONL: their step shapes are built already");
  sub.add_option("--engine-wake", a.wake, "an idle engine starts a step this long after the request that wakes it ('200 us'; default 0)");
  sub.add_option("--policy", a.policy, "continuous | static")->check(CLI::IsMember({"continuous", "static"}))->capture_default_str();
  sub.add_option("--max-batch-tokens", a.max_batch_tokens, "tokens per step (the scheduler's budget)")->capture_default_str();
  sub.add_option("--max-seqs", a.max_seqs, "sequences per step (static: the batch size)")->capture_default_str();
  sub.add_option("--block-size", a.block_size, "KV-cache block, tokens")->capture_default_str();
  sub.add_option("--num-blocks", a.num_blocks, "KV-cache blocks (default: from --kv-memory)");
  sub.add_option("--kv-memory", a.kv_memory, "memory for the KV cache ('60 GiB'; default: 90 % of the GPU less weights and activations)");
  sub.add_option("--kv-watermark", a.watermark, "fraction of blocks kept free when admitting requests")->capture_default_str();
  sub.add_option("--chunked-prefill", a.chunked, "most prompt tokens of one request per step (0: the token budget)")->capture_default_str();
  sub.add_flag("--cuda-graph", a.cuda_graph, "the forward runs as a CUDA graph on a padded shape");
  sub.add_option("--graph-q-pad", a.q_pad, "CUDA graphs: query tokens padded to a multiple of N")->capture_default_str();
  sub.add_option("--graph-kv-pad", a.kv_pad, "CUDA graphs: KV tokens read padded to a multiple of N (0: none)")->capture_default_str();
  sub.add_option("--slo-ttft", a.slo_ttft, "goodput: time to first token at most ('200 ms')");
  sub.add_option("--slo-tpot", a.slo_tpot, "goodput: time per output token at most ('50 ms')");
  sub.add_option("--rates", a.rates, "sweep these request rates (requests/s): the knee and the goodput-maximizing rate");
  sub.add_option("--json", json_out, "write the report as JSON to FILE ('-' for stdout)");
  sub.add_option("--chrome-trace", a.chrome_out, "engine steps and requests (Perfetto UI) to FILE");
  sub.callback([&action] {
    action = [] {
      nlohmann::json j = run_serve(a, json_out == "-" ? nullptr : &std::cout);
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(j, 1) << "\n"; });
      return 0;
    };
  });
}

}  // namespace bneck
