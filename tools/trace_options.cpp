#include "tools/trace_options.hpp"

#include <iostream>
#include <nlohmann/json.hpp>

#include "models/replay.hpp"
#include "sim/analysis/structure.hpp"
#include "tools/output.hpp"
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

std::vector<std::string> structure_texts(std::vector<std::string> args, const std::string& range) {
  bool per_step = false, step_range = false, pp = false, mb_range = false;
  auto is = [](const std::string& a, const char* f) { return a == f || a.rfind(std::string(f) + "=", 0) == 0; };
  for (const auto& a : args) {
    for (const char* f : {"--steps", "--cfg", "--resolution", "--frames"}) per_step = per_step || is(a, f);
    step_range = step_range || is(a, "--step-range");
    pp = pp || is(a, "--pipeline-parallel");
    mb_range = mb_range || is(a, "--microbatch-range");
  }
  if ((per_step && !step_range) || (pp && !mb_range)) args.push_back("@");
  args.push_back(range);
  return args;
}

bool said_no_device_work(const Trace& t, const char* what, const std::string& json_out) {
  const std::string line = no_device_work_line(t, what);
  if (line.empty()) return false;
  if (!json_out.empty())
    write_output(json_out, [&](std::ostream& o) {
      o << json_text(nlohmann::json{{"source", t.source}, {"no_device_work", line}}, 1) << "\n";
    });
  if (json_out != "-") std::cout << t.source << ": " << line << "\n";
  return true;
}

}  // namespace bneck
