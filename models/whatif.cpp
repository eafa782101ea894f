#include "models/whatif.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "sim/analysis/analysis.hpp"
#include "models/collective.hpp"
#include "sim/base/error.hpp"

namespace bneck {

Transform parse_transform(const std::string& kind, const std::string& arg) {
  Transform t;
  t.text = "--" + kind + (arg.empty() ? "" : " " + arg);
  auto check_sel = [&](const std::string& sel) {
    if (!sel.empty()) (void)Selector::parse(sel);  // throws on a malformed selector
    return sel;
  };
  if (kind == "scale") {
    auto c = arg.find(':');
    if (c == std::string::npos) throw InputError("--scale " + arg + ": expected FACTOR:SELECTOR, e.g. 2:name~gemm");
    try {
      std::size_t pos = 0;
      t.factor = std::stod(arg.substr(0, c), &pos);
      if (pos != c || !(t.factor > 0) || !std::isfinite(t.factor)) throw std::invalid_argument("factor");
    } catch (const std::exception&) {
      throw InputError("--scale " + arg + ": the factor must be a positive number");
    }
    t.kind = Transform::Scale;
    t.selector = check_sel(arg.substr(c + 1));
    if (t.selector.empty()) throw InputError("--scale " + arg + ": needs a selector after ':'");
  } else if (kind == "remove") {
    t.kind = Transform::Remove;
    t.selector = check_sel(arg);
    if (t.selector.empty()) throw InputError("--remove needs a selector");
  } else if (kind == "fuse") {
    t.kind = Transform::Fuse;
    t.selector = check_sel(arg);
    if (t.selector.empty()) throw InputError("--fuse needs a selector");
  } else if (kind == "precision") {
    t.kind = Transform::Precision;
    auto c = arg.find(':');
    auto d = dtype_from_string(arg.substr(0, c));
    if (!d) throw InputError("--precision " + arg + ": unknown precision (fp32, tf32, bf16, fp16, fp8)");
    t.dtype = *d;
    if (c != std::string::npos) t.selector = check_sel(arg.substr(c + 1));
  } else if (kind == "cuda-graph" || kind == "cuda_graph") {
    t.kind = Transform::CudaGraph;
    t.selector = check_sel(arg);
  } else if (kind == "overlap-comm" || kind == "overlap_comm") {
    t.kind = Transform::OverlapComm;
    if (!arg.empty() && arg != "true") throw InputError("--overlap-comm takes no argument");
  } else if (kind == "ranks") {
    t.kind = Transform::Ranks;
    try {
      std::size_t pos = 0;
      long v = std::stol(arg, &pos);
      if (pos != arg.size() || v < 1 || v > 1'000'000) throw std::invalid_argument(arg);
      t.ranks = static_cast<std::uint32_t>(v);
    } catch (const std::exception&) {
      throw InputError("--ranks " + arg + ": expected a number of ranks (1 .. 1000000)");
    }
  } else if (kind == "hw") {
    t.kind = Transform::Hw;
    t.hw = arg;
    (void)load_hw(arg);  // fails early with the preset list
  } else {
    throw InputError("unknown transform '" + kind + "' (scale, remove, fuse, precision, cuda_graph, hw, overlap_comm)");
  }
  return t;
}

Scenario load_scenario(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open scenario");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path, std::string("malformed JSON: ") + e.what());
  }
  Scenario s;
  if (!j.is_object() || !j.contains("transforms") || !j["transforms"].is_array())
    throw InputError(path, "a scenario is {\"name\": ..., \"transforms\": [{\"scale\": \"2:name~gemm\"}, ...]}");
  s.name = j.value("name", path);
  for (std::size_t i = 0; i < j["transforms"].size(); ++i) {
    const auto& t = j["transforms"][i];
    if (!t.is_object() || t.size() != 1) throw InputError(path, "transforms[" + std::to_string(i) + "]: one {kind: argument} per entry");
    auto it = t.begin();
    if (!it.value().is_string()) throw InputError(path, "transforms[" + std::to_string(i) + "]: the argument must be a string");
    try {
      s.transforms.push_back(parse_transform(it.key(), it.value().get<std::string>()));
    } catch (const InputError& e) {
      throw InputError(path, "transforms[" + std::to_string(i) + "]: " + e.what());
    }
  }
  return s;
}

