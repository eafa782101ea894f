// bneck._bneck: the library for Python (pybind11). Reports cross as JSON text (the CLI's --json
// keys); python/bneck/__init__.py parses them. InputError is bneck.InputError (a ValueError)
// with the CLI's one-line message. The GIL is released while bneck works.
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
  ServeArgs a;
  auto num = [](const std::string& k, const std::string& v) {
    try {
      std::size_t pos = 0;
      double d = std::stod(v, &pos);
      if (pos == v.size()) return d;
    } catch (...) {
    }
    throw InputError("serve(" + k + "=" + v + "): expected a number");
  };
  for (const auto& [k, v] : kw) {
    if (k == "model") a.model_path = v;
    else if (k == "hw") a.hw_name = v;
    else if (k == "requests") a.requests_path = v;
    else if (k == "calibrate") a.calib_trace = v;
    else if (k == "calibrate_log") a.calib_log = v;
    else if (k == "warmup_requests") a.warmup_path = v;
    else if (k == "engine_wake") a.wake = v;
    else if (k == "policy") a.policy = v;
    else if (k == "kv_memory") a.kv_memory = v;
    else if (k == "slo_ttft") a.slo_ttft = v;
    else if (k == "slo_tpot") a.slo_tpot = v;
    else if (k == "rates") a.rates = v;
    else if (k == "chrome_trace") a.chrome_out = v;
    else if (k == "prompt_len") a.prompt_len = v;
    else if (k == "output_len") a.output_len = v;
    else if (k == "arrival") a.arrival = v;
    else if (k == "max_batch_tokens") a.max_batch_tokens = static_cast<std::int64_t>(num(k, v));
    else if (k == "max_seqs") a.max_seqs = static_cast<std::int64_t>(num(k, v));
    else if (k == "block_size") a.block_size = static_cast<std::int64_t>(num(k, v));
    else if (k == "num_blocks") a.num_blocks = static_cast<std::int64_t>(num(k, v));
    else if (k == "chunked_prefill") a.chunked = static_cast<std::int64_t>(num(k, v));
    else if (k == "num") a.num = static_cast<std::int64_t>(num(k, v));
    else if (k == "graph_q_pad") a.q_pad = static_cast<std::int64_t>(num(k, v));
    else if (k == "graph_kv_pad") a.kv_pad = static_cast<std::int64_t>(num(k, v));
    else if (k == "rate") a.rate = num(k, v);
    else if (k == "kv_watermark") a.watermark = num(k, v);
    else if (k == "seed") a.seed = static_cast<std::uint64_t>(num(k, v));
    else if (k == "cuda_graph") a.cuda_graph = v == "True" || v == "true" || v == "1";
    else throw InputError("serve(): unknown option '" + k + "'");
  }
  if (a.model_path.empty() || a.hw_name.empty()) throw InputError("serve(): model= and hw= are required");
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
