// Format detection by content: a valid file of a supported format imports whatever its key order,
// leading whitespace or byte-order mark, extra top-level objects or compression.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>

#include "helpers.hpp"
#include "hw/from_device.hpp"
#include "models/retarget.hpp"
#include "sim/base/error.hpp"
#include "models/replay.hpp"
#include "models/whatif/run.hpp"
#include "sim/analysis/structure.hpp"
#include "traces/gzbuf.hpp"
#include "traces/importer.hpp"

using namespace bneck;
using namespace bneck::test;
namespace fs = std::filesystem;

namespace {

// Two kernels on one stream, launched by one thread, as PyTorch's profiler writes them.
const char* kEvents = R"("traceEvents": [
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5, "args": {"correlation": 1}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5, "args": {"correlation": 2}},
  {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 30, "dur": 100, "args": {"correlation": 1, "device": 0, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "relu", "pid": 0, "tid": 7, "ts": 140, "dur": 20, "args": {"correlation": 2, "device": 0, "stream": 7}}])";

// A harness's metadata object larger than the sniffers' 4 kB head, holding keys that look like a
// trace's ("traceEvents" as a string, nested objects and arrays, escaped quotes).
std::string big_metadata() {
  std::string m = R"("metadata": {"model": "a \"quoted\" name {[", "note": "traceEvents", "shapes": [)";
  for (int i = 0; i < 600; ++i) m += std::string(i ? ", " : "") + "[16, 559, " + std::to_string(i) + "]";
  return m + R"(], "profiler": {"record_shapes": true, "schedule": {"wait": 1}}})";
}