WhatIfEngine::WhatIfEngine(const Trace& t, std::shared_ptr<const Graph> base, HwSpec source)
    : t_(t), base_(std::move(base)), source_(std::move(source)) {
  work_ = estimate_work(t_, source_);
}

WhatIfCase WhatIfEngine::baseline() const {
  WhatIfCase c;
  c.graph = base_;
  c.spec = source_;
  c.durations.resize(t_.ops.size());
  MeasuredCostModel m;
  for (OpId i = 0; i < t_.ops.size(); ++i) c.durations[i] = m.duration(i, *base_);
  return c;
}

WhatIfCase WhatIfEngine::apply(const std::vector<Transform>& transforms) const {
  WhatIfCase c = baseline();
  for (const Transform& tr : transforms) {
    switch (tr.kind) {
      case Transform::Scale: scale(c, tr); break;
      case Transform::Remove: remove(c, tr); break;
      case Transform::Fuse: fuse(c, tr); break;
      case Transform::Precision: precision(c, tr); break;
      case Transform::CudaGraph: cuda_graph(c, tr); break;
      case Transform::Hw: retarget(c, tr); break;
      case Transform::OverlapComm: overlap_comm(c, tr); break;
      case Transform::Ranks: ranks(c, tr); break;
    }
  }
  return c;
}

std::vector<bool> WhatIfEngine::select(const std::string& sel, bool device_only) const {
  std::vector<bool> hit(t_.ops.size(), false);
  if (sel.empty()) {
    for (OpId i = 0; i < t_.ops.size(); ++i) hit[i] = is_device_op(t_.ops[i].kind);
    return hit;
  }
  Selector s = Selector::parse(sel);
  s.bind(t_);
  for (OpId i = 0; i < t_.ops.size(); ++i) hit[i] = (!device_only || is_device_op(t_.ops[i].kind)) && s.matches(i);
  return hit;
}

namespace {
std::size_t count(const std::vector<bool>& v) { return static_cast<std::size_t>(std::count(v.begin(), v.end(), true)); }
std::string fmt(const char* f, double a, double b = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}
// A writable copy of the case's graph (made once).
Graph& writable(WhatIfCase& c, std::shared_ptr<const Graph>& base) {
  if (c.graph == base) c.graph = std::make_shared<Graph>(*base);
  return const_cast<Graph&>(*c.graph);
}
}  // namespace

void WhatIfEngine::scale(WhatIfCase& c, const Transform& tr) const {
  auto hit = select(tr.selector, false);
  TimeNs before = 0, after = 0;
  for (OpId i = 0; i < t_.ops.size(); ++i) {
    if (!hit[i]) continue;
    before += c.durations[i];
    c.durations[i] = static_cast<TimeNs>(std::llround(static_cast<double>(c.durations[i]) / tr.factor));
    after += c.durations[i];
  }
  if (c.scale_factor == 0) {
    c.scale_factor = tr.factor;
    c.scaled = hit;
  }
  c.log.push_back(tr.text + ": " + std::to_string(count(hit)) + " ops, " + format_duration(before) + " -> " + format_duration(after));
}

void WhatIfEngine::remove(WhatIfCase& c, const Transform& tr) const {
  auto hit = select(tr.selector, false);
  TimeNs before = 0;
  for (OpId i = 0; i < t_.ops.size(); ++i)
    if (hit[i]) {
      before += c.durations[i];
      c.durations[i] = 0;
    }
  c.log.push_back(tr.text + ": " + std::to_string(count(hit)) + " ops removed (" + format_duration(before) + ")");
}

