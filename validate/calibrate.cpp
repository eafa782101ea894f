#include "validate/calibrate.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "models/access.hpp"
#include "models/collective.hpp"
#include "models/transfer.hpp"
#include "traces/collectives.hpp"
#include "sim/base/error.hpp"
#include "sim/base/json_input.hpp"
#include "validate/describe.hpp"

namespace bneck {
using nlohmann::json;

namespace {

// Weighted least squares: rows A x ~ b with weights 1/b (relative residuals).
Eigen::VectorXd relative_lsq(const std::vector<std::vector<double>>& rows, const std::vector<double>& y) {
  Eigen::MatrixXd A(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows.front().size()));
  Eigen::VectorXd b(static_cast<Eigen::Index>(rows.size()));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double w = 1.0 / y[i];
    for (std::size_t j = 0; j < rows[i].size(); ++j) A(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = rows[i][j] * w;
    b(static_cast<Eigen::Index>(i)) = y[i] * w;
  }
  return A.colPivHouseholderQr().solve(b);
}

std::string ns_str(double ns) { return std::to_string(std::llround(std::max(0.0, ns))) + " ns"; }
std::string bw_str(double bps) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g GB/s", bps / 1e9);
  return b;
}

}  // namespace

double measurement_size(const Measurement& m) {
  for (const char* k : {"array_bytes", "size", "elems", "m", "kernels", "stride"})
    if (m.params.contains(k) && m.params[k].is_number()) return m.params[k].get<double>();
  return m.bytes;
}

namespace {
Measurements load_measurements_file(const std::string& path);
void split_halves(Measurements& m);
}  // namespace

Measurements load_measurements(const std::vector<std::string>& paths) {
  if (paths.empty()) throw InputError("measurements", "no measurements file given");
  // Read each file's records, then split the merged set into halves once.
  Measurements all;
  for (const auto& p : paths) {
    Measurements one = load_measurements_file(p);
    if (all.source.empty()) {
      all.device = one.device;
      all.stability = one.stability;
    }
    all.source += (all.source.empty() ? "" : " + ") + p;
    for (auto& x : one.items) all.items.push_back(std::move(x));
  }
  split_halves(all);
  return all;
}

Measurements load_measurements(const std::string& path) {
  Measurements m = load_measurements_file(path);
  split_halves(m);
  return m;
}

namespace {
Measurements load_measurements_unchecked(const std::string& path);
Measurements load_measurements_file(const std::string& path) {
  return with_json_errors(path, [&] { return load_measurements_unchecked(path); });
}
Measurements load_measurements_unchecked(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path, "is a directory, not a measurements file");
  std::ifstream in(path);
  if (!in) throw InputError(path, "cannot open measurements");
  json j = parse_json_input(in, path);
  if (!j.is_object() || j.value("format", "") != "bneck-measurements" || !j.contains("measurements") || !j["measurements"].is_array())
    throw InputError(path, "not a bneck-measurements file (validate/bench/bneck_validate output)");
  Measurements m;
  m.source = path;
  m.device = j.value("device", json::object());
  m.stability = j.value("stability", json::object());
  for (std::size_t i = 0; i < j["measurements"].size(); ++i) {
    const json& r = j["measurements"][i];
    std::string rec = "measurements[" + std::to_string(i) + "]";
    if (!r.is_object() || !r.contains("family") || !r.contains("name") || !r.contains("time_ns") || !r["time_ns"].is_number() ||
        r["time_ns"].get<double>() <= 0)
      throw InputError(path, rec + ": needs family, name and a positive time_ns");
    // Counts the describers turn into ops or loops are bounded (a hostile file asking for 10^9
    // launches would otherwise build 10^9 ops): the benches use at most thousands.
    for (const char* k : {"kernels", "streams", "iters_per_kernel", "stride"})
      if (r.contains(k) && r[k].is_number() && !(r[k].get<double>() >= 0 && r[k].get<double>() <= 100000))
        throw InputError(path, rec + ": \"" + k + "\" out of range (0 .. 100000)");
    // Every other number (sizes, grids, times) is a non-negative quantity the describers turn into
    // integers: bounded so that every conversion stays in range (the benches' largest is 1.1e12).
    for (const auto& [k, v] : r.items())
      if (v.is_number() && !(v.get<double>() >= 0 && v.get<double>() <= 1e15))
        throw InputError(path, rec + ": \"" + k + "\" out of range (0 .. 1e15)");
    Measurement x;
    x.family = r["family"].get<std::string>();
    x.name = r["name"].get<std::string>();
    x.params = r;
    x.bytes = r.value("bytes", 0.0);
    x.flops = r.value("flops", 0.0);
    x.time_ns = r["time_ns"].get<double>();
    m.items.push_back(std::move(x));
  }
  return m;
}

