#include "hw/spec.hpp"

#include "sim/base/stats.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <cstdlib>
#include <sstream>
#include <filesystem>
#include <mutex>
#include <set>

#include "sim/base/error.hpp"
#include "sim/base/json_input.hpp"
#include "sim/base/strings.hpp"

namespace bneck {

namespace {
const char* const kDtypes[] = {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8"};
const double kDtypeBytes[] = {8, 4, 4, 2, 2, 1, 1};
}  // namespace

const char* to_string(Dtype d) { return kDtypes[static_cast<int>(d)]; }
const char* to_string(ComputeUnit u) { return u == ComputeUnit::Simt ? "simt" : "tensor"; }
double dtype_bytes(Dtype d) { return kDtypeBytes[static_cast<int>(d)]; }

std::optional<Dtype> dtype_from_string(std::string_view s) {
  const std::string l = ascii_lower(s);
  for (int i = 0; i < kDtypeCount; ++i)
    if (l == kDtypes[i]) return static_cast<Dtype>(i);
  if (l == "double" || l == "float64") return Dtype::FP64;
  if (l == "float" || l == "float32") return Dtype::FP32;
  if (l == "bfloat16") return Dtype::BF16;
  if (l == "half" || l == "float16") return Dtype::FP16;
  if (l == "e4m3" || l == "e5m2" || l == "float8") return Dtype::FP8;
  return std::nullopt;
}

namespace {

using nlohmann::json;

void merge(json& base, const json& over) {
  for (auto it = over.begin(); it != over.end(); ++it) {
    if (it.value().is_object() && base.contains(it.key()) && base[it.key()].is_object())
      merge(base[it.key()], it.value());
    else
      base[it.key()] = it.value();
  }
}

json read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, "is a directory, not a hardware spec");
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open hardware spec");
  return parse_json_input(in, path);
}

// Loads a spec by preset name or path and resolves `extends` (child fields win).
json resolve_json(json j, const std::string& origin, std::vector<std::string>& chain, int depth);

json resolve(const std::string& name_or_path, std::vector<std::string>& chain, int depth) {
  if (depth > 16) throw InputError(name_or_path, "`extends` chain too deep (a cycle?)");
  json j;
  if (std::string installed = installed_hw_path(name_or_path); !installed.empty()) {
    j = read_json_file(installed);
  } else if (const char* text = hw_preset_text(name_or_path)) {
    j = json::parse(text);
  } else {
    std::ifstream probe(name_or_path);
    if (!probe) {
      std::string names;
      for (auto& n : hw_preset_names()) names += (names.empty() ? "" : ", ") + n;
      throw InputError(name_or_path, "no such hardware preset or file (presets: " + names + ")");
    }
    j = read_json_file(name_or_path);
  }
  return resolve_json(std::move(j), name_or_path, chain, depth);
}

json resolve_json(json j, const std::string& origin, std::vector<std::string>& chain, int depth) {
  if (!j.is_object()) throw InputError(origin, "hardware spec must be a JSON object");
  chain.push_back(j.value("name", origin));
  if (j.contains("extends") && !j["extends"].is_null()) {
    if (!j["extends"].is_string()) throw InputError(origin, "\"extends\" must name a preset or file");
    std::string parent = j["extends"].get<std::string>();
    if (parent.empty() || parent.find('\0') != std::string::npos)
      throw InputError(origin, "\"extends\" must name a preset or file (it is empty or holds a NUL)");
    for (const auto& c : chain)
      if (c == parent) throw InputError(origin, "`extends` cycle through " + parent);
    json base;
    try {
      base = resolve(parent, chain, depth + 1);
    } catch (const InputError& e) {
      if (parent.find('/') == std::string::npos && !std::ifstream(parent))  // an unknown name: say whose
        throw InputError(origin, std::string("\"extends\": ") + e.what());
      throw;
    }
    json own = j;
    own.erase("extends");
    base.erase("description");
    merge(base, own);
    return base;
  }
  return j;
}

class Fields {
 public:
  Fields(const json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}
  const json* get(const std::string& section, const std::string& key) const {
    if (!j_.contains(section) || !j_[section].is_object() || !j_[section].contains(key)) return nullptr;
    return &j_[section][key];
  }
  [[noreturn]] void fail(const std::string& path, const std::string& what) const { throw InputError(origin_, path + ": " + what); }
  template <typename F>
  auto unit(const std::string& sec, const std::string& key, F parse, decltype(parse("")) dflt) const {
    const json* v = get(sec, key);
    if (!v) return dflt;
    if (!v->is_string()) fail(sec + "." + key, "must be a string with a unit");
    try {
      return parse(v->get<std::string>());
    } catch (const InputError& e) { fail(sec + "." + key, e.what()); }
  }
  double number(const std::string& sec, const std::string& key, double dflt) const {
    const json* v = get(sec, key);
    if (!v) return dflt;
    if (!v->is_number()) fail(sec + "." + key, "must be a number");
    double d = v->get<double>();
    if (d < 0) fail(sec + "." + key, "must not be negative");
    return d;
  }
  std::uint32_t count(const std::string& sec, const std::string& key, std::uint32_t dflt) const {
    const json* v = get(sec, key);
    if (!v) return dflt;
    if (!v->is_number_unsigned()) fail(sec + "." + key, "must be a non-negative integer");
    return v->get<std::uint32_t>();
  }

