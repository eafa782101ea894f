// The CLI contract: JSON on stdout, the reports, calculators, what-ifs and the validate target (bad
// input, one clear error line naming the file and exit code 2: test_cli_errors.cpp).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/wait.h>

#include "helpers.hpp"
#include "hw/spec.hpp"
#include "sim/base/units.hpp"

using namespace bneck;
using namespace bneck::test;
namespace fs = std::filesystem;

TEST_CASE("replay --json - writes the contract's keys to stdout", "[cli]") {
  Run r = run("replay '" + demo_trace() + "' --range 'iter.*' --json -");
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"makespan_ns", "measured_makespan_ns", "critical_path", "overlap", "ranges"}) CHECK(j.contains(k));
  for (const char* k :
       {"compute_ns", "communication_ns", "memcpy_ns", "compute_comm_overlap_ns", "exposed_communication_ns", "gpu_idle_ns"})
    CHECK(j["overlap"].contains(k));
  REQUIRE(j["critical_path"].size() > 0);
  for (const char* k : {"id", "name", "kind", "device", "stream", "start_ns", "end_ns"}) CHECK(j["critical_path"][0].contains(k));
  REQUIRE(j["ranges"].size() == 6);
  TimeNs prev = 0;
  for (const auto& rg : j["ranges"]) {
    for (const char* k : {"name", "start_ns", "measured_span_ns", "simulated_span_ns", "critical_path"}) CHECK(rg.contains(k));
    CHECK(rg["start_ns"].get<TimeNs>() >= prev);  // time order
    prev = rg["start_ns"].get<TimeNs>();
  }
  CHECK(j["ranges"][0]["name"] == "iter0");
}

TEST_CASE("replay writes a loadable Chrome trace atomically, info and ops work", "[cli]") {
  fs::path d = tmp_dir();
  fs::path ct = d / "timeline.json";
  Run r = run("replay '" + demo_trace() + "' --chrome-trace '" + ct.string() + "'");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("Critical path"));
  auto j = nlohmann::json::parse(slurp(ct));
  REQUIRE(j.contains("traceEvents"));
  std::size_t measured = 0, simulated = 0;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") (e["pid"] == 1 ? measured : simulated)++;
  CHECK(measured == 218);
  CHECK(simulated == 218);
  for (const auto& entry : fs::directory_iterator(d)) CHECK(entry.path().string().find(".tmp.") == std::string::npos);
  // Writing into a missing directory is a clear error, exit 2.
  CHECK(run("replay '" + demo_trace() + "' --json /nonexistent/dir/out.json").code == 2);

  Run info = run("info '" + demo_trace() + "' --json -");
  REQUIRE(info.code == 0);
  auto ij = nlohmann::json::parse(info.out);
  CHECK(ij["devices"][0]["sm_count"] == 132);
  CHECK(ij["ops"]["kernel"] == 48);
  Run ops = run("ops '" + demo_trace() + "' --select 'kind=kernel&name~spin' --json -");
  REQUIRE(ops.code == 0);
  CHECK(nlohmann::json::parse(ops.out)["matched"] == 12);
}

TEST_CASE("calculators answer the text's worked examples with the documented JSON keys", "[cli][models]") {
  auto js = [](const std::string& args) {
    Run r = run(args + " --json -");
    INFO(args << "\n" << r.err);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out);
  };
  auto roof = js("roofline --hw hypothetical-120tf-2tbs --dtype fp32 --flops 1e9 --bytes 12e9");
  CHECK(roof["ridge_flop_per_byte"].get<double>() == Approx(60));
  CHECK(roof["attainable_flop_per_s"].get<double>() == Approx(0.16667e12).epsilon(1e-4));
  CHECK(roof["bound"] == "memory");
  CHECK(roof.contains("time_ns"));
  auto occ = js("occupancy --hw h200-sxm --threads 256 --regs 64 --smem '48 KiB'");
  CHECK(occ["blocks_per_sm"] == 4);
  CHECK(occ["warps_per_sm"] == 32);
  CHECK(occ["occupancy"].get<double>() == Approx(0.5));
  CHECK(occ.contains("limiter"));
  auto c1 = js("coalesce --elem-bytes 4 --stride 1");
  CHECK(c1["sectors_per_request"] == 4);
  auto c8 = js("coalesce --elem-bytes 4 --stride 8");
  CHECK(c8["sectors_per_request"] == 32);
  CHECK(c8["bytes_moved"] == 1024);
  CHECK(c8["efficiency"].get<double>() == Approx(0.125));
  CHECK(js("tile --width 64 --dtype fp32")["flop_per_byte"].get<double>() == Approx(16));
  auto am = js("amdahl --fraction 0.05 --factor 3 --total '100 ms'");
  CHECK(am["speedup"].get<double>() == Approx(100.0 / 96.6667).epsilon(1e-5));
  CHECK(am["saved_ns"].get<TimeNs>() == Approx(3'333'333).margin(1));
  CHECK(js("amdahl --fraction 0.05 --factor inf --total '100 ms'")["predicted_ns"] == 95'000'000);
  auto list = js("hw list");
  CHECK(list.size() >= 10);
  auto show = js("hw show h200-sxm");
  CHECK(show["unsourced"].empty());
  CHECK(run("occupancy --hw nope --threads 1 --regs 1").code == 2);
  CHECK(run("roofline --dtype fp7 --flops 1 --bytes 1").code == 2);
}