void split_halves(Measurements& m) {
  // Training half: even positions of each (family, name) group sorted by size; repeated runs of
  // one configuration (several runs in one file) count as one position and fall in the same half.
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < m.items.size(); ++i) groups[m.items[i].family + "/" + m.items[i].name].push_back(i);
  for (auto& [group, v] : groups) {
    std::stable_sort(v.begin(), v.end(),
                     [&](std::size_t a, std::size_t b) { return measurement_size(m.items[a]) < measurement_size(m.items[b]); });
    // Repeated runs: the same parameters apart from the timing fields.
    auto key = [&](std::size_t i) {
      nlohmann::json p = m.items[i].params;
      for (const char* f : {"time_ns", "repeats", "event_ns", "device_records", "algbw_gbps", "busbw_gbps"}) p.erase(f);
      return p.dump();
    };
    std::size_t rank = 0;
    for (std::size_t p = 0; p < v.size(); ++p) {
      if (p > 0 && key(v[p]) != key(v[p - 1])) ++rank;
      m.items[v[p]].train = rank % 2 == 0;
    }
  }
}
}  // namespace

namespace {
Calibration calibrate_unchecked(const Measurements& ms, const std::string& base_preset, const std::string& overlay_name);
AccuracyReport accuracy_unchecked(const Measurements& ms, const HwSpec& hw);
}  // namespace

// A measurement's parameters are read where each family needs them: a value of the wrong type
// there is bad input naming the file, as at load.
Calibration calibrate(const Measurements& ms, const std::string& base_preset, const std::string& overlay_name) {
  return with_json_errors(ms.source, [&] { return calibrate_unchecked(ms, base_preset, overlay_name); });
}
AccuracyReport accuracy(const Measurements& ms, const HwSpec& hw) {
  return with_json_errors(ms.source, [&] { return accuracy_unchecked(ms, hw); });
}

