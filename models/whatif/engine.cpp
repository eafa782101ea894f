// The what-if engine: the baseline case and the application of a transform list, plus the
// registry lookups, scenario files and command-line parsing that every transform shares.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/measured.hpp"
#include "models/whatif/transform.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_input.hpp"
#include "sim/whatif/selector.hpp"

namespace bneck {

Graph& WhatIfCase::edit_graph() {
  if (graph.use_count() != 1 || !graph) graph = std::make_shared<Graph>(*graph);
  return const_cast<Graph&>(*graph);
}

std::vector<bool> WhatIfContext::select(const std::string& sel, bool device_only) const {
  std::vector<bool> hit(trace.ops.size(), false);
  if (sel.empty()) {
    for (OpId i = 0; i < trace.ops.size(); ++i) hit[i] = is_device_op(trace.ops[i].kind);
    return hit;
  }
  Selector s = Selector::parse(sel);
  s.bind(trace);
  for (OpId i = 0; i < trace.ops.size(); ++i) hit[i] = (!device_only || is_device_op(trace.ops[i].kind)) && s.matches(i);
  return hit;
}

std::size_t count_selected(const std::vector<bool>& v) { return static_cast<std::size_t>(std::count(v.begin(), v.end(), true)); }

std::string fmt_num(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

std::string checked_selector(const std::string& sel) {
  if (!sel.empty()) (void)Selector::parse(sel);  // throws on a malformed selector
  return sel;
}

namespace {
std::string norm(std::string s) {
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}
}  // namespace

const TransformDef* find_transform(const std::string& name) {
  for (const TransformDef* d : transform_registry())
    if (norm(d->name) == norm(name)) return d;
  return nullptr;
}

Transform parse_transform(const std::string& name, const std::string& arg) {
  const TransformDef* d = find_transform(name);
  if (!d) {
    std::string names;
    for (const TransformDef* t : transform_registry()) names += (names.empty() ? "" : ", ") + std::string(t->name);
    throw InputError("unknown transform '" + name + "' (" + names + ")");
  }
  if (d->arg == TransformDef::Arg::Required && arg.empty()) throw InputError("--" + std::string(d->name) + " needs " + d->metavar);
  std::unique_ptr<TransformStep> step = d->parse(arg);
  step->text = "--" + std::string(d->name) + (arg.empty() ? "" : " " + arg);
  return Transform(std::move(step));
}

std::string transform_help(bool markdown) {
  std::string out;
  for (const TransformDef* d : transform_registry()) {
    std::string opt = "--" + std::string(d->name);
    if (d->arg == TransformDef::Arg::Required)
      opt += " " + std::string(d->metavar);
    else if (d->arg == TransformDef::Arg::Optional)
      opt += "[=" + std::string(d->metavar) + "]";
    if (markdown)
      out += "- `" + opt + "`: " + d->help + "\n";
    else
      out += "  " + opt + std::string(opt.size() < 28 ? 28 - opt.size() : 1, ' ') + d->help + "\n";
  }
  return out;
}

Scenario load_scenario(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, "is a directory, not a scenario");
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open scenario");
  nlohmann::json j = parse_json_input(in, path);
  Scenario s;
  if (!j.is_object() || !j.contains("transforms") || !j["transforms"].is_array())
    throw InputError(path, "a scenario is {\"name\": ..., \"transforms\": [{\"scale\": \"2:name~gemm\"}, ...]}");
  s.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : path;
  for (std::size_t i = 0; i < j["transforms"].size(); ++i) {
    const auto& t = j["transforms"][i];
    if (!t.is_object() || t.size() != 1) throw InputError(path, "transforms[" + std::to_string(i) + "]: one {kind: argument} per entry");
    auto it = t.begin();
    std::string arg;
    if (it.value().is_string())
      arg = it.value().get<std::string>();
    else if (it.value().is_boolean() && it.value().get<bool>())
      arg = "";
    else if (it.value().is_number_integer())
      arg = std::to_string(it.value().get<long long>());
    else
      throw InputError(path, "transforms[" + std::to_string(i) + "]: the argument must be a string");
    try {
      s.transforms.push_back(parse_transform(it.key(), arg));
    } catch (const InputError& e) { throw InputError(path, "transforms[" + std::to_string(i) + "]: " + e.what()); }
  }
  return s;
}

std::vector<Transform> parse_transform_args(const std::vector<std::string>& args, std::string& scenario_name) {
  std::vector<Transform> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], val;
    bool has_val = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_val = true;
    }
    auto next = [&]() -> std::string {
      if (has_val) return val;
      if (i + 1 >= args.size()) throw InputError(a + " needs a value");
      return args[++i];
    };
    if (a == "--scenario") {
      const std::string path = next();
      Scenario s = load_scenario(path);
      if (s.transforms.empty())
        throw InputError(path, "the scenario lists no transforms (\"transforms\": [{\"scale\": \"2:name~gemm\"}, ...])");
      scenario_name += (scenario_name.empty() ? "" : "+") + s.name;
      out.insert(out.end(), s.transforms.begin(), s.transforms.end());
      continue;
    }
    const TransformDef* d = a.rfind("--", 0) == 0 ? find_transform(a.substr(2)) : nullptr;
    if (!d) {
      std::string names;
      for (const TransformDef* t : transform_registry()) names += " --" + std::string(t->name);
      throw InputError("whatif: unknown option or stray argument '" + args[i] + "' (transforms:" + names +
                       " --scenario FILE; TRACE comes first)");
    }
    std::string arg = d->arg == TransformDef::Arg::Required ? next() : (has_val ? val : "");
    out.push_back(parse_transform(d->name, arg));
  }
  return out;
}

WhatIfEngine::WhatIfEngine(const Trace& t, std::shared_ptr<const Graph> base, HwSpec source)
    : ctx_{t, std::move(base), std::move(source), {}} {
  ctx_.work = estimate_work(t, ctx_.source);
}

WhatIfCase WhatIfEngine::baseline() const {
  WhatIfCase c;
  c.graph = ctx_.base;
  c.spec = ctx_.source;
  c.durations.resize(ctx_.trace.ops.size());
  MeasuredCostModel m;
  for (OpId i = 0; i < ctx_.trace.ops.size(); ++i) c.durations[i] = m.duration(i, *ctx_.base);
  return c;
}

WhatIfCase WhatIfEngine::apply(const std::vector<Transform>& transforms) const {
  WhatIfCase c = baseline();
  for (const Transform& tr : transforms) tr->apply(ctx_, c);
  return c;
}

}  // namespace bneck