void WhatIfEngine::fuse(WhatIfCase& c, const Transform& tr) const {
  auto hit = select(tr.selector, true);
  std::shared_ptr<const Graph> base = base_;
  // Device ops per stream in FIFO order.
  std::vector<std::vector<OpId>> lanes(t_.lanes.size());
  for (OpId i = 0; i < t_.ops.size(); ++i)
    if (is_device_op(t_.ops[i].kind)) lanes[t_.ops[i].lane].push_back(i);
  std::size_t runs = 0, kernels = 0;
  TimeNs before = 0, after = 0;
  for (const auto& lane : lanes) {
    std::size_t k = 0;
    while (k < lane.size()) {
      if (!hit[lane[k]] || t_.ops[lane[k]].kind != OpKind::Kernel) { ++k; continue; }
      std::size_t e = k;
      while (e + 1 < lane.size() && hit[lane[e + 1]] && t_.ops[lane[e + 1]].kind == OpKind::Kernel) ++e;
      if (e > k) {
        // The run lane[k..e] becomes one kernel.
        KernelWork fused = work_[lane[k]];
        double measured = 0, modelled = 0;
        for (std::size_t m = k; m <= e; ++m) {
          measured += static_cast<double>(c.durations[lane[m]]);
          modelled += static_cast<double>(model_kernel(t_, lane[m], work_[lane[m]], c.spec).time_ns);
          if (m > k) fused.flops += work_[lane[m]].flops;
        }
        fused.bytes = 0.5 * work_[lane[k]].bytes + 0.5 * work_[lane[e]].bytes;
        double calib = modelled > 0 ? measured / modelled : 1;
        auto t_fused = static_cast<TimeNs>(std::llround(static_cast<double>(model_kernel(t_, lane[k], fused, c.spec).time_ns) * calib));
        before += static_cast<TimeNs>(measured);
        after += t_fused;
        c.durations[lane[k]] = t_fused;
        Graph& g = writable(c, base);
        for (std::size_t m = k + 1; m <= e; ++m) {
          c.durations[lane[m]] = 0;
          // No stream gap inside a fused kernel.
          for (auto ed : boost::make_iterator_range(boost::out_edges(lane[m - 1], g.csr)))
            if (boost::target(ed, g.csr) == lane[m] && g.csr[ed].type() == EdgeType::StreamOrder) g.csr[ed].set_delay(0);
        }
        ++runs;
        kernels += e - k + 1;
      }
      k = e + 1;
    }
  }
  c.log.push_back(tr.text + ": " + std::to_string(kernels) + " kernels in " + std::to_string(runs) + " fused runs, " +
                  format_duration(before) + " -> " + format_duration(after));
}

void WhatIfEngine::precision(WhatIfCase& c, const Transform& tr) const {
  auto hit = select(tr.selector, true);
  const GpuSpec& g = c.spec.gpu;
  std::size_t compute = 0, memory = 0, kept = 0;
  TimeNs before = 0, after = 0;
  const double new_b = dtype_bytes(tr.dtype);
  for (OpId i = 0; i < t_.ops.size(); ++i) {
    const Op& o = t_.ops[i];
    if (!hit[i] || o.kind != OpKind::Kernel || (o.flags & Op::kFlagNccl)) continue;
    const KernelWork& w = work_[i];
    if (w.dtype == tr.dtype || (dtype_bytes(w.dtype) <= new_b && !is_compute_class(w.cls))) { ++kept; continue; }
    const std::string& name = t_.name(o);
    TimeNs d = c.durations[i], nd = d;
    if (is_compute_class(w.cls)) {
      KernelWork w2 = w;
      w2.dtype = tr.dtype;
      w2.unit = g.best_unit(tr.dtype);
      w2.bytes = w.bytes * new_b / dtype_bytes(w.dtype);
      double old_t = static_cast<double>(model_kernel(t_, i, w, c.spec).time_ns);
      double new_t = static_cast<double>(model_kernel(t_, i, w2, c.spec).time_ns);
      nd = old_t > 0 ? static_cast<TimeNs>(std::llround(static_cast<double>(d) * new_t / old_t)) : d;
      if (w.weight_elems > 0) {  // autocast's cast of the weight, folded into its GEMM
        double cast_bytes = w.weight_elems * (dtype_bytes(w.dtype) + new_b);
        nd += static_cast<TimeNs>(std::llround(cast_bytes / (g.memory_bandwidth * g.streaming_efficiency_for(16)) * 1e9)) + g.kernel_tail;
      }
      ++compute;
    } else if ((w.cls == KernelClass::Elementwise || w.cls == KernelClass::Copy) && name.find("multi_tensor_apply") == std::string::npos) {
      double ratio = new_b / dtype_bytes(w.dtype);
      bool vectorized = name.find("vectorized") != std::string::npos;
      Bytes old_w = vectorized ? 16 : static_cast<Bytes>(dtype_bytes(w.dtype));
      Bytes new_w = vectorized ? 16 : static_cast<Bytes>(new_b);
      double eff = g.streaming_efficiency_for(old_w) / g.streaming_efficiency_for(new_w);
      double body = static_cast<double>(std::max<TimeNs>(0, d - g.kernel_tail));
      nd = static_cast<TimeNs>(std::llround(body * ratio * eff)) + std::min(d, g.kernel_tail);
      ++memory;
    } else {
      ++kept;
      continue;
    }
    before += d;
    after += nd;
    c.durations[i] = nd;
  }
  c.log.push_back(tr.text + ": " + std::to_string(compute) + " GEMM/attention/conv kernels to " + to_string(tr.dtype) + " on " +
                  to_string(g.best_unit(tr.dtype)) + ", " + std::to_string(memory) + " elementwise/copy kernels at " + fmt("%.0f", new_b) +
                  " B/element, " + std::to_string(kept) + " kept; " + format_duration(before) + " -> " + format_duration(after));
}