TEST_CASE("replay --hw retargets and writes a roofline table, roofline TRACE draws an SVG", "[cli][models]") {
  Run r = run("replay '" + demo_trace() + "' --hw h100-sxm --json -");
  REQUIRE(r.code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["model"] == "hybrid");
  CHECK(j["source_hw"] == "h200-sxm-calibrated");  // the calibrated overlay is the default for an H200
  CHECK(j["target_hw"] == "h100-sxm-calibrated");  // the overlay of published H100 GEMM measurements
  REQUIRE(j["roofline"].size() > 0);
  for (const char* k : {"class", "ops", "measured_ns", "model_source_ns", "predicted_ns", "bound", "achieved_fraction_of_peak"})
    CHECK(j["roofline"][0].contains(k));
  // A slower-memory GPU makes this memory- and copy-heavy pipeline no faster.
  CHECK(j["makespan_ns"].get<TimeNs>() >= j["measured_makespan_ns"].get<TimeNs>());
  fs::path svg = tmp_dir() / "roofline.svg";
  Run s = run("roofline '" + demo_trace() + "' --svg '" + svg.string() + "'");
  REQUIRE(s.code == 0);
  std::string text = slurp(svg);
  CHECK(text.rfind("<svg", 0) == 0);
  CHECK(text.find("<circle") != std::string::npos);
  CHECK(run("replay '" + demo_trace() + "' --durations fast").code == 2);
}