 private:
  const json& j_;
  std::string origin_;
};

// The unit parsers Fields::unit takes.
auto as_duration(const std::string& s) { return parse_duration(s); }
auto as_bandwidth(const std::string& s) { return parse_bandwidth(s); }
auto as_bytes(const std::string& s) { return parse_bytes(s); }
auto as_frequency(const std::string& s) { return parse_frequency(s); }

// The gpu section's scalar fields and their ranges.
void parse_gpu_scalars(const Fields& f, const json& j, const std::string& spec_name, GpuSpec& g) {
  g.name = j.contains("gpu") ? j["gpu"].value("name", spec_name) : spec_name;
  g.sm_count = f.count("gpu", "sm_count", 0);
  g.clock_hz = f.unit("gpu", "clock", as_frequency, 0.0);
  g.memory_bytes = f.unit("gpu", "memory", as_bytes, Bytes{0});
  g.memory_bandwidth = f.unit("gpu", "memory_bandwidth", as_bandwidth, 0.0);
  g.l2_bytes = f.unit("gpu", "l2", as_bytes, Bytes{0});
  g.l2_bandwidth = f.unit("gpu", "l2_bandwidth", as_bandwidth, 0.0);
  g.registers_per_sm = f.count("gpu", "registers_per_sm", g.registers_per_sm);
  g.max_registers_per_thread = f.count("gpu", "max_registers_per_thread", g.max_registers_per_thread);
  g.register_allocation_unit = f.count("gpu", "register_allocation_unit", g.register_allocation_unit);
  g.warp_allocation_granularity = f.count("gpu", "warp_allocation_granularity", g.warp_allocation_granularity);
  g.max_threads_per_sm = f.count("gpu", "max_threads_per_sm", g.max_threads_per_sm);
  g.max_blocks_per_sm = f.count("gpu", "max_blocks_per_sm", g.max_blocks_per_sm);
  g.max_threads_per_block = f.count("gpu", "max_threads_per_block", g.max_threads_per_block);
  g.warp_size = f.count("gpu", "warp_size", g.warp_size);
  g.shared_memory_per_sm = f.unit("gpu", "shared_memory_per_sm", as_bytes, Bytes{0});
  g.shared_memory_per_block = f.unit("gpu", "shared_memory_per_block", as_bytes, g.shared_memory_per_sm);
  g.reserved_shared_memory_per_block = f.unit("gpu", "reserved_shared_memory_per_block", as_bytes, Bytes{0});
  g.shared_memory_allocation_unit = f.unit("gpu", "shared_memory_allocation_unit", as_bytes, Bytes{128});
  g.launch_latency = f.unit("gpu", "launch_latency", as_duration, TimeNs{0});
  g.host_launch_overhead = f.unit("gpu", "host_launch_overhead", as_duration, TimeNs{0});
  g.graph_node_latency = f.unit("gpu", "graph_node_latency", as_duration, TimeNs{0});
  g.graph_launch_overhead = f.unit("gpu", "graph_launch_overhead", as_duration, TimeNs{0});
  g.kernel_tail = f.unit("gpu", "kernel_tail", as_duration, TimeNs{0});
  g.memory_latency = f.unit("gpu", "memory_latency", as_duration, TimeNs{0});
  g.dependent_op_cycles = f.number("gpu", "dependent_op_cycles", 4.0);
  g.drain_weight = f.number("gpu", "drain_weight", 1.0);
  if (g.drain_weight <= 0 || g.drain_weight > 100) f.fail("gpu.drain_weight", "must be in (0, 100]");
  if (g.dependent_op_cycles <= 0 || g.dependent_op_cycles > 1000) f.fail("gpu.dependent_op_cycles", "must be in (0, 1000] cycles");
  g.memory_efficiency = f.number("gpu", "memory_efficiency", 1.0);
  g.compute_efficiency = f.number("gpu", "compute_efficiency", 1.0);
  if (g.memory_efficiency <= 0 || g.memory_efficiency > 1 || g.compute_efficiency <= 0 || g.compute_efficiency > 1)
    f.fail("gpu", "efficiencies must be in (0, 1]");
}

// gpu.access_efficiency and gpu.write_efficiency (per access width), gpu.gemm_fit and gpu.gemm_samples (per dtype).
void parse_gpu_fits(const Fields& f, GpuSpec& g) {
  for (const char* key : {"access_efficiency", "write_efficiency"}) {
    const json* acc = f.get("gpu", key);
    if (!acc) continue;
    auto& table = std::string(key) == "access_efficiency" ? g.access_efficiency : g.write_efficiency;
    if (!acc->is_object()) f.fail(std::string("gpu.") + key, "must map access widths (\"4 B\") to efficiencies");
    for (auto it = acc->begin(); it != acc->end(); ++it) {
      std::string path = std::string("gpu.") + key + "." + it.key();
      Bytes w = 0;
      try {
        w = parse_bytes(it.key());
      } catch (const InputError& e) { f.fail(path, e.what()); }
      double cap = std::string(key) == "access_efficiency" ? 4.0 : 1.0;
      if (!it.value().is_number() || it.value().get<double>() <= 0 || it.value().get<double>() > cap)
        f.fail(path, cap > 1 ? "must be in (0, 4]" : "must be in (0, 1]");
      table[w] = it.value().get<double>();
    }
  }
  if (const json* gf = f.get("gpu", "gemm_fit")) {
    if (!gf->is_object()) f.fail("gpu.gemm_fit", "must map dtypes to {\"overhead\": \"9 us\", \"efficiency\": 0.8}");
    for (auto it = gf->begin(); it != gf->end(); ++it) {
      std::string path = "gpu.gemm_fit." + it.key();
      auto d = dtype_from_string(it.key());
      if (!d || !it.value().is_object() || !it.value().contains("overhead") || !it.value().contains("efficiency") ||
          !it.value()["overhead"].is_string() || !it.value()["efficiency"].is_number())
        f.fail(path, "expected {\"overhead\": duration, \"efficiency\": number} for a known dtype");
      GpuSpec::GemmFit fit;
      try {
        fit.overhead = parse_duration(it.value()["overhead"].get<std::string>());
      } catch (const InputError& e) { f.fail(path, e.what()); }
      fit.efficiency = it.value()["efficiency"].get<double>();
      if (it.value().contains("submit")) {
        try {
          fit.submit = parse_duration(it.value()["submit"].get<std::string>());
        } catch (const std::exception& e) { f.fail(path + ".submit", e.what()); }
      }
      if (fit.efficiency <= 0 || fit.efficiency > 1) f.fail(path, "efficiency must be in (0, 1]");
      g.gemm_fit[*d] = fit;
    }
  }
  for (const char* key : {"gemm_samples", "gemm_samples_unaligned"}) {
    const json* gs = f.get("gpu", key);
    if (!gs) continue;
    auto& table = std::string(key) == "gemm_samples" ? g.gemm_samples : g.gemm_samples_unaligned;
    if (!gs->is_object())
      f.fail(std::string("gpu.") + key,
             "must map dtypes to {\"nearest\": 7, \"rows\": [[log2 batch, log2 rows, log2 inner, log2 columns, efficiency], ...]}");
    std::vector<std::pair<Dtype, std::string>> aliases;  // "bf16": "fp16": the same measurements
    for (auto it = gs->begin(); it != gs->end(); ++it) {
      const std::string path = std::string("gpu.") + key + "." + it.key();
      auto d = dtype_from_string(it.key());
      const json& v = it.value();
      if (d && v.is_string()) {
        if (!dtype_from_string(v.get<std::string>()) || !gs->contains(v.get<std::string>()) || (*gs)[v.get<std::string>()].is_string())
          f.fail(path, std::string("a dtype name must name another dtype's samples in gpu.") + key);
        aliases.emplace_back(*d, v.get<std::string>());
        continue;
      }
      if (!d || !v.is_object() || !v.contains("rows") || !v["rows"].is_array())
        f.fail(path,
               "expected {\"nearest\": count, \"rows\": [[log2 batch, log2 rows, log2 inner, log2 columns, efficiency], ...]} for a known "
               "dtype");
      GpuSpec::GemmSurface surface;
      if (v.contains("nearest")) {
        if (!v["nearest"].is_number_unsigned() || v["nearest"].get<std::uint64_t>() == 0 || v["nearest"].get<std::uint64_t>() > 1000)
          f.fail(path + ".nearest", "must be a count in [1, 1000]");
        surface.nearest = v["nearest"].get<std::size_t>();
      }
      if (v.contains("source")) {
        if (!v["source"].is_string()) f.fail(path + ".source", "must be a string: who measured the samples");
        surface.source = v["source"].get<std::string>();
      }
      for (std::size_t r = 0; r < v["rows"].size(); ++r) {
        const json& row = v["rows"][r];
        std::array<double, 5> s{};
        bool ok = row.is_array() && row.size() == 5;
        for (std::size_t c = 0; ok && c < 5; ++c) {
          ok = row[c].is_number() && std::isfinite(row[c].get<double>());
          if (ok) s[c] = row[c].get<double>();
        }
        for (std::size_t c = 0; ok && c < 4; ++c) ok = s[c] >= 0 && s[c] <= 64;
        if (!ok || s[4] <= 0 || s[4] > 2)
          f.fail(path + ".rows[" + std::to_string(r) + "]",
                 "expected [log2 batch, log2 rows, log2 inner, log2 columns] in [0, 64] and an efficiency in (0, 2]");
        surface.samples.push_back(s);
      }
      // (An efficiency above 1: the GPU ran above the preset's sustained clock.)
      std::stable_sort(surface.samples.begin(), surface.samples.end(), [](const auto& a, const auto& b) { return a[1] < b[1]; });
      table[*d] = std::move(surface);
    }
    for (const auto& [d, other] : aliases) table[d] = table[*dtype_from_string(other)];
  }
}

// gpu.held_out_error and gpu.peak, then the fields every spec needs.
void parse_gpu_peaks(const Fields& f, GpuSpec& g) {
  if (const json* he = f.get("gpu", "held_out_error")) {
    if (!he->is_object()) f.fail("gpu.held_out_error", "must map kernel classes (\"gemm\", \"memory\") to a median |error| in [0, 10]");
    for (auto it = he->begin(); it != he->end(); ++it) {
      if (!it.value().is_number() || it.value().get<double>() < 0 || it.value().get<double>() > 10)
        f.fail("gpu.held_out_error." + it.key(), "must be a median |error| in [0, 10]");
      g.held_out_error[it.key()] = it.value().get<double>();
    }
  }
  if (const json* peak = f.get("gpu", "peak")) {
    if (!peak->is_object()) f.fail("gpu.peak", "must be an object {dtype: {simt|tensor: rate}}");
    for (auto it = peak->begin(); it != peak->end(); ++it) {
      auto d = dtype_from_string(it.key());
      if (!d) f.fail("gpu.peak." + it.key(), "unknown dtype (fp64, fp32, tf32, bf16, fp16, fp8, int8)");
      if (!it.value().is_object()) f.fail("gpu.peak." + it.key(), "must be {\"simt\": rate, \"tensor\": rate}");
      for (auto u = it.value().begin(); u != it.value().end(); ++u) {
        int unit = u.key() == "simt" ? 0 : u.key() == "tensor" ? 1 : -1;
        std::string path = "gpu.peak." + it.key() + "." + u.key();
        if (unit < 0) f.fail(path, "unit must be simt or tensor");
        if (!u.value().is_string()) f.fail(path, "must be a rate such as \"989 TFLOP/s\"");
        try {
          g.peak[static_cast<int>(*d)][static_cast<std::size_t>(unit)] = parse_op_rate(u.value().get<std::string>());
        } catch (const InputError& e) { f.fail(path, e.what()); }
      }
    }
  }
  if (g.sm_count == 0 || g.memory_bandwidth <= 0 || g.peak_of(Dtype::FP32, ComputeUnit::Simt) <= 0)
    f.fail("gpu", "needs at least sm_count, memory_bandwidth and peak.fp32.simt");
}

// A measured curve, [["4 KiB", "2.1 us"], ...] with ascending sizes (copy paths, collectives).
void read_curve(const Fields& f, const json& v, const std::string& path, std::vector<std::pair<Bytes, TimeNs>>& curve) {
  if (!v.contains("curve")) return;
  if (!v["curve"].is_array()) f.fail(path + ".curve", "must be a list of [\"size\", \"time\"] pairs");
  for (std::size_t i = 0; i < v["curve"].size(); ++i) {
    const json& pt = v["curve"][i];
    std::string where = path + ".curve[" + std::to_string(i) + "]";
    if (!pt.is_array() || pt.size() != 2 || !pt[0].is_string() || !pt[1].is_string()) f.fail(where, "expected [\"4 KiB\", \"2.1 us\"]");
    try {
      curve.emplace_back(parse_bytes(pt[0].get<std::string>()), parse_duration(pt[1].get<std::string>()));
    } catch (const InputError& e) { f.fail(where, e.what()); }
    if (i > 0 && curve[i].first <= curve[i - 1].first) f.fail(where, "sizes must ascend");
  }
}

void parse_node(const Fields& f, const json& j, NodeSpec& n) {
  n.gpus = f.count("node", "gpus", 1);
  n.nvlink_bandwidth = f.unit("node", "nvlink_bandwidth", as_bandwidth, 0.0);
  n.nvlink_latency = f.unit("node", "nvlink_latency", as_duration, TimeNs{0});
  n.pcie_generation = f.count("node", "pcie_generation", 0);
  n.pcie_bandwidth = f.unit("node", "pcie_bandwidth", as_bandwidth, 0.0);
  n.pcie_bidirectional_bandwidth = f.unit("node", "pcie_bidirectional_bandwidth", as_bandwidth, 0.0);
  n.pcie_latency = f.unit("node", "pcie_latency", as_duration, TimeNs{0});
  n.pageable_bandwidth = f.unit("node", "pageable_bandwidth", as_bandwidth, 0.0);
  n.pageable_chunk = f.unit("node", "pageable_chunk", as_bytes, Bytes{0});
  if (j.contains("node") && j["node"].contains("host")) n.host = j["node"]["host"].get<std::string>();
  if (const json* cp = f.get("node", "copy_paths")) {
    if (!cp->is_object()) f.fail("node.copy_paths", "must map paths to {\"latency\": \"5 us\", \"bandwidth\": \"55 GB/s\"}");
    for (auto it = cp->begin(); it != cp->end(); ++it) {
      std::string path = "node.copy_paths." + it.key();
      const json& v = it.value();
      if (!v.is_object() || !v.contains("latency") || !v.contains("bandwidth") || !v["latency"].is_string() || !v["bandwidth"].is_string())
        f.fail(path, "expected {\"latency\": duration, \"bandwidth\": rate}");
      NodeSpec::CopyPath c;
      try {
        c.latency = parse_duration(v["latency"].get<std::string>());
        c.bandwidth = parse_bandwidth(v["bandwidth"].get<std::string>());
        if (v.contains("submit")) c.submit = parse_duration(v["submit"].get<std::string>());
      } catch (const InputError& e) { f.fail(path, e.what()); }
      read_curve(f, v, path, c.curve);
      n.copy_paths[it.key()] = c;
    }
  }
  if (const json* cc = f.get("node", "collectives")) {
    if (!cc->is_object())
      f.fail("node.collectives", "must map kinds to {\"latency\": \"10 us\", \"bus_bandwidth\": \"360 GB/s\", \"ranks\": 8}");
    for (auto it = cc->begin(); it != cc->end(); ++it) {
      std::string path = "node.collectives." + it.key();
      const json& v = it.value();
      if (!v.is_object() || !v.contains("latency") || !v.contains("bus_bandwidth") || !v["latency"].is_string() ||
          !v["bus_bandwidth"].is_string() || !v.contains("ranks") || !v["ranks"].is_number_unsigned())
        f.fail(path, "expected {\"latency\": duration, \"bus_bandwidth\": rate, \"ranks\": N}");
      NodeSpec::CollectivePath c;
      try {
        c.latency = parse_duration(v["latency"].get<std::string>());
        c.bus_bandwidth = parse_bandwidth(v["bus_bandwidth"].get<std::string>());
      } catch (const InputError& e) { f.fail(path, e.what()); }
      c.ranks = v["ranks"].get<std::uint32_t>();
      read_curve(f, v, path, c.curve);
      n.collectives[it.key()] = c;
    }
  }
}

}  // namespace