void WhatIfEngine::cuda_graph(WhatIfCase& c, const Transform& tr) const {
  // Regions: instances of the ranges the selector's range~ term names, else top-level ranges.
  std::optional<std::regex> re;
  static const std::regex range_term("(^|&)range~([^&]*)");
  std::smatch m;
  if (std::regex_search(tr.selector, m, range_term)) re = std::regex(m[2].str());
  RangeIndex idx(t_);
  std::vector<std::size_t> regions;
  for (std::size_t r = 0; r < t_.ranges.size(); ++r) {
    const std::string& name = t_.strings.str(t_.ranges[r].name);
    if (re ? std::regex_search(name, *re) : t_.ranges[r].depth == 0) regions.push_back(r);
  }
  std::shared_ptr<const Graph> base = base_;
  Graph& g = writable(c, base);
  const GpuSpec& spec = c.spec.gpu;
  std::size_t launches = 0;
  std::vector<OpId> dev;
  for (std::size_t r : regions) {
    auto [lo, hi] = idx.api_span(r);
    std::vector<OpId> apis;
    for (std::size_t p = lo; p < hi; ++p) apis.push_back(idx.api_at(p));
    OpId last_launch = kNone;
    for (OpId a : apis) {
      ApiClass cls = t_.ops[a].api_class();
      if (cls == ApiClass::Launch || cls == ApiClass::GraphLaunch || cls == ApiClass::MemcpyAsync) last_launch = a;
    }
    if (last_launch == kNone) continue;
    for (OpId a : apis) {
      ApiClass cls = t_.ops[a].api_class();
      bool sync = cls == ApiClass::StreamSync || cls == ApiClass::EventSync || cls == ApiClass::DeviceSync || cls == ApiClass::MemcpySync;
      if (a == last_launch) c.durations[a] = spec.graph_launch_overhead;
      else if (!sync) c.durations[a] = 0;
      if (cls == ApiClass::Launch || cls == ApiClass::MemcpyAsync) ++launches;
      // No CPU time between the calls of a replayed graph.
      for (auto e : boost::make_iterator_range(boost::out_edges(a, g.csr)))
        if (g.csr[e].type() == EdgeType::HostOrder && boost::target(e, g.csr) != apis.front()) {
          OpId v = boost::target(e, g.csr);
          if (v != kNone && t_.ops[v].lane == t_.ops[a].lane && t_.ops[v].start <= t_.ranges[r].end) g.csr[e].set_delay(0);
        }
    }
    dev.clear();
    idx.device_ops(r, dev);
    std::sort(dev.begin(), dev.end());
    bool first = true;
    for (OpId d : dev) {
      const Op& o = t_.ops[d];
      if (o.link == kNone) continue;
      for (auto e : boost::make_iterator_range(boost::out_edges(o.link, g.csr)))
        if (boost::target(e, g.csr) == d && (g.csr[e].type() == EdgeType::Launch || g.csr[e].type() == EdgeType::GraphLaunch))
          g.csr[e].set_delay(first ? spec.launch_latency : 0);
      first = false;
    }
    // Consecutive device ops of the region on a stream follow each other after the node latency.
    for (std::size_t k = 0; k < dev.size(); ++k)
      for (auto e : boost::make_iterator_range(boost::out_edges(dev[k], g.csr)))
        if (g.csr[e].type() == EdgeType::StreamOrder && std::binary_search(dev.begin(), dev.end(), boost::target(e, g.csr)))
          g.csr[e].set_delay(spec.graph_node_latency);
  }
  c.log.push_back(tr.text + ": " + std::to_string(regions.size()) + " regions replayed as CUDA graphs (" + std::to_string(launches) +
                  " launch calls -> " + std::to_string(regions.size()) + " graph launches of " + format_duration(spec.graph_launch_overhead) +
                  ", node gap " + format_duration(spec.graph_node_latency) + ")");
}