TEST_CASE("whatif and sweep from the command line", "[cli][whatif]") {
  Run w = run("whatif '" + demo_trace() + "' --range 'iter.*' --scale '2:name~spin' --remove kind=memset --json -");
  INFO(w.err);
  REQUIRE(w.code == 0);
  auto j = nlohmann::json::parse(w.out);
  for (const char* k : {"baseline_ns", "predicted_ns", "speedup", "ranges", "amdahl"}) CHECK(j.contains(k));
  for (const char* k : {"fraction", "factor", "predicted_ns"}) CHECK(j["amdahl"].contains(k));
  REQUIRE(j["ranges"].size() == 6);
  for (const char* k : {"name", "measured_span_ns", "baseline_ns", "predicted_ns"}) CHECK(j["ranges"][0].contains(k));
  CHECK(j["predicted_ns"].get<TimeNs>() <= j["baseline_ns"].get<TimeNs>());
  CHECK(j["transforms"].size() == 2);
  // The text names the spread of the per-range forecasts: the smallest and largest of the six.
  TimeNs lo = j["ranges"][0]["predicted_ns"], hi = lo;
  for (const auto& r : j["ranges"]) lo = std::min<TimeNs>(lo, r["predicted_ns"]), hi = std::max<TimeNs>(hi, r["predicted_ns"]);
  Run tw = run("whatif '" + demo_trace() + "' --range 'iter.*' --scale '2:name~spin' --remove kind=memset");
  CHECK(tw.out.find("spread    " + format_duration(lo) + " .. " + format_duration(hi) + "  (predicted over the 6 ranges)") !=
        std::string::npos);
  CHECK(run("whatif '" + demo_trace() + "'").code == 2);                      // no transform
  CHECK(run("whatif '" + demo_trace() + "' --scale fast:name~x").code == 2);  // bad factor
  CHECK(run("whatif '" + demo_trace() + "' --frobnicate").code == 2);         // unknown option
  fs::path csv = tmp_dir() / "sweep.csv";
  fs::path sc = tmp_dir() / "scenario.json";
  std::ofstream(sc.string()) << R"({"name": "fast-spin", "transforms": [{"scale": "4:name~spin"}]})";
  Run s = run("sweep '" + demo_trace() + "' --hw h200-sxm,h100-sxm,a100-sxm-80gb --scenario '" + sc.string() + "' --jobs 2 --csv '" +
              csv.string() + "'");
  INFO(s.err);
  REQUIRE(s.code == 0);
  std::string text = slurp(csv);
  CHECK(lines(text) == 1 + 3 * 2);  // header + 3 specs x (baseline, fast-spin)
  CHECK(text.find("fast-spin") != std::string::npos);
  // Each target's error bar: its calibrated overlay's held-out median |error| (H100: NeuSight's fp32
  // GEMMs 4.8 %, Vidur's fp16 3.0 %; the largest in the CSV), none for the uncalibrated H200 preset.
  CHECK(text.find(",error_bar\n") != std::string::npos);
  CHECK_THAT(s.out, Catch::Contains("gemm 4.8 %, gemm fp16 3.0 %"));
  CHECK_THAT(text, Catch::Contains(",0.0484\n"));
  fs::path svg = tmp_dir() / "vary.svg";
  Run v = run("sweep '" + demo_trace() + "' --hw h200-sxm --vary hbm_bandwidth=2TB/s..8TB/s:4 --svg '" + svg.string() + "'");
  REQUIRE(v.code == 0);
  CHECK(slurp(svg).find("<polyline") != std::string::npos);
  CHECK(run("sweep '" + demo_trace() + "' --hw h200-sxm --vary bogus=1..2:3").code == 2);
}

namespace {
std::size_t longest_line(const std::string& s) {
  std::size_t best = 0, cur = 0;
  for (char c : s) {
    if (c == '\n') {
      best = std::max(best, cur);
      cur = 0;
    } else
      ++cur;
  }
  return std::max(best, cur);
}
}  // namespace

TEST_CASE("no text line over 200 characters, whatever the input: a 700-character kernel name", "[cli]") {
  // Names as long as C++ templates make them reach every report: tables shorten them, and any line
  // still longer is wrapped at a space (its continuation indented), so no line passes 200.
  std::string name = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>";
  while (name.size() < 700) name += ", std::array<char*, 3ul>, at::native::memory::policies::unroll<std::array<char*, 3ul>";
  name += ">(int)";
  std::string ops, sep;
  for (int i = 0; i < 8; ++i) {
    const std::string at = std::to_string(i * 100);
    ops += sep + R"({"kind": "api", "name": "cudaLaunchKernel", "lane": 0, "start": ")" + at + R"( us", "duration": "5 us"})";
    ops += R"(, {"kind": "kernel", "name": ")" + name + R"(", "lane": 1, "start": ")" + std::to_string(i * 100 + 10) +
           R"( us", "duration": "50 us", "launched_by": )" + std::to_string(2 * i) + "}";
    sep = ", ";
  }
  const std::string path =
      write_temp(R"({"format": "bneck-workload", "measured": true, "devices": [{"name": "NVIDIA H200", "sm_count": 132}],
    "lanes": [{"kind": "thread", "name": "main"}, {"kind": "stream", "name": "s", "device": 0}], "ops": [)" +
                     ops + "]}",
                 "long_names");
  for (const std::string cmd :
       {"info", "ops", "replay", "advise", "structure", "roofline", "whatif --scale 2:kind=kernel", "whatif --fuse auto"}) {
    Run r = run(cmd.substr(0, cmd.find(' ')) + " '" + path + "'" + (cmd.find(' ') != std::string::npos ? cmd.substr(cmd.find(' ')) : ""));
    INFO(cmd << ": " << r.err);
    CHECK(r.code == 0);
    CHECK(longest_line(r.out) <= 200);
    CHECK(longest_line(r.err) <= 200);
  }
  // An error naming a long path stays one line within 200 characters too.
  Run e = run("replay '/" + std::string(300, 'x') + "/missing.sqlite'");
  CHECK(e.code == 2);
  CHECK(lines(e.err) == 1);
  CHECK(longest_line(e.err) <= 200);
}

