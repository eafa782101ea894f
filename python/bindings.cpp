// bneck._bneck: the library for Python (pybind11). Reports cross as JSON text (the CLI's --json
// keys); python/bneck/__init__.py parses them. InputError is bneck.InputError (a ValueError)
// with the CLI's one-line message. The GIL is released while bneck works.
#include <algorithm>
#include <CLI/CLI.hpp>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "models/replay.hpp"
#include "models/serving/pipeline.hpp"
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
  const std::string none = no_device_work_line(*t, "replay on a GPU");
  if (!none.empty()) return json_text(nlohmann::json{{"source", t->source}, {"no_device_work", none}}, -1);
  ReplayOptions o;
  o.range_regex = std::move(range);
  o.hw = std::move(hw);
  o.sharing = sharing;
  ReplayReport r = run_replay(*t, o);
  return json_text(replay_json(r, o), -1);
}

std::string whatif_text(const std::shared_ptr<Trace>& t, const std::vector<std::string>& args, std::optional<std::string> range,
                        bool sharing) {
  WhatIfOptions o;
  o.range_regex = std::move(range);
  o.sharing = sharing;
  o.transforms = parse_transform_args(args, o.scenario_name);
  const std::string none = no_device_work_line(*t, "forecast");
  if (!none.empty()) return json_text(nlohmann::json{{"source", t->source}, {"no_device_work", none}}, -1);
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

// serve(**options): the serving pipeline (models/serving/pipeline.hpp) with typed keyword
// arguments, named as the CLI's options without dashes; a value of the wrong type or an unknown
// name is an InputError naming it.
std::string serve_text(const py::kwargs& kw) {
  using serve::ServeJob;
  using Set = std::function<void(ServeJob&, py::handle)>;
  auto str = [](std::string ServeJob::*f) { return Set([f](ServeJob& j, py::handle v) { j.*f = py::cast<std::string>(v); }); };
  auto i64 = [](std::int64_t serve::EngineConfig::*f) {
    return Set([f](ServeJob& j, py::handle v) { j.engine.*f = py::cast<std::int64_t>(v); });
  };
  auto duration = [](auto field) {
    return Set([field](ServeJob& j, py::handle v) {
      field(j) = py::isinstance<py::str>(v) ? parse_duration(py::cast<std::string>(v)) : py::cast<TimeNs>(v);
    });
  };
  std::string chrome, step_costs;
  const std::map<std::string, Set> table = {
      {"model", str(&ServeJob::model_path)},
      {"hw", str(&ServeJob::hw)},
      {"requests", str(&ServeJob::requests_path)},
      {"warmup_requests", str(&ServeJob::warmup_path)},
      {"calibrate", str(&ServeJob::calibrate_trace)},
      {"trace_log", str(&ServeJob::trace_log)},
      {"calibrate_log", str(&ServeJob::calibrate_log)},
      {"num", [](ServeJob& j, py::handle v) { j.workload.num = py::cast<std::int64_t>(v); }},
      {"rate", [](ServeJob& j, py::handle v) { j.workload.rate = py::cast<double>(v); }},
      {"seed", [](ServeJob& j, py::handle v) { j.workload.seed = py::cast<std::uint64_t>(v); }},
      {"prompt_len", [](ServeJob& j, py::handle v) { j.workload.prompt = serve::parse_length_dist(py::str(v), "prompt_len"); }},
      {"output_len", [](ServeJob& j, py::handle v) { j.workload.output = serve::parse_length_dist(py::str(v), "output_len"); }},
      {"arrival",
       [](ServeJob& j, py::handle v) {
         const std::string a = py::cast<std::string>(v);
         if (a.rfind("gamma:", 0) == 0)
           j.workload.cv = std::stod(a.substr(6));
         else if (a != "poisson")
           throw InputError("serve(): arrival='" + a + "': expected poisson or gamma:CV");
       }},
      {"policy",
       [](ServeJob& j, py::handle v) {
         const std::string p = py::cast<std::string>(v);
         if (p != "continuous" && p != "static") throw InputError("serve(): policy='" + p + "': continuous or static");
         j.engine.policy = p == "static" ? serve::Policy::Static : serve::Policy::Continuous;
       }},
      {"max_batch_tokens", i64(&serve::EngineConfig::max_batch_tokens)},
      {"max_seqs", i64(&serve::EngineConfig::max_seqs)},
      {"block_size", i64(&serve::EngineConfig::block_size)},
      {"num_blocks", i64(&serve::EngineConfig::num_blocks)},
      {"chunked_prefill", i64(&serve::EngineConfig::chunked_prefill)},
      {"graph_q_pad", [](ServeJob& j, py::handle v) { j.engine.padding.q_interval = py::cast<std::int64_t>(v); }},
      {"graph_kv_pad", [](ServeJob& j, py::handle v) { j.engine.padding.kv_interval = py::cast<std::int64_t>(v); }},
      {"kv_watermark", [](ServeJob& j, py::handle v) { j.engine.watermark = py::cast<double>(v); }},
      {"cuda_graph", [](ServeJob& j, py::handle v) { j.engine.cuda_graph = py::cast<bool>(v); }},
      {"prefix_caching", [](ServeJob& j, py::handle v) { j.engine.prefix_caching = py::cast<bool>(v); }},
      {"prefix_hash_block",
       [](ServeJob& j, py::handle v) { j.engine.prefix_hash_block = j.workload.hash_block = py::cast<std::int64_t>(v); }},
      {"shared_prefix", [](ServeJob& j, py::handle v) { serve::parse_shared_prefix(py::str(v), j.workload); }},
      {"kv_memory",
       [](ServeJob& j, py::handle v) {
         j.kv_memory = py::isinstance<py::str>(v) ? parse_bytes(py::cast<std::string>(v)) : py::cast<Bytes>(v);
         if (j.kv_memory <= 0) throw InputError("serve(): kv_memory must be positive");
       }},
      {"engine_wake", duration([](ServeJob& j) -> TimeNs& { return j.engine.wake; })},
      {"slo_ttft", duration([](ServeJob& j) -> TimeNs& { return j.slo.ttft; })},
      {"slo_tpot", duration([](ServeJob& j) -> TimeNs& { return j.slo.tpot; })},
      {"rates",
       [](ServeJob& j, py::handle v) {
         j.rates =
             py::isinstance<py::str>(v) ? serve::parse_rates(py::cast<std::string>(v), "serve(): rates") : py::cast<std::vector<double>>(v);
       }},
      {"chrome_trace", [&chrome](ServeJob&, py::handle v) { chrome = py::cast<std::string>(v); }},
      {"step_costs", [&step_costs](ServeJob&, py::handle v) { step_costs = py::cast<std::string>(v); }},
  };
  ServeJob job;
  job.workload.prompt = serve::parse_length_dist("32..512", "prompt_len");  // the CLI's defaults
  job.workload.output = serve::parse_length_dist("16..128", "output_len");
  for (const auto& [k, v] : kw) {
    const std::string name = py::cast<std::string>(k);
    auto it = table.find(name);
    if (it == table.end()) throw InputError("serve(): unknown option '" + name + "'");
    try {
      it->second(job, v);
    } catch (const py::cast_error&) {
      throw InputError("serve(): " + name + "=" + py::cast<std::string>(py::repr(v)) + ": wrong type");
    } catch (const InputError&) { throw; } catch (const std::exception&) {  // std::stod: not a number, or out of range
      throw InputError("serve(): " + name + "=" + py::cast<std::string>(py::repr(v)) + ": not a number in range");
    }
  }
  job.keep_steps = !chrome.empty();
  if (!step_costs.empty()) {
    ServeArgs a;  // the step listing reads one trace: no pipeline to run
    a.model_path = job.model_path, a.hw_name = job.hw, a.step_costs = step_costs;
    return json_text(run_serve(a, nullptr), -1);
  }
  py::gil_scoped_release nogil;
  return json_text(serve_report(job, serve::run_serving(job), chrome, nullptr), -1);
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
  m.def("serve", [](const py::kwargs& kw) { return serve_text(kw); });
}