HwSpec parse_hw(const json& j, const std::string& origin) {
  HwSpec h;
  h.resolved = j;
  h.name = j.value("name", origin);
  h.description = j.value("description", "");
  Fields f(j, origin);
  parse_gpu_scalars(f, j, h.name, h.gpu);
  parse_gpu_fits(f, h.gpu);
  parse_gpu_peaks(f, h.gpu);
  parse_node(f, j, h.node);
  ClusterSpec& c = h.cluster;
  c.nodes = f.count("cluster", "nodes", 1);
  c.nic_bandwidth = f.unit("cluster", "nic_bandwidth", as_bandwidth, 0.0);
  c.nic_latency = f.unit("cluster", "nic_latency", as_duration, TimeNs{0});
  if (j.contains("match") &&
      (!j["match"].is_array() || !std::all_of(j["match"].begin(), j["match"].end(), [](const json& x) { return x.is_string(); })))
    f.fail("match", "must be a list of strings that a device name contains (lower case)");
  if (j.contains("sources")) {
    if (!j["sources"].is_object()) f.fail("sources", "must map field paths to sources");
    for (auto it = j["sources"].begin(); it != j["sources"].end(); ++it)
      if (it.value().is_string()) h.sources[it.key()] = it.value().get<std::string>();
  }
  return h;
}