TEST_CASE("text reports keep lines under 200 characters, a multi-rank ranges table has a rank column", "[cli]") {
  Run r = run("replay '" + demo_trace() + "' --range 'iter.*'");
  REQUIRE(r.code == 0);
  CHECK(longest_line(r.out) <= 200);
  Run w = run("whatif '" + demo_trace() + "' --range 'iter.*' --fuse name~axpy --scale 2:name~spin");
  REQUIRE(w.code == 0);
  CHECK(longest_line(w.out) <= 200);
  const std::string dlrm = extra_dir() + "/traces/kineto/param_dlrm_8rank_v100/dlrm_kineto";
  if (fs::exists(dlrm)) {
    Run d = run("replay '" + dlrm + "' --range 'ProfilerStep.*'");
    REQUIRE(d.code == 0);
    CHECK(longest_line(d.out) <= 200);
    CHECK_THAT(d.out, Catch::Contains("rank  range"));
    Run dj = run("replay '" + dlrm + "' --range 'ProfilerStep.*' --json -");
    auto j = nlohmann::json::parse(dj.out);
    REQUIRE(j["ranges"].size() >= 2);
    CHECK(j["ranges"][0].contains("rank"));
  }
  Run o = run("occupancy --threads 256 --regs 32 --smem 0");
  CHECK(o.code == 0);
}

TEST_CASE("docs/whatif.md's transform list is the registry's, --repeat synthesizes a range's work", "[cli][whatif]") {
  Run l = run("whatif --list-transforms markdown");
  REQUIRE(l.code == 0);
  CHECK(l.out.find("- `--repeat K:REGEX`") != std::string::npos);
  CHECK_THAT(slurp(source_dir() + "/docs/whatif.md"), Catch::Contains(l.out));
  // iter3 run twice: its span becomes the iteration period (1.476 ms from iter3's start to iter4's)
  // plus one more iteration of 1.164 ms: about 2.640 ms; the other ranges keep theirs.
  Run w = run("whatif '" + demo_trace() + "' --range 'iter.*' --repeat 2:iter3 --json -");
  INFO(w.err);
  REQUIRE(w.code == 0);
  auto j = nlohmann::json::parse(w.out);
  REQUIRE(j["ranges"].size() == 6);
  CHECK(j["ranges"][3]["predicted_ns"].get<double>() == Approx(1'476'758 + 1'164'349).epsilon(0.01));
  CHECK(j["ranges"][4]["predicted_ns"] == j["ranges"][4]["baseline_ns"]);
  CHECK(run("whatif '" + demo_trace() + "' --repeat x:iter3").code == 2);
}

// The validate target's calibration and report steps (validate/validate.sh --measurements), as they
// run on a machine without a GPU: the committed H200 measurements (one GPU, and NCCL on two) give
// the committed overlay and its held-out figures, and the overlay is installed where --hw finds it.
TEST_CASE("validate target: calibration, report and install from committed measurements", "[cli][validate]") {
  fs::path d = tmp_dir() / "validate";
  fs::remove_all(d);
  fs::create_directories(d / "hw");
  std::string cmd = "BNECK_HW_DIR='" + (d / "hw").string() + "' bash '" + source_dir() + "/validate/validate.sh' --out '" +
                    (d / "out").string() + "' --bneck '" + BNECK_EXE + "' --measurements '" + source_dir() +
                    "/validate/reference/h200/measurements.json' '" + source_dir() + "/validate/reference/h200/collectives_2gpu.json' >'" +
                    (d / "log").string() + "' 2>&1";
  int st = std::system(cmd.c_str());
  INFO(slurp(d / "log"));
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
  // The overlay extends the matching preset and carries every calibrated field the reference has.
  auto overlay = nlohmann::json::parse(slurp(d / "out" / "h200-sxm-calibrated.json"));
  auto reference = nlohmann::json::parse(slurp(source_dir() + "/hw/calibrated/h200-sxm-calibrated.json"));
  CHECK(overlay["extends"] == "h200-sxm");
  // (gpu.gemm_samples and gemm_samples_unaligned: GEMM shapes measured apart, merged by
  // validate/reference/h200/gemm/fit_gemm.py.)
  for (auto it = reference["gpu"].begin(); it != reference["gpu"].end(); ++it) {
    if (it.key() == "gemm_samples" || it.key() == "gemm_samples_unaligned") continue;
    INFO("gpu." << it.key());
    CHECK(overlay["gpu"][it.key()] == it.value());
  }
  CHECK(overlay["node"] == reference["node"]);
  // The summary: the same held-out figures as the committed report (139 held out, 2.5 % / 11.2 %).
  std::string summary = slurp(d / "out" / "summary.txt");
  CHECK_THAT(summary, Catch::Contains("139 held-out measurements, median error 1.7 %, 90th percentile 11.9 %"));
  CHECK_THAT(summary, Catch::Contains("biggest held-out misses"));
  CHECK(fs::exists(d / "out" / "report.json"));
  CHECK(fs::exists(d / "out" / "report.svg"));
  // Installed: `--hw h200-sxm-calibrated` resolves to it, and `hw list` shows it.
  CHECK(fs::exists(d / "hw" / "h200-sxm-calibrated.json"));
  std::string list_cmd = "BNECK_HW_DIR='" + (d / "hw").string() + "' " + BNECK_EXE + " hw list >'" + (d / "list").string() + "' 2>&1";
  REQUIRE(std::system(list_cmd.c_str()) == 0);
  CHECK_THAT(slurp(d / "list"), Catch::Contains("installed (") && Catch::Contains("h200-sxm-calibrated"));
  fs::remove_all(d);
}

