// bneck: the composition root. The only place that maps errors to exit codes:
// 0 ok, 2 bad input or usage, 1 internal error.
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <iostream>

#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "tools/version.hpp"

namespace bneck {

const std::vector<Subtool>& subtools() {
  static const std::vector<Subtool> list = {
      {"info", "Summarize a trace: format, devices, processes, streams, op counts, ranges, anomalies", add_info},
      {"ops", "List the ops of a trace (ids, kinds, names, streams, times), optionally selected", add_ops},
      {"structure", "The repeating units of a run found from the trace alone (iterations, layers, backward): --range @LEVEL",
       add_structure},
      {"advise", "What holds the run back and what to change: bottleneck per phase, suggestions ranked by forecast", add_advise},
      {"replay", "Replay a trace as a discrete-event simulation: critical path, slack, overlap, range spans", add_replay},
      {"whatif", "Forecast a change (--scale, --remove, --fuse, --precision, --cuda-graph, --hw) beside Amdahl", add_whatif},
      {"sweep", "The cross product of hardware specs and scenarios (or a spec field's range), in parallel, as CSV/SVG", add_sweep},
      {"report", "One self-contained HTML report: timelines, critical path, overlap, ranges, roofline, what-if (-o FILE)", add_report},
      {"pipeline", "Diffusion budget: K x denoiser step + fixed stages per generation (--range, --step-range)", add_pipeline},
      {"serve", "LLM serving: TTFT, TPOT and throughput of continuous or static batching, paged KV, CUDA graphs; rate sweeps", add_serve},
      {"calibrate", "Fit the hardware model to microbenchmark measurements (validate/) and write a spec overlay", add_calibrate},
      {"validate-report", "Predicted vs measured microbenchmarks for a spec: error per family, held-out half", add_validate_report},
      {"hw", "Hardware presets: list, show (every number with its source)", add_hw},
      {"roofline", "Roofline calculator, or a trace's kernels on the roofline (--svg)", add_roofline},
      {"occupancy", "Occupancy calculator: blocks and warps per SM and the limiter", add_occupancy},
      {"coalesce", "Coalescing calculator: 32-byte sectors a warp's strided access moves", add_coalesce},
      {"tile", "Tiling calculator: FLOPs per byte of a square tile", add_tile},
      {"amdahl", "Amdahl's law: speed-up of a run when a fraction of it gets faster", add_amdahl},
      {"collective", "collective time, algbw and busbw (nccl-tests' definitions) on a spec's links", add_collective},
  };
  return list;
}

namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace
}  // namespace bneck

int main(int argc, char** argv) {
  using namespace bneck;
  // Large buffers (ops, edges, schedules: megabytes each) are mapped and unmapped on their own:
  // glibc's adaptive threshold would otherwise keep freed phase temporaries in the heap, resident.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  CLI::App app{"bneck: what holds this GPU run back, and what would it gain if...?"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "bneck " BNECK_VERSION " (commit " BNECK_COMMIT ")");
  Action action;
  for (const auto& st : subtools()) st.add(*app.add_subcommand(st.name, st.help), action);
  if (argc > 1 && argv[1][0] != '-') {
    std::string cmd = argv[1];
    bool known = false;
    std::string best;
    std::size_t best_d = 99;
    for (const auto& st : subtools()) {
      if (cmd == st.name) known = true;
      std::size_t d = edit_distance(cmd, st.name);
      if (d < best_d) {
        best_d = d;
        best = st.name;
      }
    }
    if (!known) {
      std::fprintf(stderr, "bneck: unknown subcommand '%s'%s\n", cmd.c_str(),
                   best_d <= 2 ? (", did you mean '" + best + "'?").c_str() : "; run 'bneck --help'");
      return 2;
    }
  }
  limit_stdout_lines();  // text reports: no line over 200 characters (JSON, CSV and traces pass as they are)
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    return action ? action() : 2;
  } catch (const InputError& e) {
    std::fprintf(stderr, "bneck: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "bneck: internal error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bneck: internal error: %s\n", e.what());
    return 1;
  }
}