namespace {
// The specs built from traces' device properties, by name (threads of one process share them).
std::map<std::string, HwSpec>& trace_specs() {
  static std::map<std::string, HwSpec> m;
  return m;
}
std::mutex& trace_specs_mu() {
  static std::mutex mu;
  return mu;
}
}  // namespace

void remember_trace_spec(const HwSpec& h) {
  std::lock_guard<std::mutex> lock(trace_specs_mu());
  trace_specs()[h.name] = h;
}

HwSpec load_hw(const std::string& name_or_path) {
  {
    std::lock_guard<std::mutex> lock(trace_specs_mu());
    auto it = trace_specs().find(name_or_path);
    if (it != trace_specs().end()) return it->second;
  }
  // A preset compiled in is read once a process while no spec is installed (an installed one may
  // stand for it or for a preset it extends): the calibrated overlays hold GEMM surfaces (a 280 kB
  // JSON for the A100, parsed twice a replay: 18 % of the replay of a 35 MB Kineto trace).
  static std::mutex embedded_mu;
  static std::map<std::string, HwSpec> embedded;
  const bool cacheable = hw_preset_text(name_or_path) != nullptr && installed_hw_names().empty();
  if (cacheable) {
    std::lock_guard<std::mutex> lock(embedded_mu);
    auto it = embedded.find(name_or_path);
    if (it != embedded.end()) return it->second;
  }
  HwSpec h = with_json_errors(name_or_path, [&] {
    std::vector<std::string> chain;
    json j = resolve(name_or_path, chain, 0);
    HwSpec spec = parse_hw(j, name_or_path);
    spec.chain = chain;
    return spec;
  });
  if (cacheable) {
    std::lock_guard<std::mutex> lock(embedded_mu);
    embedded.emplace(name_or_path, h);
  }
  return h;
}

