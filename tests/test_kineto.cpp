// PyTorch profiler (Kineto) import, multi-rank traces and collectives.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unistd.h>

#include "helpers.hpp"
#include "sim/base/error.hpp"
#include "traces/collectives.hpp"
#include "traces/importer.hpp"
#include "traces/kineto/kineto_importer.hpp"
#include "models/collective.hpp"
#include "tools/views/replay_view.hpp"
#include "tools/views/whatif_view.hpp"

using namespace bneck;
using namespace bneck::test;

TEST_CASE("Kineto timestamps: float microseconds to integer nanoseconds from the text", "[kineto]") {
  CHECK(kineto_us_to_ns("1694128201427784") == 1'694'128'201'427'784'000);
  // 16 significant digits: a double would round the last one.
  CHECK(kineto_us_to_ns("5080223672997.205") == 5'080'223'672'997'205);
  CHECK(kineto_us_to_ns("0.5") == 500);
  CHECK(kineto_us_to_ns("12.0004") == 12'000);  // below a nanosecond: rounded
  CHECK(kineto_us_to_ns("12.0005") == 12'001);
  CHECK(kineto_us_to_ns("1.5e3") == 1'500'000);
  CHECK(kineto_us_to_ns("-2.5E-1") == -250);
  // 20 mantissa digits would overflow the integer path; with an exponent the value is 1234.5678 us.
  CHECK(kineto_us_to_ns("12345678000000000000e-16") == 1'234'568);
  CHECK_THROWS_AS(kineto_us_to_ns("12a"), InputError);
  CHECK_THROWS_AS(kineto_us_to_ns("1e300"), InputError);  // 1e303 ns: past the 64-bit range
  CHECK_THROWS_AS(kineto_us_to_ns("99999999999999999999"), InputError);
}

TEST_CASE("Kineto integers past 64 bits: valid JSON, read as doubles, and a timestamp that large refused", "[kineto][errors]") {
  // A correlation id of 24 digits does not fit 64 bits; JSON allows it and the trace still imports.
  const std::string big_id = write_temp(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5,)"
                                        R"("args":{"stream":7,"correlation":123456789012345678901234,"device":0}}]})",
                                        "big_id.json");
  CHECK(load_trace(big_id).device_op_count() == 1);
  // A timestamp of 22 digits (1.2e21 us = 1.2e24 ns) is past the 64-bit nanosecond range: refused with its place.
  const std::string big_ts =
      write_temp(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1234567890123456789012,"dur":5,)"
                 R"("args":{"stream":7,"correlation":1,"device":0}}]})",
                 "big_ts.json");
  CHECK_THROWS_WITH(load_trace(big_ts), Catch::Contains(big_ts) && Catch::Contains("out of range"));
}

TEST_CASE("Kineto events of a phase not read are passed over after their ph", "[kineto]") {
  // A flow event ("s"/"f", 2 of every 5 events of a profile) is not read past its "ph": a
  // timestamp out of range inside one is not looked at, the same one in a complete event ("X")
  // is refused; a "ph" after the other members passes nothing over.
  const std::string flow = write_temp(R"({"traceEvents":[{"ph":"s","id":1,"pid":0,"tid":7,"ts":1234567890123456789012,"cat":"ac2g"},)"
                                      R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5,)"
                                      R"("args":{"stream":7,"correlation":1,"device":0}}]})",
                                      "flow_skip.json");
  CHECK(load_trace(flow).device_op_count() == 1);
  const std::string late_ph = write_temp(R"({"traceEvents":[{"cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5,)"
                                         R"("args":{"stream":7,"correlation":1,"device":0},"ph":"X"},)"
                                         R"({"pid":0,"tid":7,"ts":1234567890123456789012,"ph":"f","cat":"ac2g"}]})",
                                         "late_ph.json");
  CHECK_THROWS_WITH(load_trace(late_ph), Catch::Contains("out of range"));
  const std::string x_flow =
      write_temp(R"({"traceEvents":[{"ph":"X","id":1,"pid":0,"tid":7,"ts":1234567890123456789012,"cat":"ac2g"}]})", "x_big_ts.json");
  CHECK_THROWS_WITH(load_trace(x_flow), Catch::Contains("out of range"));
}

