#include "helpers.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <filesystem>

namespace bneck::test {

std::string extra_dir() {
  const char* d = std::getenv("BNECK_EXTRA_TRACES");
  return d ? d : "";
}

Trace workload(const std::string& json_text) {
  std::istringstream in(json_text);
  return read_trace_json(in, "workload.json");
}

Replayed replay(Trace t) {
  Replayed r{std::move(t), {}, {}};
  r.graph = build_graph(r.trace);
  MeasuredCostModel m;
  r.sim = simulate(r.graph, m);
  return r;
}

std::string tmp(const std::string& name) { return "/tmp/bneck_kineto_" + std::to_string(::getpid()) + "_" + name; }

// One rank of a data-parallel step: a GEMM of `gemm_us`, then an all-reduce on the same stream
// that ends at `end_us` (when the last rank arrived plus 500 us of transfer).
// With `comm_stream` != 7 the all-reduce runs on its own stream, launched at `launch_us`.
std::string rank_trace(int rank, double gemm_us, double end_us, int comm_stream, double launch_us) {
  const double k0 = 10;  // kernels start 10 us after their launch
  const double n0 = comm_stream == 7 ? k0 + gemm_us : launch_us + 10;
  nlohmann::json ev = nlohmann::json::array();
  auto api = [&](const char* name, double ts, double dur, int corr) {
    ev.push_back({{"ph", "X"},
                  {"cat", "cuda_runtime"},
                  {"name", name},
                  {"pid", 100 + rank},
                  {"tid", 100 + rank},
                  {"ts", ts},
                  {"dur", dur},
                  {"args", {{"correlation", corr}}}});
  };
  auto kernel = [&](const std::string& name, double ts, double dur, int corr, int stream) {
    ev.push_back({{"ph", "X"},
                  {"cat", "kernel"},
                  {"name", name},
                  {"pid", 0},
                  {"tid", stream},
                  {"ts", ts},
                  {"dur", dur},
                  {"args", {{"correlation", corr}, {"device", 0}, {"stream", stream}, {"grid", {132, 1, 1}}, {"block", {256, 1, 1}}}}});
  };
  ev.push_back({{"ph", "X"},
                {"cat", "user_annotation"},
                {"name", "ProfilerStep#1"},
                {"pid", 100 + rank},
                {"tid", 100 + rank},
                {"ts", 0},
                {"dur", end_us + 50}});
  ev.push_back({{"ph", "X"},
                {"cat", "cpu_op"},
                {"name", "record_param_comms"},
                {"pid", 100 + rank},
                {"tid", 100 + rank},
                {"ts", launch_us - 1},
                {"dur", 15},
                {"args",
                 {{"Collective name", "allreduce"},
                  {"In msg nelems", 1048576},
                  {"Out msg nelems", 1048576},
                  {"dtype", "Float"},
                  {"Process Group Name", "0"},
                  {"Process Group Ranks", "[0, 1]"},
                  {"Group size", 2}}}});
  api("cudaLaunchKernel", 0, 5, 1);
  api("cudaLaunchKernel", launch_us, 5, 2);
  api("cudaDeviceSynchronize", launch_us + 10, end_us + 10 - (launch_us + 10), 3);
  kernel("gemm_rank" + std::to_string(rank), k0, gemm_us, 1, 7);
  kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", n0, end_us - n0, 2, comm_stream);
  nlohmann::json j = {{"schemaVersion", 1},
                      {"deviceProperties", {{{"id", 0}, {"name", "NVIDIA H200"}, {"numSms", 132}}}},
                      {"distributedInfo", {{"backend", "nccl"}, {"rank", rank}, {"world_size", 2}}},
                      {"traceEvents", ev}};
  std::string path = tmp("rank" + std::to_string(rank) + ".json");
  std::ofstream(path) << j.dump();
  return path;
}

CliRun run_bneck(const std::string& args) {
  namespace fs = std::filesystem;
  fs::path d = fs::temp_directory_path() / ("bneck_cli_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  std::string cmd = std::string(BNECK_EXE) + " " + args + " >" + (d / "out").string() + " 2>" + (d / "err").string();
  int st = std::system(cmd.c_str());
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(d / "out"), slurp(d / "err")};
}

std::string write_temp(const std::string& text, const std::string& tag) {
  std::string path = "/tmp/bneck_" + tag + "_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << text;
  return path;
}

std::string write_gzip(const std::string& text, const std::string& tag, std::size_t split) {
  const std::string path = write_temp("", tag);
  for (int part = 0; part < (split < text.size() ? 2 : 1); ++part) {
    gzFile f = gzopen(path.c_str(), part == 0 ? "wb" : "ab");
    const std::string s = part == 0 ? text.substr(0, split) : text.substr(split);
    gzwrite(f, s.data(), static_cast<unsigned>(s.size()));
    gzclose(f);
  }
  return path;
}

bool has_line(const WhatIfReport& r, const std::string& what) {
  return std::any_of(r.log.begin(), r.log.end(), [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

double measured_median(const std::string& path, const std::string& range) {
  Trace t = load_trace(path);
  ReplayOptions o;
  o.range_regex = range;
  ReplayReport r = run_replay(t, o);
  std::vector<double> v;
  for (const auto& rr : r.ranges) v.push_back(static_cast<double>(rr.measured_span_ns));
  return median(v);
}

WhatIfReport whatif_of(const std::string& path, const std::string& range, const std::vector<std::string>& args) {
  static std::deque<Trace> keep;  // the reports point at their traces
  Trace* t = &keep.emplace_back(load_trace(path));
  WhatIfOptions opt;
  if (!range.empty()) opt.range_regex = range;
  std::string scenario;
  std::vector<std::string> tr;
  for (std::size_t k = 0; k < args.size(); ++k)
    if (args[k] == "--sharing" && k + 1 < args.size())
      opt.sharing = args[++k] == "on";
    else
      tr.push_back(args[k]);
  opt.transforms = parse_transform_args(tr, scenario);
  return run_whatif(*t, opt);
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path tmp_dir() {
  std::filesystem::path d = std::filesystem::temp_directory_path() / ("bneck_cli_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

std::size_t lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace bneck::test

namespace bneck::test {
nlohmann::json memory_per_gpu_json(const WhatIfReport& r) {
  const nlohmann::json j = whatif_json(r);
  return j.contains("memory_per_gpu") ? j.at("memory_per_gpu") : nlohmann::json();
}
}  // namespace bneck::test
