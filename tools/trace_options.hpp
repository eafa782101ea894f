// Options every command that reads a trace shares: how ranges take their work (--range-scope),
// and the structure levels (`@iteration`, ...) added as ranges when a regex or selector names one.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "traces/ir.hpp"

namespace bneck {

struct TraceOptions {
  std::string range_scope = "process";
};

void add_trace_options(CLI::App& sub, TraceOptions& o);
// Loads the trace(s) (one per rank), applies the options, and adds the structure levels as ranges
// when any of `texts` (range regexes, selectors, transform arguments) names one with '@'.
Trace load_with_options(const std::vector<std::string>& paths, const TraceOptions& o, const std::vector<std::string>& texts = {});
// Transform arguments (whatif, report): they name a structure level, or use one by default (a
// per-step diffusion what-if without --step-range): the texts for load_with_options.
std::vector<std::string> structure_texts(std::vector<std::string> args, const std::string& range);

// A trace with no timed device work (a CPU-only profile, an execution trace without timings,
// launches whose kernels the trace lacks): says so in one line ("no device work in this trace:
// nothing to forecast"; `what` names the command's object) on stdout unless JSON goes there, and as
// {"source", "no_device_work"} to json_out; true when it did (the command then stops, exit 0).
bool said_no_device_work(const Trace& t, const char* what, const std::string& json_out);

}  // namespace bneck