TEST_CASE("validate target: a GPU with no preset gets a base spec from its device properties", "[cli][validate]") {
  fs::path d = tmp_dir() / "validate_nopreset";
  fs::remove_all(d);
  fs::create_directories(d / "hw");
  // The H200 measurements relabelled as an unknown Hopper part (cc 9.0, 100 SMs at 1.5 GHz).
  auto m = nlohmann::json::parse(slurp(source_dir() + "/validate/reference/h200/measurements.json"));
  m["device"]["name"] = "NVIDIA Example X1";
  m["device"]["sm_count"] = 100;
  m["device"]["clock_khz"] = 1500000;
  m["device"]["memory_bus_bits"] = 6144;
  std::ofstream(d / "m.json") << m.dump();
  std::string cmd = "BNECK_HW_DIR='" + (d / "hw").string() + "' bash '" + source_dir() + "/validate/validate.sh' --out '" +
                    (d / "out").string() + "' --bneck '" + BNECK_EXE + "' --measurements '" + (d / "m.json").string() + "' >'" +
                    (d / "log").string() + "' 2>&1";
  int st = std::system(cmd.c_str());
  INFO(slurp(d / "log"));
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
  auto base = nlohmann::json::parse(slurp(d / "hw" / "nvidia-example-x1.json"));
  // Hopper rates per SM and clock x 100 SMs x 1.5 GHz: FP32 256 -> 38.4 TFLOP/s, BF16 tensor
  // 4096 -> 614.4 TFLOP/s; memory 2 x 3.201 GHz x 6144 bit / 8 = 4916.7 GB/s.
  CHECK(base["gpu"]["peak"]["fp32"]["simt"] == "38.4 TFLOP/s");
  CHECK(base["gpu"]["peak"]["bf16"]["tensor"] == "614.4 TFLOP/s");
  CHECK(base["gpu"]["memory_bandwidth"].get<std::string>().rfind("4916.7", 0) == 0);
  CHECK_THAT(base["sources"]["gpu.peak"].get<std::string>(), Catch::StartsWith("guessed: Hopper"));
  auto overlay = nlohmann::json::parse(slurp(d / "out" / "nvidia-example-x1-calibrated.json"));
  CHECK(overlay["extends"] == "nvidia-example-x1");
  // Device matching finds the installed overlay for traces from that GPU.
  setenv("BNECK_HW_DIR", (d / "hw").string().c_str(), 1);
  CHECK(bneck::preset_for_device("NVIDIA Example X1") == "nvidia-example-x1-calibrated");
  unsetenv("BNECK_HW_DIR");
  fs::remove_all(d);
}

