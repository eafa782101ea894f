// bneck._bneck: the library for Python (pybind11). Reports cross as JSON text (the CLI's --json
// keys); python/bneck/__init__.py parses them. InputError is bneck.InputError (a ValueError)
// with the CLI's one-line message. The GIL is released while bneck works.
#include <algorithm>
#include <CLI/CLI.hpp>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "models/replay.hpp"
#include "models/whatif/run.hpp"
#include "models/whatif/sweep.hpp"
#include "sim/base/error.hpp"
#include "tools/output.hpp"
#include "tools/views/replay_view.hpp"
#include "tools/views/serve_view.hpp"
#include "tools/views/whatif_view.hpp"
#include "traces/importer.hpp"

namespace py = pybind11;
using namespace bneck;

namespace {

std::string replay_text(const std::shared_ptr<Trace>& t, std::optional<std::string> range, std::string hw, bool sharing) {
  ReplayOptions o;
  o.range_regex = std::move(range);
  o.hw = std::move(hw);
  o.sharing = sharing;
  ReplayReport r = run_replay(*t, o);
  return json_text(replay_json(r, o), -1);
}

std::string whatif_text(const std::shared_ptr<Trace>& t, const std::vector<std::string>& args, std::optional<std::string> range, bool sharing) {
  WhatIfOptions o;
  o.range_regex = std::move(range);
  o.sharing = sharing;
  o.transforms = parse_transform_args(args, o.scenario_name);
  WhatIfReport r = run_whatif(*t, o);
  return json_text(whatif_json(r), -1);
}

// One case per (hardware, scenario); a scenario is a list of transform arguments.
std::string sweep_text(const std::shared_ptr<Trace>& t, const std::vector<std::string>& hw, const std::vector<std::string>& names,
                       const std::vector<std::vector<std::string>>& scenarios, std::optional<std::string> range, unsigned jobs) {
  std::vector<SweepCase> cases;
  std::vector<std::string> hws = hw.empty() ? std::vector<std::string>{""} : hw;
  for (const auto& h : hws)
    for (std::size_t s = 0; s <= scenarios.size(); ++s) {
      SweepCase c;
      c.hw = h.empty() ? "trace" : h;
      c.scenario = s == 0 ? "baseline" : (s - 1 < names.size() ? names[s - 1] : "scenario" + std::to_string(s));
      std::string unused;
      if (s > 0) c.transforms = parse_transform_args(scenarios[s - 1], unused);
      if (!h.empty()) c.transforms.push_back(parse_transform("hw", h));
      cases.push_back(std::move(c));
    }
  std::optional<Regex> re;
  if (range) re = range_regex(*range);
  run_sweep(*t, "", re, jobs, cases, 0, 1, false);
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& c : cases) {
    if (!c.error.empty()) throw InputError("sweep case " + c.hw + " / " + c.scenario + ": " + c.error);
    rows.push_back({{"hw", c.hw},
                    {"scenario", c.scenario},
                    {"baseline_ns", c.baseline},
                    {"predicted_ns", c.predicted},
                    {"speedup", c.predicted ? static_cast<double>(c.baseline) / static_cast<double>(c.predicted) : 0.0},
                    {"compute_bound_ns", c.by_bound[0]},
                    {"memory_bound_ns", c.by_bound[1]},
                    {"latency_bound_ns", c.by_bound[2]}});
  }
  return json_text(nlohmann::json{{"cases", rows}}, -1);
}

std::string serve_text(const std::map<std::string, std::string>& kw) {
  // The keyword arguments are the CLI's options (tools/views/serve_view.hpp), parsed by the same
  // table: max_batch_tokens=512 is --max-batch-tokens 512, cuda_graph=True the flag.
  ServeArgs a;
  CLI::App app("serve");
  add_serve_options(app, a);
  std::vector<std::string> args;
  for (const auto& [k, v] : kw) {
    std::string name = "--" + k;
    std::replace(name.begin(), name.end(), '_', '-');
    const CLI::Option* o = app.get_option_no_throw(name);
    if (!o) throw InputError("serve(): unknown option '" + k + "'");
    if (o->get_expected_max() == 0) {  // a flag: True/False
      args.push_back(name + "=" + (v == "True" || v == "true" || v == "1" ? "true" : "false"));
    } else {
      args.push_back(name);
      args.push_back(v);
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    throw InputError(std::string("serve(): ") + e.what());
  }
  return json_text(run_serve(a, nullptr), -1);
}

}  // namespace

PYBIND11_MODULE(_bneck, m) {
  m.doc() = "bneck's library: load a trace, replay it, forecast what-ifs, sweep, simulate LLM serving";
  py::register_exception<InputError>(m, "InputError", PyExc_ValueError);
  py::class_<Trace, std::shared_ptr<Trace>>(m, "Trace")
      .def_property_readonly("source", [](const Trace& t) { return t.source; })
      .def_property_readonly("format", [](const Trace& t) { return t.format; })
      .def_property_readonly("op_count", [](const Trace& t) { return t.ops.size(); })
      .def_property_readonly("device_op_count", [](const Trace& t) { return t.device_op_count(); })
      .def_property_readonly("range_count", [](const Trace& t) { return t.ranges.size(); });
  m.def(
      "load", [](const std::vector<std::string>& paths) { return std::make_shared<Trace>(load_traces(paths)); }, py::arg("paths"),
      py::call_guard<py::gil_scoped_release>());
  m.def("replay", &replay_text, py::arg("trace"), py::arg("range") = py::none(), py::arg("hw") = "", py::arg("sharing") = true,
        py::call_guard<py::gil_scoped_release>());
  m.def("whatif", &whatif_text, py::arg("trace"), py::arg("args"), py::arg("range") = py::none(), py::arg("sharing") = true,
        py::call_guard<py::gil_scoped_release>());
  m.def("sweep", &sweep_text, py::arg("trace"), py::arg("hw"), py::arg("names"), py::arg("scenarios"), py::arg("range") = py::none(),
        py::arg("jobs") = 0u, py::call_guard<py::gil_scoped_release>());
  m.def("serve", &serve_text, py::arg("options"), py::call_guard<py::gil_scoped_release>());
}
