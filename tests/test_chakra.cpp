// Chakra and PyTorch execution traces.
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

namespace {
// Protobuf wire format by hand: a varint, and a length-delimited field.
std::string varint(std::uint64_t v) {
  std::string s;
  do {
    unsigned char c = v & 0x7F;
    v >>= 7;
    s += static_cast<char>(c | (v ? 0x80 : 0));
  } while (v);
  return s;
}
std::string field_varint(int f, std::uint64_t v) { return varint(static_cast<std::uint64_t>(f) << 3) + varint(v); }
std::string field_bytes(int f, const std::string& b) { return varint((static_cast<std::uint64_t>(f) << 3) | 2) + varint(b.size()) + b; }
std::string et_node(std::uint64_t id, const std::string& name, int type, std::vector<std::uint64_t> data, std::uint64_t us, bool cpu) {
  std::string n = field_varint(1, id) + field_bytes(2, name) + field_varint(3, static_cast<std::uint64_t>(type));
  std::string packed;
  for (auto d : data) packed += varint(d);
  if (!data.empty()) n += field_bytes(5, packed);
  n += field_varint(7, us);
  n += field_bytes(10, field_bytes(1, "is_cpu_op") + field_varint(7, cpu ? 1 : 0));  // int32_val
  return varint(n.size()) + n;
}
}  // namespace

TEST_CASE("Chakra execution traces: JSON and protobuf nodes replay by their dependencies", "[chakra]") {
  // A CPU op (300 us) feeds a GPU GEMM (40 us) and a CPU c10d op (80 us); an all-reduce (25 us) needs
  // both. Independent CPU op 9 (500 us) runs beside them (the host runs any number at once). GPU span:
  // GEMM 300..340 us, all-reduce after the c10d op at 380 us .. 405 us: 105 us; the whole run ends at
  // 500 us (op 9).
  const char* json_text = R"({"workload_graph": [
    {"Id": 1, "Name": "aten::cat", "NodeType": 4, "runtime": 300, "data_deps": [], "is_cpu_op": true},
    {"Id": 2, "Name": "sm90_gemm", "NodeType": 4, "runtime": 40, "data_deps": [1], "is_cpu_op": false},
    {"Id": 3, "Name": "c10d::allreduce_", "NodeType": 7, "runtime": 80, "data_deps": [1], "is_cpu_op": true},
    {"Id": 4, "Name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "NodeType": 7, "runtime": 25, "data_deps": [2, 3], "is_cpu_op": false},
    {"Id": 9, "Name": "dataloader", "NodeType": 4, "runtime": 500, "data_deps": [], "is_cpu_op": true}]})";
  std::string jp = tmp("chakra.json");
  std::ofstream(jp) << json_text;
  std::string ep = tmp("chakra.0.et");
  {
    std::string meta = field_bytes(1, "0.0.4");
    std::ofstream f(ep, std::ios::binary);
    f << varint(meta.size()) << meta << et_node(1, "aten::cat", 4, {}, 300, true) << et_node(2, "sm90_gemm", 4, {1}, 40, false)
      << et_node(3, "c10d::allreduce_", 7, {1}, 80, true) << et_node(4, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7, {2, 3}, 25, false)
      << et_node(9, "dataloader", 4, {}, 500, true);
  }
  for (const auto& p : {jp, ep}) {
    INFO(p);
    Trace t = load_trace(p);
    CHECK(!t.measured);
    auto r = replay(std::move(t));
    TimeNs gpu_begin = std::numeric_limits<TimeNs>::max(), gpu_end = 0, end = 0;
    for (OpId i = 0; i < r.trace.ops.size(); ++i) {
      end = std::max(end, r.sim.end[i]);
      if (!is_device_op(r.trace.ops[i].kind)) continue;
      gpu_begin = std::min(gpu_begin, r.sim.start[i]);
      gpu_end = std::max(gpu_end, r.sim.end[i]);
    }
    CHECK(gpu_begin == 300'000);
    CHECK(gpu_end == 405'000);
    CHECK(end == 500'000);
    Overlap ov = compute_overlap(r.graph, sim_schedule(r.sim));
    CHECK(ov.communication_ns == 25'000);
  }
  // A cut protobuf names the file and the byte.
  std::string cut = tmp("cut.et");
  {
    std::ifstream in(ep, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << all.substr(0, all.size() - 7);
  }
  CHECK_THROWS_WITH(load_trace(cut), Catch::Contains(cut) && Catch::Contains("byte"));
  for (const auto& f : {jp, ep, cut}) std::remove(f.c_str());
}

TEST_CASE("the Chakra and PyTorch execution traces of $BNECK_EXTRA_TRACES import", "[chakra][extended]") {
  // chakra's test data: the same graph as JSON and as protobuf; both replay to the same span.
  std::string dir = tmp("chakra_tests");
  std::string cmd = "mkdir -p '" + dir + "' && tar xzf '" + extra_dir() + "/traces/chakra/mlcommons_chakra_tests/json_trace.tar.gz' -C '" +
                    dir + "' && tar xzf '" + extra_dir() + "/traces/chakra/mlcommons_chakra_tests/feeder_tests_trace.tar.gz' -C '" + dir +
                    "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto span = [](const std::string& p) {
    auto r = replay(load_trace(p));
    TimeNs e = 0;
    for (OpId i = 0; i < r.trace.ops.size(); ++i) e = std::max(e, r.sim.end[i]);
    return std::make_pair(r.trace.ops.size(), e);
  };
  auto js = span(dir + "/jsonData/chakra.0.json");
  auto pb = span(dir + "/tests/data/chakra.0.et");
  CHECK(js.first == 3664);
  CHECK(pb.first == 3664);
  CHECK(std::fabs(static_cast<double>(js.second - pb.second)) <= 0.001 * static_cast<double>(js.second));
  CHECK(span(dir + "/jsonData/small_chakra.0.json").first == 7);
  std::system(("rm -rf '" + dir + "'").c_str());
  // PyTorch execution traces: operators and their tensor dependencies (no durations in them).
  for (const char* f :
       {"/traces/chakra/param_pytorch_et/resnet_1gpu_et.json.gz", "/traces/chakra/param_pytorch_et/resnet_2gpu_et.json.gz",
        "/traces/chakra/param_pytorch_et/resnet_et.json.gz", "/traces/kineto/param_dlrm_8rank_v100/dlrm_pytorch_et/dlrm_eg_0.json",
        "/traces/kineto/hta/execution_trace/benchmark_simple_add_et.json.gz",
        "/traces/kineto/param_single_gpu_rtx2080ti/linear_et.json.gz"}) {
    INFO(f);
    Trace t = load_trace(extra_dir() + f);
    CHECK(t.ops.size() > 10);
    CHECK(t.deps.size() > 0);
    CHECK(t.format.rfind("pytorch-et", 0) == 0);
  }
}