namespace {
// What calibrate() fits, family by family: the overlay's gpu and node sections, where each figure
// came from, and the log.
struct Fit {
  json gpu = json::object(), node = json::object(), sources = json::object();
  std::vector<std::string> log;
  std::string src;
};

// stream: t = tail + read bytes * r_w + written bytes * w_w, per access width (copy and scale
// read one array and write one; add and triad read two).
void fit_stream(const Measurements& ms, double bw, Fit& f) {
  json& gpu = f.gpu;
  json& sources = f.sources;
  const std::string& src = f.src;
  std::vector<double> widths;
  for (const auto& m : ms.items)
    if (m.family == "stream" && m.train) {
      double w = m.params.value("width_bytes", 4.0);
      if (std::find(widths.begin(), widths.end(), w) == widths.end()) widths.push_back(w);
    }
  std::sort(widths.begin(), widths.end());
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (const auto& m : ms.items) {
    if (m.family != "stream" || !m.train) continue;
    std::vector<double> r(2 * widths.size() + 1, 0.0);
    r[0] = 1;
    auto k = static_cast<std::size_t>(std::find(widths.begin(), widths.end(), m.params.value("width_bytes", 4.0)) - widths.begin());
    double array = m.params.value("array_bytes", m.bytes / 2);
    r[1 + 2 * k] = m.bytes - array;  // read
    r[2 + 2 * k] = array;            // written
    rows.push_back(r);
    y.push_back(m.time_ns);
  }
  if (rows.empty()) return;
  Eigen::VectorXd x = relative_lsq(rows, y);
  gpu["kernel_tail"] = ns_str(x(0));
  // A base spec whose memory bandwidth is below what the GPU wrote (a guessed one, from device
  // properties) is raised to the fastest write rate measured.
  for (std::size_t k = 0; k < widths.size(); ++k) {
    double wrote = 1e9 / x(static_cast<Eigen::Index>(2 + 2 * k));
    if (wrote > bw) {
      f.log.push_back("stream: writes at " + bw_str(wrote) + " exceed the base spec's memory bandwidth " + bw_str(bw) + ": raised");
      bw = wrote;
      gpu["memory_bandwidth"] = bw_str(bw);
      sources["gpu.memory_bandwidth"] = src + ", stream family (the fastest write rate: the base spec's figure was below it)";
    }
  }
  json rd = json::object(), wr = json::object();
  for (std::size_t k = 0; k < widths.size(); ++k) {
    double er = std::clamp(1e9 / (x(static_cast<Eigen::Index>(1 + 2 * k)) * bw), 0.01, 4.0);
    double ew = std::clamp(1e9 / (x(static_cast<Eigen::Index>(2 + 2 * k)) * bw), 0.01, 1.0);
    std::string key = std::to_string(static_cast<int>(widths[k])) + " B";
    rd[key] = std::round(er * 1000) / 1000;
    wr[key] = std::round(ew * 1000) / 1000;
    f.log.push_back("stream: " + key + " accesses: reads at " + bw_str(er * bw) + ", writes at " + bw_str(ew * bw));
  }
  gpu["access_efficiency"] = rd;
  gpu["write_efficiency"] = wr;
  gpu["memory_efficiency"] = std::min(1.0, std::round(2.0 / (1.0 / rd.back().get<double>() + 1.0 / wr.back().get<double>()) * 1000) / 1000);
  sources["gpu.memory_efficiency"] = src + ", stream family (16-byte accesses, as many bytes read as written)";
  f.log.push_back("stream: kernel tail " + ns_str(x(0)));
  sources["gpu.kernel_tail"] = src + ", stream family";
  sources["gpu.access_efficiency"] = src + ", stream family (reads)";
  sources["gpu.write_efficiency"] = src + ", stream family (writes)";
}

// l2: back-to-back copies of L2-resident arrays are launch-bound until the L2's bandwidth binds:
// t = max(launch gap, bytes / l2bw); the bandwidth from the largest training size.
void fit_l2(const Measurements& ms, Fit& f) {
  const Measurement* big = nullptr;
  for (const auto& m : ms.items)
    if (m.family == "l2" && m.train && (!big || m.bytes > big->bytes)) big = &m;
  if (!big) return;
  f.gpu["l2_bandwidth"] = bw_str(big->bytes / big->time_ns * 1e9);
  f.sources["gpu.l2_bandwidth"] = f.src + ", l2 family (largest L2-resident copy)";
  f.log.push_back("l2: " + bw_str(big->bytes / big->time_ns * 1e9));
}

// gemm: per dtype t = overhead + flops * inv.
void fit_gemm(const Measurements& ms, const HwSpec& base, Fit& f) {
  std::map<std::string, std::pair<std::vector<std::vector<double>>, std::vector<double>>> per;
  for (const auto& m : ms.items)
    if (m.family == "gemm" && m.train) {
      per[m.params.value("dtype", "fp32")].first.push_back({1.0, m.flops * gemm_grid_factor(m, base.gpu)});
      per[m.params.value("dtype", "fp32")].second.push_back(m.time_ns);
    }
  json gf = json::object();
  for (auto& [d, rows] : per) {
    auto dt = dtype_from_string(d);
    if (!dt || rows.first.size() < 2) continue;
    Eigen::VectorXd x = relative_lsq(rows.first, rows.second);
    double peak = base.gpu.peak_of(*dt, d == "fp32" ? ComputeUnit::Simt : base.gpu.best_unit(*dt));
    double eff = std::clamp(1.0 / (x(1) * 1e-9 * peak), 0.01, 1.0);
    gf[d] = {{"overhead", ns_str(x(0))}, {"efficiency", std::round(eff * 1000) / 1000}};
    char b[160];
    std::snprintf(b, sizeof b, "gemm %s: %.1f TFLOP/s at scale (%.0f %% of %.1f), overhead %s", d.c_str(), eff * peak / 1e12, eff * 100,
                  peak / 1e12, ns_str(x(0)).c_str());
    f.log.push_back(b);
  }
  if (!gf.empty()) {
    f.gpu["gemm_fit"] = gf;
    f.sources["gpu.gemm_fit"] = f.src + ", gemm family (cuBLAS)";
  }
}

// launch: per-kernel cost, a relative least-squares slope through the origin over the counts.
// The host submission cost from the GPU-timed eager launches (launch-bound; the host-timed loop
// is noisier on a shared machine).
void fit_launch(const Measurements& ms, Fit& f) {
  for (const char* name : {"eager_gpu", "graph_gpu"}) {
    double num = 0, den = 0;
    for (const auto& m : ms.items)
      if (m.family == "launch" && m.train && m.name == name) {
        double n = m.params.value("kernels", 1.0);
        num += n / m.time_ns;
        den += n * n / (m.time_ns * m.time_ns);
      }
    if (den <= 0) continue;
    double per = num / den;
    std::string field = std::string(name) == "eager_gpu" ? "host_launch_overhead" : "graph_node_latency";
    f.gpu[field] = ns_str(per);
    f.sources["gpu." + field] = f.src + ", launch family" + (field == "host_launch_overhead" ? " (without a profiler)" : "");
    f.log.push_back("launch: " + field + " " + ns_str(per) + " per kernel");
  }
}

// Single-kernel timings include what events see around an empty kernel (submission, launch):
// that part is the GPU's launch latency; the rest of the stream intercept is the kernel tail as a
// trace records kernels; GEMM overheads likewise.
void fit_launch_latency(const Measurements& ms, Fit& f) {
  json& gpu = f.gpu;
  const Measurement* empty = nullptr;
  for (const auto& m : ms.items)
    if (m.family == "launch" && m.name == "empty_events") empty = &m;
  if (!empty || !gpu.contains("kernel_tail")) return;
  double node_ns =
      gpu.contains("graph_node_latency") ? static_cast<double>(parse_duration(gpu["graph_node_latency"].get<std::string>())) : 0;
  // The device-side cost of a minimal kernel is what a CUDA graph pays per empty node; the
  // rest of what events see around one kernel (the stream intercept) is launch latency. (The
  // intercept is an extrapolation from 64 MiB up and too noisy to split further.)
  double intercept = static_cast<double>(parse_duration(gpu["kernel_tail"].get<std::string>()));
  double launch = std::max(0.0, intercept - node_ns);
  gpu["launch_latency"] = ns_str(launch);
  gpu["kernel_tail"] = ns_str(node_ns);
  f.sources["gpu.launch_latency"] =
      f.src + ", stream family intercept less the kernel tail (events around one empty kernel: " + ns_str(empty->time_ns) + ")";
  f.sources["gpu.kernel_tail"] = f.src + ", launch family (the device-side cost of an empty CUDA graph node)";
  f.log.push_back("launch: latency " + ns_str(launch) + "; kernel tail " + gpu["kernel_tail"].get<std::string>());
  // A cuBLAS call timed with events also includes the library's host work before its launch:
  // the device-side overhead is the kernel tail, the rest is `submit` (microbenchmarks only).
  if (gpu.contains("gemm_fit"))
    for (auto it = gpu["gemm_fit"].begin(); it != gpu["gemm_fit"].end(); ++it) {
      double o = static_cast<double>(parse_duration((*it)["overhead"].get<std::string>()));
      double tail = std::max(node_ns, intercept - launch);
      (*it)["overhead"] = ns_str(tail);
      (*it)["submit"] = ns_str(std::max(0.0, o - tail));
    }
}

// memcpy paths: an alpha-beta fit (latency + bytes / bandwidth) for the record, and, where the
// copies were timed on the device (CUPTI; `event_ns` present), the training sizes as a measured
// curve that the transfer model interpolates: host-side staging makes pageable copies
// non-linear in size (12 GB/s at 16 MiB, 6.5 GB/s at 256 MiB on the H200 host), which no single
// bandwidth fits.
void fit_memcpy(const Measurements& ms, Fit& f) {
  json& gpu = f.gpu;
  struct Rows {
    std::vector<std::vector<double>> a;
    std::vector<double> t;
    std::map<double, std::vector<double>> curve;  // size -> times (one per run)
    bool device = true;
  };
  std::map<std::string, Rows> per;
  for (const auto& m : ms.items)
    if (m.family == "memcpy" && m.train) {
      Rows& r = per[m.name];
      r.a.push_back({1.0, m.bytes});
      r.t.push_back(m.time_ns);
      r.curve[m.params.value("size", m.bytes)].push_back(m.time_ns);
      r.device = r.device && m.params.contains("event_ns");
    }
  json cp = json::object();
  for (auto& [path, rows] : per) {
    if (rows.a.size() < 2) continue;
    Eigen::VectorXd x = relative_lsq(rows.a, rows.t);
    double b = x(1) > 0 ? 1.0 / (x(1) * 1e-9) : 1e12;
    // Several runs of one size: their median.
    std::map<double, double> curve;
    for (auto& [size, ts] : rows.curve) {
      std::sort(ts.begin(), ts.end());
      curve[size] = ts.size() % 2 ? ts[ts.size() / 2] : 0.5 * (ts[ts.size() / 2 - 1] + ts[ts.size() / 2]);
    }
    if (rows.device && curve.size() >= 3) {
      // Device-timed: the curve carries the model; the summary figures are the rate between the
      // two largest sizes and the smallest copy's time.
      auto last = std::prev(curve.end()), before = std::prev(last);
      double dt = last->second - before->second;
      double per_byte = path == "d2d" ? 2.0 : 1.0;
      b = dt > 0 ? per_byte * (last->first - before->first) / (dt * 1e-9) : b;
      x(0) = curve.begin()->second;
    }
    cp[path] = {{"latency", ns_str(x(0))}, {"bandwidth", bw_str(b)}};
    if (rows.device) {
      json points = json::array();
      double prev = 0;
      for (auto [size, t] : curve) {  // times must not fall with size (noise at the small end)
        prev = std::max(prev, t);
        points.push_back({std::to_string(std::llround(size)) + " B", ns_str(prev)});
      }
      cp[path]["curve"] = points;
    } else if (path == "d2d" && gpu.contains("launch_latency")) {
      // Event-timed device-to-device copies run like a kernel: events also see its launch.
      double launch = static_cast<double>(parse_duration(gpu["launch_latency"].get<std::string>()));
      double device = std::max(static_cast<double>(parse_duration(gpu["kernel_tail"].get<std::string>())), x(0) - launch);
      cp[path]["latency"] = ns_str(device);
      cp[path]["submit"] = ns_str(std::max(0.0, x(0) - device));
    }
    f.log.push_back("memcpy " + path + ": " + ns_str(x(0)) + " + bytes / " + bw_str(b) +
                    (rows.device ? " (device-timed; curve of " + std::to_string(rows.curve.size()) + " sizes)" : ""));
  }
  if (!cp.empty()) {
    f.node["copy_paths"] = cp;
    f.sources["node.copy_paths"] = f.src + ", memcpy family";
  }
}

// Collectives (validate/nccl): per kind, t = latency + S x busfactor(n) / busbw (relative least
// squares on the training half), measured on `ranks` GPUs of this node.
void fit_collectives(const Measurements& ms, Fit& f) {
  std::map<std::string, std::pair<std::vector<std::vector<double>>, std::vector<double>>> per;
  std::map<std::string, std::uint32_t> ranks;
  std::map<std::string, std::map<double, std::vector<double>>> curves;  // kind -> size -> times
  for (const auto& m : ms.items)
    if (m.family == "collective" && m.train) {
      auto n = static_cast<std::uint32_t>(m.params.value("ranks", 1));
      if (n < 2) continue;  // one GPU: nothing crosses a link
      CollKind k = collective_kind_from_name(m.name);
      per[m.name].first.push_back({1.0, m.params.value("size", m.bytes) * bus_factor(k, n)});
      per[m.name].second.push_back(m.time_ns);
      curves[m.name][m.params.value("size", m.bytes)].push_back(m.time_ns);
      ranks[m.name] = n;
    }
  json cc = json::object();
  for (auto& [kind, rows] : per) {
    if (rows.first.size() < 2) continue;
    Eigen::VectorXd x = relative_lsq(rows.first, rows.second);
    double busbw = x(1) > 0 ? 1.0 / (x(1) * 1e-9) : 1e12;
    cc[kind] = {{"latency", ns_str(x(0))}, {"bus_bandwidth", bw_str(busbw)}, {"ranks", ranks[kind]}};
    // The measured curve (median per size, never falling with size): NCCL's protocol and channel
    // changes bend it where one line cannot follow.
    if (curves[kind].size() >= 3) {
      json points = json::array();
      double prev = 0;
      for (auto& [size, ts] : curves[kind]) {
        std::sort(ts.begin(), ts.end());
        prev = std::max(prev, ts.size() % 2 ? ts[ts.size() / 2] : 0.5 * (ts[ts.size() / 2 - 1] + ts[ts.size() / 2]));
        points.push_back({std::to_string(std::llround(size)) + " B", ns_str(prev)});
      }
      cc[kind]["curve"] = points;
    }
    f.log.push_back("collective " + kind + " on " + std::to_string(ranks[kind]) + " GPUs: " + ns_str(x(0)) + " + S x busfactor / " +
                    bw_str(busbw));
  }
  if (!cc.empty()) {
    f.node["collectives"] = cc;
    f.sources["node.collectives"] = f.src + ", collective family (NCCL, NVLS off)";
  }
}

// Latency-bound families, through the replay's models and engine on the spec fitted so far:
// - concurrency: the cycles between dependent FMAs (spin kernels' chains; their time is linear in
//   it, relative least squares over the training points);
// - occupancy: the memory latency of the memory-parallelism factor (a 1-D search, log errors).
void fit_latency_bound(const Measurements& ms, const std::string& base_preset, const std::string& overlay_name, Fit& f) {
  HwSpec fitted = load_hw_json(json{{"name", overlay_name}, {"extends", base_preset}, {"gpu", f.gpu}, {"node", f.node}}, overlay_name);
  std::vector<const Measurement*> spins, occ;
  for (const auto& m : ms.items) {
    if (m.train && m.family == "concurrency") spins.push_back(&m);
    if (m.train && m.family == "occupancy") occ.push_back(&m);
  }
  if (!spins.empty() && fitted.gpu.clock_hz > 0) {
    double num = 0, den = 0;
    for (const Measurement* m : spins) {
      fitted.gpu.dependent_op_cycles = 4;
      double p4 = predict(*m, fitted);
      fitted.gpu.dependent_op_cycles = 8;
      double p8 = predict(*m, fitted);
      double slope = (p8 - p4) / 4, at0 = p4 - 4 * slope, t = m->time_ns;
      num += (t - at0) * slope / (t * t);
      den += slope * slope / (t * t);
    }
    if (den > 0 && num / den > 0) {
      double cycles = num / den;
      fitted.gpu.dependent_op_cycles = cycles;
      f.gpu["dependent_op_cycles"] = std::round(cycles * 1000) / 1000;
      f.sources["gpu.dependent_op_cycles"] = f.src + ", concurrency family (spin kernels: dependent FMA chains at the spec clock)";
      f.log.push_back("dependent FMA chain: " + std::to_string(cycles) + " cycles per op at " + std::to_string(fitted.gpu.clock_hz / 1e9) +
                      " GHz");
    }
  }
  std::set<double> occupancies;
  for (const Measurement* m : occ) occupancies.insert(m->params.value("blocks_per_sm", 0.0));
  if (occupancies.size() >= 2) {
    double best_l = 0, best_err = std::numeric_limits<double>::infinity();
    for (int k = 0; k <= 240; ++k) {  // 10 ns .. 10 us, 40 steps a decade
      double l = 10 * std::pow(10.0, k / 80.0);
      fitted.gpu.memory_latency = static_cast<TimeNs>(std::llround(l));
      double err = 0;
      for (const Measurement* m : occ) {
        double p = predict(*m, fitted);
        if (p > 0) err += std::pow(std::log(p / m->time_ns), 2);
      }
      if (err < best_err) {
        best_err = err;
        best_l = l;
      }
    }
    f.gpu["memory_latency"] = ns_str(best_l);
    f.sources["gpu.memory_latency"] = f.src + ", occupancy family (a 16-byte copy at 1..8 blocks of 256 threads per SM)";
    f.log.push_back("memory latency (memory-level parallelism): " + ns_str(best_l));
  }
}

// Fit residuals: the calibrated model on its own training half, per family.
json training_residuals(const Measurements& ms, const std::string& base_preset, const std::string& overlay_name, const Fit& f) {
  json residuals = json::object();
  HwSpec fitted = load_hw_json(json{{"name", overlay_name}, {"extends", base_preset}, {"gpu", f.gpu}, {"node", f.node}}, overlay_name);
  std::map<std::string, std::vector<double>> fam;
  for (const auto& m : ms.items) {
    if (!m.train) continue;
    double p = predict(m, fitted);
    if (p > 0) fam[m.family].push_back(std::fabs(p - m.time_ns) / m.time_ns);
  }
  for (auto& [fm, v] : fam) {
    std::sort(v.begin(), v.end());
    residuals[fm] = {{"n", v.size()}, {"median_error", v[v.size() / 2]}, {"max_error", v.back()}};
  }
  return residuals;
}

Calibration calibrate_unchecked(const Measurements& ms, const std::string& base_preset, const std::string& overlay_name) {
  HwSpec base = load_hw(base_preset);
  Fit f;
  f.src = "calibrated by `bneck calibrate` from " + ms.source + " (training half)";
  fit_stream(ms, base.gpu.memory_bandwidth, f);
  fit_l2(ms, f);
  fit_gemm(ms, base, f);
  fit_launch(ms, f);
  fit_launch_latency(ms, f);
  fit_memcpy(ms, f);
  fit_collectives(ms, f);
  fit_latency_bound(ms, base_preset, overlay_name, f);
  json residuals = training_residuals(ms, base_preset, overlay_name, f);
  Calibration c;
  c.log = std::move(f.log);
  c.overlay = {{"name", overlay_name},
               {"extends", base_preset},
               {"description", base.description + ", calibrated from " + ms.source},
               {"gpu", f.gpu},
               {"node", f.node},
               {"sources", f.sources},
               {"calibration", {{"measurements", ms.source}, {"device", ms.device}, {"log", c.log}, {"training_residuals", residuals}}}};
  return c;
}

}  // namespace