// Model card: overlapped communication. Each communication kernel starts as soon as its inputs are
//   ready (the last non-communication op its device was given before it, and its stream
//   predecessor) instead of where the host launched it, as DDP's gradient bucketing issues
//   all-reduces while backward still runs; the host's own timeline is unchanged. The graph is
//   rebuilt with GraphOptions::overlap_comm; durations carry over.
void WhatIfEngine::overlap_comm(WhatIfCase& c, const Transform& tr) const {
  GraphOptions opt;
  opt.overlap_comm = true;
  c.graph = std::make_shared<const Graph>(build_graph(t_, opt));
  std::size_t comm = 0;
  for (const Op& o : t_.ops) comm += o.kind == OpKind::Kernel && (o.flags & Op::kFlagNccl);
  c.log.push_back(tr.text + ": " + std::to_string(comm) + " communication kernels start when their inputs are ready");
}

// Model card: data-parallel scaling. The same per-rank work on N ranks (weak scaling, as DDP with a
//   fixed per-GPU batch): every collective's part after its last member arrived is scaled by the
//   collective model's time for N ranks over its time for the group it had (same kind and message
//   size, on the case's current GPU spec: node links within a node, the NIC beyond). Stragglers
//   and arrival skew stay as traced.
void WhatIfEngine::ranks(WhatIfCase& c, const Transform& tr) const {
  TimeNs before = 0, after = 0;
  std::size_t n = 0;
  for (const Collective& col : t_.collectives) {
    TimeNs a = collective_time(c.spec, col.kind, col.bytes, col.ranks()).time_ns, b = collective_time(c.spec, col.kind, col.bytes, tr.ranks).time_ns;
    double ratio = a > 0 ? static_cast<double>(b) / static_cast<double>(a) : 1.0;
    for (OpId m : col.members) {
      before += c.durations[m];
      c.durations[m] = static_cast<TimeNs>(std::llround(static_cast<double>(c.durations[m]) * ratio));
      after += c.durations[m];
      ++n;
    }
  }
  c.log.push_back(tr.text + ": " + std::to_string(t_.collectives.size()) + " collectives (" + std::to_string(n) + " kernels) re-timed for " +
                  std::to_string(tr.ranks) + " ranks on " + c.spec.name + ": communication " + format_duration(before) + " -> " +
                  format_duration(after));
}

void WhatIfEngine::retarget(WhatIfCase& c, const Transform& tr) const {
  HwSpec target = load_target_hw(tr.hw);
  RetargetCostModel m(t_, c.spec, target, DurationMode::Hybrid);
  TimeNs before = 0, after = 0;
  for (OpId i = 0; i < t_.ops.size(); ++i) {
    const Op& o = t_.ops[i];
    if (!is_device_op(o.kind) || o.duration() == 0) continue;
    double ratio = static_cast<double>(m.device_time(i)) / static_cast<double>(o.duration());
    before += c.durations[i];
    c.durations[i] = static_cast<TimeNs>(std::llround(static_cast<double>(c.durations[i]) * ratio));
    after += c.durations[i];
  }
  c.log.push_back(tr.text + ": " + c.spec.name + " -> " + target.name + ", device time " + format_duration(before) + " -> " + format_duration(after));
  c.spec = std::move(target);
}

}  // namespace bneck