void write(const fs::path& p, const std::string& text, bool gzip) {
  if (!gzip) {
    std::ofstream(p, std::ios::binary) << text;
    return;
  }
  gzFile f = gzopen(p.string().c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

TimeNs makespan(const Trace& t) { return run_replay(t, ReplayOptions{}).simulated.length(); }

}  // namespace

TEST_CASE("a Kineto trace whose metadata comes first imports like the reordered one", "[formats][kineto]") {
  fs::path d = tmp("formats");
  fs::create_directories(d);
  write(d / "plain.json", std::string("{") + kEvents + R"(, "schemaVersion": 1})", false);
  Trace ref = load_trace((d / "plain.json").string());
  REQUIRE(ref.device_op_count() == 2);
  // gemm 100 us + relu 20 us, 10 us apart on one stream: 30 .. 160 us = 130 us.
  CHECK(makespan(ref) == 130'000);
  const std::string meta = big_metadata();
  REQUIRE(meta.size() > 4096);
  struct Case {
    const char* file;
    std::string text;
    bool gzip;
  };
  const Case cases[] = {
      {"meta_first.json", "{" + meta + ", " + kEvents + "}", false},
      {"meta_first.json.gz", "{" + meta + ", " + kEvents + "}", true},
      {"bom_space.json", "\xEF\xBB\xBF \n\t {" + meta + ", " + kEvents + ", \"deviceProperties\": []}", false},
      {"extra_objects.json", "{" + meta + ", \"distributedInfo\": {\"rank\": 0}, " + kEvents + ", \"baseTimeNanoseconds\": 1}", true},
  };
  for (const Case& c : cases) {
    INFO(c.file);
    write(d / c.file, c.text, c.gzip);
    Trace t;
    REQUIRE_NOTHROW(t = load_trace((d / c.file).string()));
    CHECK(t.format == "kineto-json");
    CHECK(t.device_op_count() == 2);
    CHECK(makespan(t) == 130'000);
  }
}

TEST_CASE("top-level keys are found past the head: bneck JSON and Chakra with their telling key last", "[formats]") {
  fs::path d = tmp("formats");
  fs::create_directories(d);
  std::string pad = R"("comment": ")" + std::string(6000, 'x') + R"(", )";
  write(
      d / "workload.json",
      "{" + pad +
          R"("lanes": [{"kind": "stream", "name": "s"}], "ops": [{"kind": "kernel", "name": "k", "lane": 0, "duration": "2 us"}], "format": "bneck-workload"})",
      false);
  Trace w = load_trace((d / "workload.json").string());
  CHECK(w.format == "bneck-workload");
  CHECK(makespan(w) == 2'000);
  write(d / "chakra.json",
        "{" + pad + R"("workload_graph": [{"Id": 1, "Name": "a", "NodeType": 4, "runtime": 3, "data_deps": [], "is_cpu_op": false}]})",
        false);
  CHECK(load_trace((d / "chakra.json").string()).format.find("chakra") != std::string::npos);
  // A JSON object that no importer claims is still refused in one line naming the file.
  write(d / "other.json", "{" + pad + R"("something": [1, 2, 3]})", false);
  try {
    load_trace((d / "other.json").string());
    FAIL("imported a file of no known format");
  } catch (const InputError& e) { CHECK_THAT(e.what(), Catch::StartsWith((d / "other.json").string() + ": unrecognised trace format")); }
}

TEST_CASE("json_top_level_keys: keys in order, string values kept, nested and escaped text skipped", "[formats]") {
  fs::path d = tmp("formats");
  fs::create_directories(d);
  write(d / "keys.json", R"( {"a": {"traceEvents": [1, "}"]}, "b\"c": "v\"1", "format": "bneck-trace", "n": [[{}]], "z": 1})", true);
  auto keys = json_top_level_keys((d / "keys.json").string());
  REQUIRE(keys);
  REQUIRE(keys->size() == 5);
  CHECK((*keys)[0] == std::make_pair(std::string("a"), std::string()));
  CHECK((*keys)[1].first == "b\\\"c");
  CHECK((*keys)[2] == std::make_pair(std::string("format"), std::string("bneck-trace")));
  CHECK((*keys)[4].first == "z");
  // Up to a stop key: it is the last key read, its value and what follows are not.
  write(d / "stop.json", R"({"metadata": {"traceEvents": 1}, "traceEvents": [{"ph": "X"}], "format": "bneck-trace"})", false);
  auto upto = json_top_level_keys((d / "stop.json").string(), "traceEvents");
  REQUIRE(upto);
  REQUIRE(upto->size() == 2);
  CHECK((*upto)[1] == std::make_pair(std::string("traceEvents"), std::string()));
  write(d / "array.json", "[1, 2]", false);
  CHECK_FALSE(json_top_level_keys((d / "array.json").string()));
}

namespace {

// The files under $BNECK_EXTRA_TRACES/traces/SUB but its README.md, sorted (nullopt: no such folder).
std::optional<std::vector<fs::path>> extra_trace_files(const std::string& sub) {
  const fs::path dir = fs::path(extra_dir()) / "traces" / sub;
  if (!fs::exists(dir)) return std::nullopt;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("every third-party trace imports and replays at +0.00 %", "[formats][extended]") {
  const auto found = extra_trace_files("thirdparty");
  if (!found) {
    WARN("no " << extra_dir() << "/traces/thirdparty: skipped");
    return;
  }
  const std::vector<fs::path>& files = *found;
  CHECK(files.size() >= 17);
  for (const auto& f : files) {
    INFO(f.string());
    Trace t;
    REQUIRE_NOTHROW(t = load_trace(f.string()));
    CHECK(t.device_op_count() > 0);
    ReplayReport rep = run_replay(t, ReplayOptions{});
    CHECK(rep.simulated.length() == rep.measured.length());
    // A what-if that keeps measured times runs whichever GPU it was (AMD GPUs and device-less
    // exports name none of the presets): the kernels and collectives 2x faster shorten the GPU span.
    WhatIfOptions wo;
    std::string scenario;
    wo.transforms = parse_transform_args({"--scale", "2:kind=kernel", "--scale", "2:kind=collective"}, scenario);
    WhatIfReport w;
    REQUIRE_NOTHROW(w = run_whatif(t, wo));
    CHECK(w.predicted.length() < w.baseline.length());
  }
}

// traces/found of $BNECK_EXTRA_TRACES (its README names each file's repository and commit): 36
// files published in others' repositories, none written for bneck: Kineto from PyTorch 1.8 (a bare
// array of events, 2021 category names) to 2026, ROCm profiles of MI300X, a B300's, HTA's test
// data, PyTorch execution traces and an Nsight Systems export of a machine with two kinds of GPU.
// Each either is refused with one line naming the file (a JAX XPlane protobuf, a format bneck does
// not read; a tar archive, to be unpacked) or imports; those with device work replay at +0.00 %, their
// structure is searched and a what-if runs; those without say so.
TEST_CASE("every trace found in others' repositories imports, or is refused naming the file", "[formats][extended]") {
  const auto found = extra_trace_files("found");
  if (!found) {
    WARN("no " << extra_dir() << "/traces/found: skipped");
    return;
  }
  const std::vector<fs::path>& files = *found;
  std::size_t replayed = 0, refused = 0;
  for (const auto& f : files) {
    INFO(f.string());
    Trace t;
    try {
      t = load_trace(f.string());
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(f.filename().string()) != std::string::npos);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
      ++refused;
      continue;
    }
    if (t.device_op_count() == 0) continue;
    ReplayReport rep = run_replay(t, ReplayOptions{});
    CHECK(rep.simulated.length() == rep.measured.length());
    REQUIRE_NOTHROW(find_structure(t));
    WhatIfOptions wo;
    std::string scenario;
    wo.transforms = parse_transform_args({"--scale", "2:kind=kernel"}, scenario);
    WhatIfReport w;
    REQUIRE_NOTHROW(w = run_whatif(t, wo));
    CHECK(w.predicted.length() <= w.baseline.length());
    ++replayed;
  }
  CHECK(replayed >= 20);
  CHECK(refused <= 2);
}

TEST_CASE("a GPU with no preset gets a spec from the trace's device properties, said, and wide intervals", "[formats][extended]") {
  const std::string f = extra_dir() + "/traces/thirdparty/tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz";
  if (!fs::exists(f)) {
    WARN("no " << f << ": skipped");
    return;
  }
  const Trace t = load_trace(f);
  WhatIfOptions wo;
  std::string scenario;
  wo.transforms = parse_transform_args({"--precision", "bf16"}, scenario);
  const WhatIfReport w = run_whatif(t, wo);
  CHECK(w.source_hw == "amd-instinct-mi210");
  REQUIRE_FALSE(w.log.empty());
  // 104 CUs and 64 GiB from deviceProperties; CDNA2's rates at its 1.7 GHz peak engine clock.
  CHECK(w.log.front().find("AMD Instinct MI210 has no preset: a spec from its device properties (104 CUs, 64 GiB) and CDNA2 rates") !=
        std::string::npos);
  REQUIRE(w.error_bar.valid());
  CHECK(std::any_of(w.error_bar.basis.begin(), w.error_bar.basis.end(),
                    [](const std::string& b) { return b.find("rates come from its device properties") != std::string::npos; }));
  // CDNA2 bf16 matrix: 1024 FLOPs per CU per clock x 104 CUs x 1.7 GHz = 181.0 TFLOP/s (the datasheet's 181).
  const HwSpec s = load_hw("amd-instinct-mi210");
  CHECK(s.gpu.peak_of(Dtype::BF16, ComputeUnit::Tensor) == Approx(1024.0 * 104 * 1.7e9).epsilon(1e-3));
  // A device no property names: measured times only, said.
  Trace u = t;
  for (auto& d : u.devices) {
    const std::uint32_t id = d.id;
    d = Device{};
    d.id = id;
  }
  wo.transforms = parse_transform_args({"--scale", "2:kind=kernel"}, scenario);
  CHECK(run_whatif(u, wo).log.front().find("no hardware model, sharing off") != std::string::npos);
}

TEST_CASE("a ROCm profile that names no GPU: the AMD part its CUs and gfx version tell", "[formats][extended]") {
  // vLLM's decode profile of thirdparty/tracelens: deviceProperties with an empty name, 304 CUs,
  // compute capability 9.4 (gfx942), HIP runtime calls. It is an MI300X (CDNA3), said; before, an
  // H100 SXM's rates were assumed. The same properties without HIP calls (an NVIDIA runtime) tell
  // nothing: no part is guessed.
  const std::string f = extra_dir() + "/traces/thirdparty/tracelens/inference__vllm_decode_full__graph_execution.json.gz";
  if (!fs::exists(f)) {
    WARN("no " << f << ": skipped");
    return;
  }
  const Trace t = load_trace(f);
  REQUIRE_FALSE(t.devices.empty());
  CHECK(t.devices[0].name.empty());
  const HwSpec h = source_spec(t, "");
  CHECK(h.name == "amd-instinct-mi300x");
  CHECK(h.gpu.sm_count == 304);
  CHECK(h.from_trace.find("the trace names no GPU; its 304 CUs, gfx9.4 and HIP runtime are an AMD Instinct MI300X's") == 0);
  CHECK(amd_part_from_properties(304, 9, 4) == "AMD Instinct MI300X");
  CHECK(amd_part_from_properties(132, 9, 0).empty());
  Trace u = t;
  for (Op& o : u.ops)
    if (o.kind == OpKind::Api) o.name = u.strings.intern("cudaLaunchKernel");
  CHECK_THROWS_AS(source_spec(u, ""), InputError);
}

// A profile older than deviceProperties names no GPU: cuBLAS and cuDNN name their kernels by the
// architecture they were built for (the 2021 ResNet-50 samples of the PyTorch profiler's
// TensorBoard plugin: volta_scudnn_..., volta_sgemm_...). The most kernels' architecture picks its
// common data-center part, said as a guess; no telling name, no guess.
TEST_CASE("a trace that names no GPU: the architecture its kernels were built for", "[formats][hw]") {
  auto trace = [](const std::vector<std::string>& kernels) {
    std::string ev;
    int corr = 0;
    for (const std::string& k : kernels) {
      ++corr;
      ev += R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":)" + std::to_string(100 * corr) +
            R"(,"dur":5,"args":{"correlation":)" + std::to_string(corr) + "}},";
      ev += R"({"ph":"X","cat":"kernel","name":")" + k + R"(","pid":0,"tid":7,"ts":)" + std::to_string(100 * corr + 10) +
            R"(,"dur":50,"args":{"stream":7,"device":0,"correlation":)" + std::to_string(corr) + "}},";
    }
    ev.pop_back();
    return load_trace(write_temp(R"({"traceEvents":[)" + ev + "]}", "arch_" + std::to_string(kernels.size())));
  };
  const Trace v =
      trace({"volta_scudnn_128x64_relu_medium_nn_v1", "volta_sgemm_128x64_nn", "void at::native::vectorized_elementwise_kernel<4>"});
  const HwSpec h = source_spec(v, "");
  CHECK(h.name == "v100-sxm2");
  CHECK(h.from_trace ==
        "the trace names no GPU; 2 of its 3 kernels are built for Volta (sm_70) (cuBLAS / cuDNN kernel names): a V100 "
        "SXM2's rates assumed, a guess (--source-hw SPEC gives the real one)");
  const Trace hop = trace({"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NTN", "sm90_xmma_gemm_bf16bf16_bf16f32", "volta_sgemm_128x64_nn",
                           "void at::native::vectorized_elementwise_kernel<4>"});
  CHECK(source_spec(hop, "").name == "h100-sxm");  // 2 Hopper kernels to 1 Volta
  const Trace none = trace({"void at::native::vectorized_elementwise_kernel<4>", "my_kernel"});
  CHECK_THROWS_AS(source_spec(none, ""), InputError);
}

TEST_CASE("a ROCm profile naming ROCm's generic 'AMD Radeon Graphics': the part its CUs and gfx version tell", "[formats][extended]") {
  // HTA's MI250 training profile (ROCm 6.2): four devices named "AMD Radeon Graphics", 104 CUs each,
  // gfx90a (9.0), 64 GiB: one die of an MI250, the same CUs and bandwidth as an MI210. Every what-if
  // was refused ("which GPU ran it?"); now its CDNA2 rates, said.
  const std::string f = extra_dir() + "/traces/kineto/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz";
  if (!fs::exists(f)) {
    WARN("no " << f << ": skipped");
    return;
  }
  const Trace t = load_trace(f);
  REQUIRE_FALSE(t.devices.empty());
  CHECK(t.devices[0].name == "AMD Radeon Graphics");
  const HwSpec h = source_spec(t, "");
  CHECK(h.name == "amd-instinct-mi210");
  CHECK(h.gpu.sm_count == 104);
  CHECK_THAT(h.from_trace, Catch::Contains("'AMD Radeon Graphics' (ROCm's generic name); its 104 CUs, gfx9.0 are an AMD Instinct MI210's "
                                           "(or one die of an MI250"));
  CHECK(amd_part_from_properties(104, 9, 0) == "AMD Instinct MI210");
}

TEST_CASE("the key scan of a gzip file obeys the decompression-bomb bound", "[formats][robust]") {
  // No telling key in the first 4 kB, so the registry scans the keys: 300 MiB of spaces inside a
  // "metadata" string, compressed about 1000x, is refused naming the file, not read to its end.
  fs::path d = tmp("formats");
  fs::create_directories(d);
  const std::string path = (d / "bomb_meta.json.gz").string();
  gzFile f = gzopen(path.c_str(), "wb9");
  REQUIRE(f);
  gzputs(f, "{\"metadata\": \"");
  std::string chunk(1 << 20, ' ');
  for (int i = 0; i < 300; ++i) gzwrite(f, chunk.data(), static_cast<unsigned>(chunk.size()));
  gzputs(f, "\", \"traceEvents\": []}");
  gzclose(f);
  try {
    load_trace(path);
    FAIL("a decompression bomb was read");
  } catch (const InputError& e) { CHECK_THAT(e.what(), Catch::Contains(path) && Catch::Contains("decompression bomb")); }
}

namespace {

// Sets an environment variable for a scope, restoring it after.
class EnvVar {
 public:
  EnvVar(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvVar() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  EnvVar(const EnvVar&) = delete;
  EnvVar& operator=(const EnvVar&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A stand-in for `nsys`: its `export --output FILE` runs `body` with $out set to FILE.
std::string fake_nsys(const fs::path& dir, const std::string& body) {
  const fs::path p = dir / "nsys";
  // It checks what bneck asks for (exit 9 otherwise): `export --type sqlite ... --output FILE REPORT`,
  // both paths absolute, the report readable.
  std::ofstream(p.string())
      << "#!/bin/sh\n[ \"$1\" = export ] || exit 9\nout=\"\"; type=\"\"; last=\"\"\n"
         "while [ $# -gt 0 ]; do case \"$1\" in --output) out=\"$2\";; --type) type=\"$2\";; esac; last=\"$1\"; shift; done\n"
         "[ \"$type\" = sqlite ] || exit 9\ncase \"$out\" in /*) ;; *) exit 9;; esac\n"
         "case \"$last\" in /*) [ -r \"$last\" ] || exit 9;; *) exit 9;; esac\n"
      << body << "\n";
  fs::permissions(p, fs::perms::owner_all);
  return p.string();
}

}  // namespace

TEST_CASE("an Nsight Systems report (.nsys-rep) reads through its SQLite export", "[formats][nsys]") {
  const fs::path d = tmp_dir() / "nsys_report";
  fs::remove_all(d);
  fs::create_directories(d / "bin");
  fs::create_directories(d / "tmp");
  EnvVar tmpdir("TMPDIR", (d / "tmp").string());
  // A report's first bytes, as Nsight Systems 2025.5 writes them; the rest is its own encoding.
  const std::string report = (d / "run.nsys-rep").string();
  std::ofstream(report, std::ios::binary) << "NVIDIA Tegra Profiler Report 2025@5@2@266-25523669300" << std::string(64, '\x01');
  fs::permissions(report, fs::perms::owner_read);  // read-only: only read
  SECTION("no nsys: the error line gives the command that exports it") {
    EnvVar nsys("BNECK_NSYS", (d / "bin" / "missing").string());
    try {
      load_trace(report);
      FAIL("a report read without nsys");
    } catch (const InputError& e) {
      CHECK_THAT(e.what(), Catch::StartsWith(report + ": Nsight Systems report; no nsys at BNECK_NSYS") &&
                               Catch::Contains("nsys export --type sqlite run.nsys-rep"));
    }
    // The CLI: exit code 2, one line, nothing on stdout.
    Run r = run("info '" + report + "'");
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK_THAT(r.err, Catch::Contains(report) && Catch::Contains("nsys export --type sqlite"));
    CHECK(r.out.empty());
    // An older report (.qdrep) whose header this build does not know: by its name.
    const std::string old = (d / "old.qdrep").string();
    std::ofstream(old, std::ios::binary) << std::string(256, '\x02');
    CHECK_THROWS_WITH(load_trace(old), Catch::Contains("Nsight Systems report; no nsys"));
    // A gzip-compressed report: nsys cannot read it.
    const std::string gz = (d / "run.nsys-rep.gz").string();
    if (gzFile f = gzopen(gz.c_str(), "wb")) {
      gzputs(f, "NVIDIA Tegra Profiler Report 2025@5@2");
      gzclose(f);
    }
    CHECK_THROWS_WITH(load_trace(gz), Catch::StartsWith(gz) && Catch::Contains("gzip-compressed Nsight Systems report"));
  }
  SECTION("nsys exports it: the trace is the export's, the temporary folder removed") {
    EnvVar nsys("BNECK_NSYS", fake_nsys(d / "bin", "cp '" + demo_trace() + "' \"$out\""));
    const Trace via = load_trace(report);
    const Trace direct = load_trace(demo_trace());
    REQUIRE(via.ops.size() == direct.ops.size());
    CHECK(via.ops.size() > 100);
    bool same = true;
    for (std::size_t i = 0; i < via.ops.size(); ++i)
      same = same && via.ops[i].start == direct.ops[i].start && via.ops[i].duration() == direct.ops[i].duration();
    CHECK(same);
    CHECK(via.format == direct.format);
    CHECK(via.source == report);  // named as given, not by the removed export
    CHECK(fs::is_empty(d / "tmp"));
    Run r = run("info '" + report + "'");
    CHECK(r.code == 0);
    CHECK_THAT(r.out, Catch::StartsWith("trace   " + report + "\n"));
  }
  SECTION("no temporary folder: one line naming the report") {
    EnvVar nsys("BNECK_NSYS", fake_nsys(d / "bin", "cp '" + demo_trace() + "' \"$out\""));
    EnvVar gone("TMPDIR", (d / "no_such_folder").string());
    CHECK_THROWS_WITH(load_trace(report), Catch::StartsWith(report) && Catch::Contains("no temporary folder"));
  }
  SECTION("nsys fails: its exit and first line, naming the report") {
    EnvVar nsys("BNECK_NSYS", fake_nsys(d / "bin", "echo 'ERROR: the report is corrupt' >&2\nexit 3"));
    CHECK_THROWS_WITH(load_trace(report), Catch::StartsWith(report) && Catch::Contains("failed (exit 3: ERROR: the report is corrupt)"));
    CHECK(fs::is_empty(d / "tmp"));
  }
  SECTION("a bad export is said of the report, however long the temporary folder's name") {
    const std::string whole = slurp(demo_trace());
    const std::string cut = (d / "cut.sqlite").string();
    std::ofstream(cut, std::ios::binary) << whole.substr(0, 150000);
    EnvVar nsys("BNECK_NSYS", fake_nsys(d / "bin", "cp '" + cut + "' \"$out\""));
    CHECK_THROWS_WITH(load_trace(report), Catch::StartsWith(report + " (its SQLite export)") && Catch::Contains("truncated"));
    CHECK(fs::is_empty(d / "tmp"));
    // A long TMPDIR makes the importer's own line shorten its path: the report is still named.
    const fs::path deep = d / "tmp" / std::string(80, 't');
    fs::create_directories(deep);
    EnvVar long_tmp("TMPDIR", deep.string());
    CHECK_THROWS_WITH(load_trace(report), Catch::StartsWith(report + " (its SQLite export)"));
    CHECK(fs::is_empty(deep));
  }
  SECTION("a folder of ranks: reports exported, a report beside its own export read once") {
    const fs::path ranks = d / "ranks";
    fs::create_directories(ranks);
    fs::copy_file(report, ranks / "rank0.nsys-rep");
    fs::copy_file(report, ranks / "rank1.nsys-rep");
    fs::copy_file(demo_trace(), ranks / "rank1.sqlite");  // rank 1 exported already: its report is not read
    fs::copy_file(report, ranks / "rank2.nsys-rep");
    EnvVar nsys("BNECK_NSYS", fake_nsys(d / "bin", "cp '" + demo_trace() + "' \"$out\""));
    const Trace one = load_trace(demo_trace());
    const Trace all = load_traces({ranks.string()});
    CHECK(all.ops.size() == 3 * one.ops.size());
    // With a failing nsys the folder fails on the reports it must export, not on rank 1's.
    EnvVar failing("BNECK_NSYS", fake_nsys(d / "bin", "exit 4"));
    CHECK_THROWS_WITH(load_traces({ranks.string()}), Catch::Contains("rank0.nsys-rep") && Catch::Contains("exit 4"));
    fs::remove(ranks / "rank0.nsys-rep");
    fs::remove(ranks / "rank2.nsys-rep");
    CHECK(load_traces({ranks.string()}).ops.size() == one.ops.size());
    CHECK(fs::is_empty(d / "tmp"));
  }
  SECTION("an export that is itself a report is not exported again") {
    EnvVar nsys("BNECK_NSYS", fake_nsys(d / "bin", "cp '" + report + "' \"$out\""));
    CHECK_THROWS_WITH(load_trace(report), Catch::Contains("where its SQLite export was expected"));
    CHECK(fs::is_empty(d / "tmp"));
  }
}

TEST_CASE("the public Nsight Systems reports (2021-2025) are known as reports, and read through their exports", "[formats][extended]") {
  // Six .nsys-rep files of other people's runs (RTX 2070 SUPER, 3060, 3090): each was "unrecognised
  // trace format"; without an nsys each now gets the line with the command. One folder holds a
  // report beside its own export (report1.sqlite): the folder reads the export once, the report not
  // exported.
  const fs::path base = fs::path(extra_dir()) / "traces/nsys";
  if (!fs::exists(base)) {
    WARN("no " << base << ": skipped");
    return;
  }
  EnvVar nsys("BNECK_NSYS", (tmp_dir() / "no_nsys_here").string());
  int reports = 0;
  for (const auto& e : fs::recursive_directory_iterator(base)) {
    if (e.path().extension() != ".nsys-rep") continue;
    ++reports;
    INFO(e.path());
    CHECK_THROWS_WITH(load_trace(e.path().string()),
                      Catch::Contains(e.path().filename().string() + ": Nsight Systems report; no nsys") &&
                          Catch::EndsWith("`nsys export --type sqlite " + e.path().filename().string() + "`"));
  }
  CHECK(reports == 6);
  const fs::path folder = base / "p4arth_vecadd_rtx3060";
  const fs::path copy = tmp_dir() / "p4arth_reports";
  fs::remove_all(copy);
  fs::create_directories(copy);
  for (const char* f : {"report1.nsys-rep", "report1.sqlite"}) fs::copy_file(folder / f, copy / f);
  const Trace t = load_traces({copy.string()});
  CHECK(t.ops.size() == load_trace((folder / "report1.sqlite").string()).ops.size());
  CHECK(t.ops.size() > 0);
}

TEST_CASE("a large gzip file inflated beside its reader gives zlib's bytes and zlib's errors", "[formats][errors]") {
  // 10 MB of text (over the 8 MB from which a gzip file is inflated on a thread of its own, by
  // ISA-L's igzip where bneck was built with it, zlib reading again whatever that did not read
  // whole): every variant gives what read_whole (zlib alone) gives, the bytes or the error.
  std::string text;
  std::uint64_t x = 88172645463325252ULL;
  while (text.size() < (std::size_t{10} << 20)) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    text += "{\"ph\": \"X\", \"name\": \"k" + std::to_string(x % 5000) + "\", \"ts\": " + std::to_string(x % 100000) + "},\n";
  }
  auto gzip_file = [&](const std::string& tag, std::size_t split) { return slurp(write_gzip(text, tag, split)); };
  auto outcome = [](const std::string& path, bool growing) {
    try {
      if (!growing) {
        const WholeFile w = read_whole(path, 64);
        return std::string(w.data.get(), w.size);
      }
      GrowingFile g(path, 64);
      const std::string_view head = g.upto(1 << 20);  // read while it inflates, as an importer does
      const WholeFile& w = g.whole();
      CHECK(std::string_view(w.data.get(), head.size()) == head);
      return std::string(w.data.get(), w.size);
    } catch (const InputError& e) { return std::string("error: ") + e.what(); }
  };
  // Two members: the trailer sizes the buffer by the last one, so a first member under 64 kB leaves
  // room for both (zlib reads on where the fast inflate stopped at the second member).
  const std::string one = gzip_file("gz_one.json.gz", text.size()), two = gzip_file("gz_two.json.gz", text.size() / 3),
                    small_first = gzip_file("gz_small_first.json.gz", 30000);
  std::string bad_crc = one, bad_size = one, garbage = one + "trailing bytes", truncated = one.substr(0, one.size() * 2 / 3);
  bad_crc[bad_crc.size() - 6] ^= 0x55;
  bad_size[bad_size.size() - 4] ^= 0x01;  // ISIZE off by one: still plausible, so the buffer is sized from it
  for (const auto& [tag, bytes] : std::vector<std::pair<std::string, std::string>>{{"one member", one},
                                                                                   {"two members", two},
                                                                                   {"a small first member", small_first},
                                                                                   {"bad CRC", bad_crc},
                                                                                   {"bad ISIZE", bad_size},
                                                                                   {"trailing bytes", garbage},
                                                                                   {"truncated", truncated}}) {
    INFO(tag);
    const std::string path = write_temp(bytes, "gz_variant.json.gz");
    const std::string want = outcome(path, false);
    CHECK(outcome(path, true) == want);
    if (tag == "one member" || tag == "two members" || tag == "a small first member") CHECK(want == text);
    if (tag == "bad CRC" || tag == "truncated") CHECK_THAT(want, Catch::StartsWith("error: ") && Catch::Contains("gzip stream"));
  }
}

TEST_CASE("finalize orders ops by start, kind and lane whatever runs the importer appended", "[formats][ir]") {
  // A thread's launches and a few streams' kernels, appended in `runs` ordered runs (an nsys export:
  // its API calls, then its kernels; a Kineto trace: one run per lane or many), with equal starts
  // between runs. Whatever the runs (two: a merge; a few: a heap over runs; past 64: lanes grouped),
  // the order is that of a stable sort by (start, kind, lane), and links and dependencies follow
  // their ops.
  for (const std::size_t runs : {std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{100}}) {
    INFO(runs << " runs");
    Trace t;
    t.source = "finalize";
    t.strings.intern("k");
    t.devices.push_back(Device{});
    t.processes.push_back(Process{});
    t.lanes.push_back(Lane{LaneKind::Thread, 0, kNone, 1, "main"});
    for (std::uint32_t s = 0; s < 3; ++s) t.lanes.push_back(Lane{LaneKind::Stream, 0, 0, s + 7, "s"});
    constexpr std::size_t kOps = 600;
    std::vector<Op> made;
    for (std::size_t i = 0; i < kOps; ++i) {
      Op o;
      o.kind = i % 2 == 0 ? OpKind::Api : OpKind::Kernel;
      o.lane = o.kind == OpKind::Api ? 0 : static_cast<LaneId>(1 + (i / 2) % 3);
      o.start = static_cast<TimeNs>((i * 7919) % 97) * 1000 + (i % 5 == 0 ? 0 : 3);  // repeats: ties
      o.set_duration(500);
      made.push_back(o);
    }
    // The runs: the ops cut into `runs` pieces, each piece sorted by start (stable).
    std::vector<std::size_t> order(kOps);
    std::iota(order.begin(), order.end(), 0);
    for (std::size_t r = 0; r < runs; ++r) {
      auto b = order.begin() + static_cast<std::ptrdiff_t>(r * kOps / runs),
           e = order.begin() + static_cast<std::ptrdiff_t>((r + 1) * kOps / runs);
      std::stable_sort(b, e, [&](std::size_t x, std::size_t y) { return made[x].start < made[y].start; });
    }
    for (std::size_t k = 0; k < kOps; ++k) t.ops.push_back(made[order[k]]);
    // Each kernel launched by the API call made just before it; a dependency from op 3 to op 10.
    std::vector<OpId> pos(kOps);
    for (std::size_t k = 0; k < kOps; ++k) pos[order[k]] = static_cast<OpId>(k);
    for (std::size_t i = 1; i < kOps; i += 2) t.ops[pos[i]].link = pos[i - 1];
    t.deps.push_back(ExplicitDep{pos[3], pos[10], DepType::EndToStart, 0});
    // What finalize must give: the ops as appended, stably sorted by (start, kind, lane).
    std::vector<std::size_t> want(order);
    std::stable_sort(want.begin(), want.end(), [&](std::size_t x, std::size_t y) {
      const Op &a = made[x], &b = made[y];
      if (a.start != b.start) return a.start < b.start;
      if (a.kind != b.kind) return a.kind < b.kind;
      return a.lane < b.lane;
    });
    t.finalize();
    REQUIRE(t.ops.size() == kOps);
    std::vector<OpId> at(kOps);  // made index -> final position
    for (std::size_t k = 0; k < kOps; ++k) {
      const Op& o = t.ops[k];
      const Op& w = made[want[k]];
      CHECK(o.start == w.start);
      CHECK(o.kind == w.kind);
      CHECK(o.lane == w.lane);
      at[want[k]] = static_cast<OpId>(k);
    }
    for (std::size_t i = 1; i < kOps; i += 2) CHECK(t.ops[at[i]].link == at[i - 1]);
    CHECK(t.deps[0].from == at[3]);
    CHECK(t.deps[0].to == at[10]);
  }
}