TEST_CASE("Kineto Python frames: the first noted with its name, the later ones counted unread", "[kineto]") {
  // with_stack profiles are mostly python_function events; the ones after the first are counted
  // after their category (a timestamp out of range in one is not looked at), the note keeps the
  // first as its example; instant events' args are not read either.
  const std::string py =
      write_temp(R"({"traceEvents":[)"
                 R"({"ph":"X","cat":"python_function","name":"a.py(1): f","pid":1,"tid":1,"ts":1,"dur":9,"args":{"Python id":1}},)"
                 R"({"ph":"X","cat":"python_function","name":"b.py(2): g","pid":1,"tid":1,"ts":2,"dur":5,"args":{"Python id":2}},)"
                 R"({"ph":"X","cat":"python_function","name":"c.py(3): h","pid":1,"tid":1,"ts":1234567890123456789012,"dur":1},)"
                 R"({"ph":"i","cat":"cpu_instant_event","name":"[memory]","pid":1,"tid":1,"ts":3,"args":{"Bytes":[1,2]}},)"
                 R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10,"dur":5,"args":{"stream":7,"correlation":1,"device":0}}]})",
                 "python_frames.json");
  const Trace t = load_trace(py);
  CHECK(t.device_op_count() == 1);
  const auto& note = t.anomalies.at(kKinetoStackNote);
  CHECK(note.count == 3);
  CHECK(note.example == "event 1 (a.py(1): f)");
  CHECK(t.anomalies.at(kKinetoMemoryNote).count == 1);
}

TEST_CASE("Kineto input errors name the file and the place", "[kineto][errors]") {
  std::string good = rank_trace(0, 100, 700);
  std::ifstream in(good);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string cut = tmp("cut.json");
  std::ofstream(cut) << text.substr(0, text.size() / 2);
  CHECK_THROWS_WITH(load_trace(cut), Catch::Contains(cut) && Catch::Contains("malformed JSON at byte"));
  // A gzip file cut short.
  const std::string gz = write_gzip(text, "t.json.gz");
  const std::string gtext = slurp(gz);
  Trace ok = load_trace(gz);  // the whole gzip file imports as the plain one does
  CHECK(ok.ops.size() == load_trace(good).ops.size());
  // Two gzip members (the trailer's size is the last one's only: the buffer grows past it).
  CHECK(load_trace(write_gzip(text, "t2.json.gz", text.size() - 10)).ops.size() == ok.ops.size());
  std::string gcut = tmp("cut.json.gz");
  std::ofstream(gcut, std::ios::binary) << gtext.substr(0, gtext.size() * 2 / 3);
  CHECK_THROWS_WITH(load_trace(gcut), Catch::Contains(gcut));
  // Valid JSON that is no Kineto trace.
  std::string other = tmp("other.json");
  std::ofstream(other) << R"({"schemaVersion": 1, "something": []})";
  CHECK_THROWS_WITH(load_trace(other), Catch::Contains(other) && Catch::Contains("traceEvents"));
  // A timestamp that is not a number.
  std::string badts = tmp("badts.json");
  std::ofstream(badts) << R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon", "dur": 1}]})";
  CHECK_THROWS_WITH(load_trace(badts), Catch::Contains(badts) && Catch::Contains("event 1"));
  for (const auto& f : {good, cut, gz, gcut, other, badts}) std::remove(f.c_str());
}