double predict(const Measurement& m, const HwSpec& hw) {
  if (m.family == "collective") {  // the collective model, as model-mode replay times NCCL kernels
    auto n = static_cast<std::uint32_t>(m.params.value("ranks", 1));
    if (n < 2) return -1;
    return static_cast<double>(
        collective_time(hw, collective_kind_from_name(m.name), static_cast<Bytes>(m.params.value("size", m.bytes)), n).time_ns);
  }
  // Everything else: the microbenchmark's ops through the replay's models and engine.
  auto w = describe_microbenchmark(m, hw);
  return w ? simulate_microbenchmark(*w, hw) : -1;
}

namespace {
AccuracyReport accuracy_unchecked(const Measurements& ms, const HwSpec& hw) {
  AccuracyReport r;
  std::map<std::string, std::vector<double>> fam;
  std::map<std::string, std::size_t> count;
  std::vector<double> all;
  for (const auto& m : ms.items) {
    double p = predict(m, hw);
    r.predicted.push_back(p);
    count[m.family]++;
    if (p < 0 || m.train) continue;
    double e = std::fabs(p - m.time_ns) / m.time_ns;
    fam[m.family].push_back(e);
    all.push_back(e);
  }
  auto quant = [](std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(std::floor(q * static_cast<double>(v.size() - 1) + 0.5))];
  };
  for (auto& [f, n] : count)  // measured families the models have nothing for yet
    if (!fam.count(f)) {
      FamilyStats s;
      s.family = f;
      s.n = n;
      s.modelled = false;
      r.families.push_back(s);
    }
  for (auto& [f, v] : fam) {
    FamilyStats s;
    s.family = f;
    s.n = count[f];
    s.held_out = v.size();
    double sum = 0;
    for (double e : v) sum += e;
    s.mape = v.empty() ? 0 : sum / static_cast<double>(v.size());
    s.median = quant(v, 0.5);
    s.p90 = quant(v, 0.9);
    r.families.push_back(s);
  }
  r.held_out = all.size();
  r.median_error = quant(all, 0.5);
  r.p90_error = quant(all, 0.9);
  return r;
}

}  // namespace

}  // namespace bneck
