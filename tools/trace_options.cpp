#include "tools/trace_options.hpp"

#include "sim/analysis/structure.hpp"
#include "traces/importer.hpp"

namespace bneck {

void add_trace_options(CLI::App& sub, TraceOptions& o) {
  sub.add_option("--range-scope", o.range_scope,
                 "process: a range holds what any thread of its process launches while it is open (PyTorch's autograd "
                 "thread in backward()), except threads inside an earlier range of their own; thread: only its own thread's")
      ->check(CLI::IsMember({"process", "thread"}))
      ->capture_default_str();
}

Trace load_with_options(const std::vector<std::string>& paths, const TraceOptions& o, const std::vector<std::string>& texts) {
  Trace t = load_traces(paths);
  t.range_scope = o.range_scope == "thread" ? RangeScope::Thread : RangeScope::Process;
  for (const auto& s : texts)
    if (add_structure_ranges_if_named(t, s)) break;
  return t;
}

}  // namespace bneck