HwSpec load_hw_json(const nlohmann::json& j, const std::string& origin) {
  std::vector<std::string> chain;
  HwSpec h = parse_hw(resolve_json(j, origin, chain, 0), origin);
  h.chain = chain;
  return h;
}

HwSpec load_target_hw(const std::string& name_or_path) {
  const bool named = hw_preset_text(name_or_path) || !installed_hw_path(name_or_path).empty();
  if (named && (hw_preset_text(name_or_path + "-calibrated") || !installed_hw_path(name_or_path + "-calibrated").empty()))
    return load_hw(name_or_path + "-calibrated");
  return load_hw(name_or_path);
}

std::vector<std::string> unsourced_fields(const HwSpec& h) {
  std::vector<std::string> out;
  auto sourced = [&](const std::string& path) {
    for (std::string p = path;;) {
      if (h.sources.count(p)) return true;
      auto dot = p.rfind('.');
      if (dot == std::string::npos || p.find('.') == dot) return false;  // stop at "section.field"
      p = p.substr(0, dot);
    }
  };
  std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& v, const std::string& path) {
    if (v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) walk(it.value(), path + "." + it.key());
      return;
    }
    bool numeric = v.is_number() || (v.is_string() && !v.get<std::string>().empty() &&
                                     (std::isdigit(static_cast<unsigned char>(v.get<std::string>()[0])) != 0));
    if (numeric && !sourced(path)) out.push_back(path);
  };
  for (const char* sec : {"gpu", "node", "cluster"})
    if (h.resolved.contains(sec)) walk(h.resolved[sec], sec);
  return out;
}