TEST_CASE("test names carry no semicolon (ctest cuts a name there and its filter then runs nothing)", "[cli]") {
  for (const auto& e : fs::directory_iterator(source_dir() + "/tests")) {
    if (e.path().extension() != ".cpp") continue;
    std::string text = slurp(e.path());
    for (std::size_t p = text.find("TEST_CASE(\""); p != std::string::npos; p = text.find("TEST_CASE(\"", p + 1)) {
      std::size_t b = p + 11, q = text.find('"', b);
      std::string name = text.substr(b, q - b);
      INFO(e.path().filename().string() << ": " << name);
      CHECK(name.find(';') == std::string::npos);
    }
  }
}
TEST_CASE("a trace with no device work gets one line from advise, whatif and replay, no verdict", "[cli]") {
  // A CPU-only PyTorch profile: an op and a runtime call, no kernel, copy or memset.
  const std::string cpu =
      write_temp(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 5, "args": {"correlation": 7}}]})",
                 "cpu_only.json");
  for (const std::string cmd : {"advise", "whatif --scale 2:kind=kernel", "replay"}) {
    INFO(cmd);
    Run r = run(cmd.substr(0, cmd.find(' ')) + " '" + cpu + "'" + (cmd.find(' ') == std::string::npos ? "" : cmd.substr(cmd.find(' '))));
    CHECK(r.code == 0);
    CHECK(lines(r.out) == 1);
    CHECK(r.out.find("no device work in this trace: nothing to") != std::string::npos);
    CHECK(r.out.find("(1 host call, no kernel, copy or memset)") != std::string::npos);
    CHECK(r.out.find("ottleneck") == std::string::npos);
    CHECK(r.out.find("speedup") == std::string::npos);
  }
  Run j = run("whatif '" + cpu + "' --scale 2:kind=kernel --json -");
  CHECK(nlohmann::json::parse(j.out)["no_device_work"].get<std::string>().rfind("no device work in this trace", 0) == 0);
}

// A trace that names no GPU (Kineto without deviceProperties) replays on its measured times; its
// HTML report is written too, the roofline section saying it has no GPU to draw (it was refused:
// "which GPU ran it?"). A trace of host calls alone (or an execution trace without timings) gets
// one line and no file.
TEST_CASE("report on a trace whose GPU is unknown, and on one with no device work", "[cli][report]") {
  const std::string trace = write_temp(R"({"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 0, "dur": 5, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 100,
     "args": {"correlation": 1, "stream": 7, "device": 0, "grid": [1, 1, 1], "block": [32, 1, 1]}}]})",
                                       "report_nogpu.json");
  const std::string html = tmp("report_nogpu.html");
  std::remove(html.c_str());
  Run r = run("report '" + trace + "' -o '" + html + "'");
  INFO(r.err);
  CHECK(r.code == 0);
  std::ifstream in(html);
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str().find("the trace does not say which GPU ran it") != std::string::npos);
  std::remove(html.c_str());
  const std::string et = write_temp(R"({"traceEvents": [
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaGetDevice", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]})",
                                    "report_host_only.json");
  Run e = run("report '" + et + "' -o '" + html + "'");
  INFO(e.out << e.err);
  CHECK(e.code == 0);
  CHECK(e.out.find("no device work") != std::string::npos);
  CHECK_FALSE(std::ifstream(html).good());
}

// advise without --range on block_bf16 (7 training steps after a 9.2 s set-up) says it advises on
// the steady state and gives its scope in JSON; --whole-run keeps the whole run (no scope).
TEST_CASE("advise: the steady state by default, --whole-run for all of the run", "[cli][advise]") {
  const std::string trace = core("block_bf16.sqlite");
  Run d = run("advise '" + trace + "' --json -");
  REQUIRE(d.code == 0);
  const auto dj = nlohmann::json::parse(d.out);
  CHECK(dj["scope"].get<std::string>().rfind("the steady state: the run's 7 iterations", 0) == 0);
  CHECK(dj["scope_instances"].get<std::size_t>() == 7);
  CHECK(dj["bottleneck"]["class"] == "compute-bound");
  Run w = run("advise '" + trace + "' --whole-run --json -");
  REQUIRE(w.code == 0);
  const auto wj = nlohmann::json::parse(w.out);
  CHECK(wj["scope"].get<std::string>().empty());
  CHECK(wj["bottleneck"]["class"] == "launch/host-bound");
  Run text = run("advise '" + trace + "'");
  CHECK(text.out.find("  advised on the steady state: the run's 7 iterations") != std::string::npos);
}