TEST_CASE("canonical kernel names agree across nsys and Kineto spellings", "[kineto]") {
  CHECK(canonical_kernel_name("void at::native::vectorized_elementwise_kernel<(int)4, at::native::<unnamed>::f>(int, float)") ==
        canonical_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::f>(int, float)"));
  CHECK(canonical_kernel_name("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int)") ==
        "at::native::anon::vectorized_layer_norm_kernel");
  CHECK(canonical_kernel_name("Memset (Device)") == "memset");
  CHECK(canonical_kernel_name("memset") == "memset");
  CHECK(canonical_kernel_name("Memcpy DtoD (Device -> Device)") == "memcpy DtoD");
}

TEST_CASE("every Kineto and Chakra trace in $BNECK_EXTRA_TRACES imports", "[kineto][extended]") {
  const std::string k = extra_dir() + "/traces/kineto/";
  for (const char* f :
       {"hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz", "hta/nccl_parser_config/nccl_data.json.gz",
        "hta/df_index_resolver/df_index_resolver.json.gz", "hta/negative_queue_length_values_check/rank0.json.gz",
        "hta/trace_diff/control/control.json.gz", "hta/trace_diff/test/test.json.gz",
        "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
        "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
        "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
        "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
        "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz", "hta/execution_trace/benchmark_simple_add_trace.json.gz",
        "hta/triton_example/triton_example.json.gz", "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "param_single_gpu_rtx2080ti/linear_kineto.json.gz", "param_single_gpu_rtx2080ti/resnet_kineto.json.gz"}) {
    INFO(f);
    Trace t;
    REQUIRE_NOTHROW(t = load_trace(k + f));
    CHECK(t.device_op_count() > 0);
    ReplayReport rep = run_replay(t, ReplayOptions{});
    double e = std::fabs(static_cast<double>(rep.simulated.length() - rep.measured.length())) /
               static_cast<double>(std::max<TimeNs>(1, rep.measured.length()));
    CHECK(e <= 0.02);
  }
}

TEST_CASE("block_fp32 from Kineto: step spans within 1 %, the same critical path as its nsys export", "[kineto][extended]") {
  Trace k = load_trace(h200("block_fp32.kineto.json.gz"));
  ReplayOptions opt;
  opt.range_regex = "step.*";
  ReplayReport rk = run_replay(k, opt);
  // Measured step spans ($BNECK_EXTRA_TRACES/traces/h200/README.md): 109.64 / 109.52 / 109.56 ms.
  const double want[] = {109.64e6, 109.52e6, 109.56e6};
  REQUIRE(rk.ranges.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(rk.ranges[i].name);
    CHECK(std::fabs(static_cast<double>(rk.ranges[i].measured_span_ns) - want[i]) <= 0.0005 * want[i]);
    CHECK(std::fabs(static_cast<double>(rk.ranges[i].simulated_span_ns) - want[i]) <= 0.01 * want[i]);
  }
  // The nsys export of the same workload (a separate run): its step1's critical path has the same
  // device ops in the same order, once names are spelled alike.
  Trace n = load_trace(h200("block_fp32.sqlite"));
  opt.range_regex = "step1";
  ReplayReport rn = run_replay(n, opt);
  opt.range_regex = "step1";
  ReplayReport rk1 = run_replay(k, opt);
  auto device_path = [](const Trace& t, const std::vector<OpId>& p) {
    std::vector<std::string> v;
    for (OpId o : p)
      if (is_device_op(t.ops[o].kind)) v.push_back(canonical_kernel_name(t.name(t.ops[o])));
    return v;
  };
  REQUIRE(rn.ranges.size() == 1);
  REQUIRE(rk1.ranges.size() == 1);
  auto a = device_path(n, rn.ranges[0].critical_path), b = device_path(k, rk1.ranges[0].critical_path);
  CHECK(a.size() > 100);
  CHECK(a == b);
  // Model mode from the profiler's Input Dims: within 15 % of the measured steps (3.97 % here).
  ReplayOptions mo;
  mo.range_regex = "step.*";
  mo.hw = "h200-sxm";
  mo.durations = "model";
  mo.durations_explicit = true;
  ReplayReport rm = run_replay(k, mo);
  REQUIRE(rm.ranges.size() == 3);
  for (const auto& r : rm.ranges)
    CHECK(std::fabs(static_cast<double>(r.simulated_span_ns - r.measured_span_ns)) <= 0.15 * static_cast<double>(r.measured_span_ns));
}

TEST_CASE("Kineto Input Dims: a tensor list gives one shape per tensor", "[kineto]") {
  std::string p = tmp("dims.json");
  std::ofstream(p) << R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::_foreach_add_", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
     "args": {"Input Dims": [[[2048, 2048], [2048]], [[2048, 2048], [2048]]], "Input type": ["TensorList", "TensorList"]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 20, "dur": 10,
     "args": {"Input Dims": [[64, 128], [128, 32]], "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 21, "dur": 2, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 25, "dur": 3, "args": {"correlation": 1, "stream": 7, "device": 0}}]})";
  Trace t = load_trace(p);
  std::vector<std::string> names;
  for (const auto& r : t.ranges) names.push_back(t.strings.str(r.name));
  CHECK(std::find(names.begin(), names.end(), "aten::_foreach_add_, sizes = [[2048, 2048], [2048], [2048, 2048], [2048]]") != names.end());
  CHECK(std::find(names.begin(), names.end(), "aten::mm, sizes = [[64, 128], [128, 32]]") != names.end());
  std::remove(p.c_str());
}

TEST_CASE("HTA's critical-path golden test: the same GPU ops, and the runtime calls explained", "[kineto][extended][critical]") {
  const std::string dir = extra_dir() + "/traces/kineto/hta/critical_path/end_to_end/simple_add";
  Trace t = load_trace(dir + "/input/trace.json.gz");
  ReplayReport rep = run_replay(t, ReplayOptions{});
  // HTA's expected output marks its critical events with args.critical.
  gzFile f = gzopen((dir + "/output/overlaid_critical_path_trace.json.gz").c_str(), "rb");
  REQUIRE(f);
  std::string text;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  auto j = nlohmann::json::parse(text);
  std::set<std::pair<std::string, TimeNs>> hta_dev, hta_api, ours_dev, ours_api;
  for (const auto& e : j["traceEvents"]) {
    if (!e.contains("args") || !e["args"].contains("critical") || e.value("ph", "") != "X") continue;
    std::string cat = e.value("cat", "");
    auto key = std::make_pair(e["name"].get<std::string>(), static_cast<TimeNs>(std::llround(e["ts"].get<double>())));
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") hta_dev.insert(key);
    if (cat == "cuda_runtime" || cat == "cuda_driver") hta_api.insert(key);
  }
  TimeNs first_gpu = rep.measured.begin, last_gpu = rep.measured.end;
  for (OpId o : rep.critical_path) {
    auto key = std::make_pair(t.name(t.ops[o]), t.ops[o].start / 1000);
    (is_device_op(t.ops[o].kind) ? ours_dev : ours_api).insert(key);
  }
  // GPU ops: identical (22: 16 copies, 5 kernels, 1 memset).
  CHECK(hta_dev.size() == 22);
  CHECK(ours_dev == hta_dev);
  // Runtime calls: every one of HTA's inside bneck's window (first to last GPU op; HTA's path also
  // covers the host work before and after it) is on bneck's path too. bneck's path has more: HTA's
  // graph walks cpu_op nodes and drops runtime calls that neither launch nor synchronize
  // (cudaDeviceGetAttribute, cudaStreamWaitEvent ...), which bneck keeps in host order.
  std::size_t inside = 0, common = 0;
  for (const auto& k : hta_api) {
    if (k.second * 1000 < first_gpu - 1000 || k.second * 1000 > last_gpu) continue;
    ++inside;
    common += ours_api.count(k);
  }
  CHECK(inside >= 230);
  CHECK(common == inside);
}

TEST_CASE("a Chrome trace as a bare array of events, legacy ProfilerStep ops, and a range that matches nothing", "[kineto][formats]") {
  // The legacy profiler (PyTorch 1.8, export_chrome_trace): the events alone in an array, host ops on
  // a "CPU functions" row without a category; ProfilerStep#N among them are the steps.
  const std::string legacy = write_temp(
      R"([{"name": "ProfilerStep#1", "ph": "X", "ts": 10.0, "dur": 100.0, "tid": 1, "pid": "CPU functions", "args": {}},
 {"name": "aten::mm", "ph": "X", "ts": 20.0, "dur": 30.5, "tid": 1, "pid": "CPU functions", "args": {}},
 {"name": "ProfilerStep#2", "ph": "X", "ts": 120.0, "dur": 90.0, "tid": 1, "pid": "CPU functions", "args": {}},
 {"name": "cudaLaunchKernel", "ph": "X", "cat": "cuda_runtime", "ts": 130, "dur": 5, "tid": 1, "pid": 1, "args": {"correlation": 3}},
 {"name": "gemm", "ph": "X", "cat": "kernel", "ts": 140, "dur": 50, "tid": 7, "pid": 0, "args": {"correlation": 3, "stream": 7, "device": 0}}])",
      "legacy_array.json");
  const Trace t = load_trace(legacy);
  CHECK(t.format == "kineto-json");
  REQUIRE(t.ranges.size() == 2);  // the two steps; aten::mm without shapes is no range
  CHECK(t.strings.str(t.ranges[0].name) == "ProfilerStep#1");
  CHECK(t.ranges[1].end - t.ranges[1].start == 90'000);
  CHECK(t.device_op_count() == 1);
  CHECK(t.anomalies.count("kineto: a bare array of events (no traceEvents object)") == 1);
  // A modern trace whose ProfilerStep is an op ("cat": "Operator", PyTorch 1.9).
  const std::string op =
      write_temp(R"({"traceEvents": [{"name": "ProfilerStep#7", "ph": "X", "cat": "Operator", "ts": 5, "dur": 50, "tid": 1, "pid": 1}]})",
                 "operator_step.json");
  REQUIRE(load_trace(op).ranges.size() == 1);
  // --range matching nothing: said on stderr.
  Run r = run("replay '" + demo_trace() + "' --range 'nothing.*'");
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("--range 'nothing.*' matches no range of"));
}

namespace {
// A Kineto document of `events` launch + kernel pairs and op ranges, with strings and args that
// look like element boundaries ("}, {" in names, arrays of objects in args) and many device
// properties after the events.
std::string big_kineto(int events) {
  std::string s = R"({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8}, "traceEvents": [)";
  s += "\n";
  char b[512];
  for (int i = 0; i < events; ++i) {
    const long long ts = 1'000'000 + 10LL * i;
    std::snprintf(
        b, sizeof b,
        R"(  {"ph": "X", "cat": "cpu_op", "name": "aten::mm}, {%d", "pid": 7, "tid": 7, "ts": %lld.125, "dur": 6.5, "args": {"Input Dims": [[%d, 64], [64, 32]], "Input type": ["float", "float"]}},)"
        "\n",
        i % 5, ts, 1 + i % 9);
    s += b;
    std::snprintf(
        b, sizeof b,
        R"(  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": %lld.250, "dur": 2.0, "args": {"correlation": %d, "note": "\"}, {\"ph\": \"X\"}"}},)"
        "\n",
        ts, i + 1);
    s += b;
    std::snprintf(
        b, sizeof b,
        R"(  {"ph": "X", "cat": "kernel", "name": "gemm_%d}, {", "pid": 0, "tid": 7, "ts": %lld.5, "dur": 3.25, "args": {"correlation": %d, "stream": 7, "device": 0, "grid": [%d, 1, 1], "block": [128, 1, 1], "nest": [{"a": 1}, {"b": "}, {"}]}})",
        i % 3, ts + 3, i + 1, 1 + i % 200);
    s += b;
    s += i + 1 < events ? ",\n" : "\n";
  }
  // 30,000 device entries after the events (1.9 MB: a guess past the events' end lands among them).
  s += R"(], "deviceProperties": [)";
  for (int d = 0; d < 30'000; ++d) {
    std::snprintf(b, sizeof b, R"(%s{"id": %d, "name": "NVIDIA H200", "numSms": 132})", d ? ",\n  " : "", d);
    s += b;
  }
  s += R"(], "traceName": "x"})";
  return s;
}

// The error importing `text` (written to a temporary file named after `tag`) gives, or "no error".
std::string import_error(const std::string& text, const std::string& tag, const ImportOptions& opt) {
  const std::string p = write_temp(text, tag);
  try {
    (void)load_trace(p, opt);
  } catch (const InputError& e) { return std::string(e.what()); }
  return std::string("no error");
}

std::string fingerprint(const Trace& t) {
  std::string f =
      std::to_string(t.ops.size()) + " ops, " + std::to_string(t.ranges.size()) + " ranges, " + std::to_string(t.lanes.size()) + " lanes\n";
  for (const Op& o : t.ops)
    f += std::to_string(o.start) + " " + std::to_string(o.duration()) + " " + std::to_string(o.lane) + " " + std::to_string(o.link) + " " +
         std::to_string(o.extra) + " " + t.strings.str(o.name) + "\n";
  for (const Range& r : t.ranges) f += std::to_string(r.start) + " " + std::to_string(r.end) + " " + t.strings.str(r.name) + "\n";
  for (const Device& d : t.devices) f += d.name + " " + std::to_string(d.sm_count) + "\n";
  for (const Process& p : t.processes) f += std::to_string(p.rank) + "\n";
  for (const auto& [what, n] : t.anomalies) f += what + " " + std::to_string(n.count) + " " + n.example + "\n";
  return f;
}
}  // namespace