std::optional<double> GpuSpec::GemmSurface::efficiency(double batch, double rows, double inner, double columns) const {
  if (samples.empty() || !(batch >= 1) || !(rows >= 1) || !(inner >= 1) || !(columns >= 1)) return std::nullopt;
  const double x[4] = {std::log2(batch), std::log2(rows), std::log2(inner), std::log2(columns)};
  // The k nearest by squared distance (ties: the earlier sample), scanning out from the query's
  // rows along the sorted rows coordinate and stopping where that coordinate alone is farther than
  // the k-th best so far.
  const std::size_t k = std::min(nearest, samples.size());
  std::vector<std::pair<double, std::size_t>> best;  // (distance^2, index), kept sorted, at most k
  auto offer = [&](std::size_t i) {
    const auto& s = samples[i];
    double d = 0;
    for (std::size_t c = 0; c < 4; ++c) d += (s[c] - x[c]) * (s[c] - x[c]);
    std::pair<double, std::size_t> c{d, i};
    if (best.size() == k && !(c < best.back())) return;
    best.insert(std::upper_bound(best.begin(), best.end(), c), c);
    if (best.size() > k) best.pop_back();
  };
  auto far = [&](std::size_t i) {
    const double dr = samples[i][1] - x[1];
    return best.size() == k && dr * dr > best.back().first;
  };
  const auto mid = static_cast<std::size_t>(
      std::lower_bound(samples.begin(), samples.end(), x[1], [](const auto& s, double v) { return s[1] < v; }) - samples.begin());
  for (std::size_t lo = mid, hi = mid; lo > 0 || hi < samples.size();) {
    bool moved = false;
    if (hi < samples.size() && !far(hi))
      offer(hi++), moved = true;
    else
      hi = samples.size();
    if (lo > 0 && !far(lo - 1))
      offer(--lo), moved = true;
    else
      lo = 0;
    if (!moved) break;
  }
  if (best.empty() || best.front().first > 4.0) return std::nullopt;  // two octaves from every measured shape
  std::vector<double> eff;
  for (const auto& b : best) eff.push_back(samples[b.second][4]);
  return quantile(eff, 0.5);
}

}  // namespace bneck