TEST_CASE("a large Kineto document read in pieces gives the trace and the errors of the whole walk", "[kineto][errors]") {
  // 30,000 x 3 events: 11 MB, over the 8 MB from which the events are read in pieces of 256 kB.
  const std::string doc = big_kineto(30'000);
  REQUIRE(doc.size() > (std::size_t{9} << 20));
  ImportOptions whole;
  whole.json_pieces = false;
  const std::string path = write_temp(doc, "pieces.json");
  const Trace a = load_trace(path), b = load_trace(path, whole);
  CHECK(a.device_op_count() == 30'000);
  CHECK(a.ranges.size() == 30'000);
  REQUIRE(a.devices.size() == 1);
  CHECK(a.devices[0].sm_count == 132);  // the properties after the events
  CHECK(a.processes.at(a.ops[0].lane == kNone ? 0 : a.lanes[a.ops[0].lane].process).rank == 3);
  CHECK(fingerprint(a) == fingerprint(b));
  // Gzipped: inflated on a thread beside the pieces' reading, the same trace; two members (the
  // trailer's size is the last one's: the buffer is too small, read again whole) and a truncated
  // stream give the same trace and the same error as without pieces.
  CHECK(fingerprint(load_trace(write_gzip(doc, "pieces.json.gz"))) == fingerprint(b));
  CHECK(fingerprint(load_trace(write_gzip(doc, "pieces2.json.gz", doc.size() / 3))) == fingerprint(b));
  {
    const std::string bytes = slurp(write_gzip(doc, "pieces3.json.gz"));
    const std::string cut = write_temp(bytes.substr(0, bytes.size() * 3 / 4), "pieces_cut.json.gz");
    std::string ea, eb;
    try {
      (void)load_trace(cut);
    } catch (const InputError& e) { ea = e.what(); }
    try {
      (void)load_trace(cut, whole);
    } catch (const InputError& e) { eb = e.what(); }
    CHECK_THAT(ea, Catch::Contains("truncated gzip stream"));
    CHECK(ea == eb);
  }
  // Malformed late in the document: the same message either way (the piece that fails is read again whole).
  auto error_of = [](const std::string& text, const ImportOptions& opt) { return import_error(text, "pieces_bad.json", opt); };
  const std::size_t late = doc.find("\"ts\": ", doc.size() * 3 / 4);
  std::string comma = doc;  // the comma between two events removed
  comma.erase(comma.find("},\n", late) + 1, 1);
  std::string ts = doc;  // a timestamp past the 64-bit nanosecond range
  ts.replace(late + 6, 1, "99999999999999999");
  std::string cut = doc.substr(0, doc.size() * 2 / 3);  // truncated
  for (const std::string* bad : {&comma, &ts, &cut}) {
    const std::string e = error_of(*bad, {});
    CHECK_THAT(e, Catch::Contains("pieces_bad.json"));
    CHECK(e == error_of(*bad, whole));
  }
  CHECK_THAT(error_of(ts, {}), Catch::Contains("out of range"));
  // Single bytes changed at fixed pseudo-random places past the first piece: the same outcome
  // (the same trace, or the same error) either way.
  std::uint64_t x = 88172645463325252ULL;
  for (int k = 0; k < 12; ++k) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::string bad = doc;
    const std::size_t at = (std::size_t{1} << 20) + x % (bad.size() - (std::size_t{1} << 20));
    bad[at] = ",]}\":{ 0"[x / 7 % 8];
    const std::string p = write_temp(bad, "pieces_byte.json");
    std::string fa, fb;
    try {
      fa = fingerprint(load_trace(p));
    } catch (const InputError& e) { fa = e.what(); }
    try {
      fb = fingerprint(load_trace(p, whole));
    } catch (const InputError& e) { fb = e.what(); }
    CHECK(fa == fb);
  }
}

TEST_CASE("a large Kineto document read on two threads gives the trace, the notes and the errors of one", "[kineto][errors]") {
  // Rounds of 300 kB to 5 MB (the default is 2 MB): the second thread's parts start at guesses
  // that fall inside strings ("}, {" in names and args) and past the events (the device list after
  // them); every reading gives the fingerprint of the whole walk.
  const std::string doc = big_kineto(30'000);
  ImportOptions whole, one;
  whole.json_pieces = false;
  one.json_round = 0;
  const std::string path = write_temp(doc, "rounds.json");
  const std::string want = fingerprint(load_trace(path, whole));
  CHECK(fingerprint(load_trace(path, one)) == want);
  for (std::size_t kb : {300, 1024, 2048, 5120}) {
    INFO(kb << " kB rounds");
    ImportOptions two;
    two.json_round = kb << 10;
    CHECK(fingerprint(load_trace(path, two)) == want);
  }
  // Python frames (with_stack) after the first are passed over once one is noted, which the second
  // thread cannot know: here the first comes late (in a second thread's part for most round sizes),
  // some have "ph" after their category and name (never passed over), some no timestamp (counted
  // when passed over, dropped when read), and module frames are ranges: the notes (their counts and
  // first example) and ranges as one thread reads them.
  std::string py = R"({"traceEvents": [)";
  char b[512];
  const int n = 60'000;
  for (int i = 0; i < n; ++i) {
    const long long ts = 1'000'000 + 10LL * i;
    std::snprintf(
        b, sizeof b,
        R"(%s  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": %lld, "dur": 2, "args": {"correlation": %d}},
  {"ph": "X", "cat": "kernel", "name": "k%d}, {", "pid": 0, "tid": 7, "ts": %lld, "dur": 3, "args": {"correlation": %d, "stream": 7, "device": 0}})",
        i ? ",\n" : "\n", ts, i + 1, i % 4, ts + 2, i + 1);
    py += b;
    if (i > n * 3 / 5 && i % 3 == 0) {
      const char* form[] = {
          R"(,
  {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1520): _call_impl}, {", "pid": 7, "tid": 7, "ts": %lld, "dur": 1})",
          R"(,
  {"cat": "python_function", "name": "f%d.py(3): g", "ph": "X", "pid": 7, "tid": 7, "ts": %lld, "dur": 1})",
          R"(,
  {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear_%d", "pid": 7, "tid": 7, "ts": %lld, "dur": 1})",
          R"(,
  {"ph": "X", "cat": "python_function", "name": "h%d.py(9): no_ts", "pid": 7, "tid": 7, "dur": 1})"};
      const int f = i / 3 % 4;
      if (f == 0)
        std::snprintf(b, sizeof b, form[0], ts + 1);
      else if (f == 3)
        std::snprintf(b, sizeof b, form[3], i % 7);
      else
        std::snprintf(b, sizeof b, form[f], i % 7, ts + 1);
      py += b;
    }
  }
  py += "\n]}";
  REQUIRE(py.size() > (std::size_t{9} << 20));
  const std::string ppath = write_temp(py, "rounds_py.json");
  const Trace pw = load_trace(ppath, whole);
  CHECK(pw.ranges.size() > 1000);  // the module frames
  CHECK_THAT(fingerprint(pw), Catch::Contains("python"));
  CHECK(fingerprint(load_trace(ppath, one)) == fingerprint(pw));
  for (std::size_t kb : {300, 700, 2048}) {
    INFO(kb << " kB rounds");
    ImportOptions two;
    two.json_round = kb << 10;
    CHECK(fingerprint(load_trace(ppath, two)) == fingerprint(pw));
  }
  // Errors in the second thread's parts: said as one thread says them (its event number included).
  auto error_of = [](const std::string& text, const ImportOptions& opt) { return import_error(text, "rounds_bad.json", opt); };
  for (double where : {0.3, 0.55, 0.8}) {
    const std::size_t at = doc.find("\"ts\": ", static_cast<std::size_t>(static_cast<double>(doc.size()) * where));
    std::string ts = doc;
    ts.replace(at + 6, 1, "99999999999999999");
    std::string comma = doc;
    comma.erase(comma.find("},\n", at) + 1, 1);
    for (const std::string* bad : {&ts, &comma}) {
      const std::string e = error_of(*bad, whole);
      CHECK_THAT(e, Catch::Contains("rounds_bad.json"));
      for (std::size_t kb : {300, 2048}) {
        ImportOptions two;
        two.json_round = kb << 10;
        CHECK(error_of(*bad, two) == e);
      }
    }
  }
  // Single bytes changed at pseudo-random places: the same trace or the same error.
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  ImportOptions small;
  small.json_round = 300 << 10;
  for (int k = 0; k < 10; ++k) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::string bad = doc;
    bad[(std::size_t{1} << 20) + x % (bad.size() - (std::size_t{1} << 20))] = ",]}\":{ 0"[x / 7 % 8];
    const std::string p = write_temp(bad, "rounds_byte.json");
    std::string fa, fb;
    try {
      fa = fingerprint(load_trace(p, small));
    } catch (const InputError& e) { fa = e.what(); }
    try {
      fb = fingerprint(load_trace(p, whole));
    } catch (const InputError& e) { fb = e.what(); }
    CHECK(fa == fb);
  }
}
