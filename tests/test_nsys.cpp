#include <catch2/catch.hpp>

#include "helpers.hpp"
#include "traces/cuda_api.hpp"
#include "traces/nsys/nsys_importer.hpp"

using namespace bneck;
using namespace bneck::test;

namespace {
std::size_t count_kind(const Trace& t, OpKind k) {
  std::size_t n = 0;
  for (const Op& o : t.ops) n += o.kind == k;
  return n;
}
}  // namespace

TEST_CASE("API names lose their version suffix and are classified", "[nsys]") {
  CHECK(strip_api_suffix("cudaLaunchKernel_v7000") == "cudaLaunchKernel");
  CHECK(strip_api_suffix("cudaMemcpyAsync_ptsz") == "cudaMemcpyAsync");
  CHECK(strip_api_suffix("cudaMemcpyAsync_v3020_ptsz") == "cudaMemcpyAsync");
  CHECK(strip_api_suffix("cuGetProcAddress_v2") == "cuGetProcAddress");
  CHECK(strip_api_suffix("cuLaunchKernel") == "cuLaunchKernel");
  CHECK(classify_cuda_api("cudaLaunchKernel") == ApiClass::Launch);
  CHECK(classify_cuda_api("cuLaunchKernelEx") == ApiClass::Launch);
  CHECK(classify_cuda_api("cudaGraphLaunch") == ApiClass::GraphLaunch);
  CHECK(classify_cuda_api("cudaMemcpyAsync") == ApiClass::MemcpyAsync);
  CHECK(classify_cuda_api("cudaMemcpy") == ApiClass::MemcpySync);
  CHECK(classify_cuda_api("cudaStreamWaitEvent") == ApiClass::StreamWait);
  CHECK(classify_cuda_api("cudaEventRecordWithFlags") == ApiClass::EventRecord);
  CHECK(classify_cuda_api("cudaStreamSynchronize") == ApiClass::StreamSync);
  CHECK(classify_cuda_api("cuCtxSynchronize") == ApiClass::DeviceSync);
  CHECK(classify_cuda_api("cudaMalloc") == ApiClass::Other);
}

TEST_CASE("the bundled demo trace imports with its devices, streams, ranges and links", "[nsys]") {
  Trace t = load_trace(demo_trace());
  CHECK(t.format.rfind("nsys-sqlite 2025.3", 0) == 0);
  REQUIRE(t.devices.size() == 1);
  CHECK(t.devices[0].name == "NVIDIA H200");
  CHECK(t.devices[0].sm_count == 132);
  CHECK(t.devices[0].l2_bytes == 62914560);
  // 6 iterations x (produce, 2 axpy, 2 spin, 3 graph-node scale) = 48 kernels; 2 copies each.
  CHECK(count_kind(t, OpKind::Kernel) == 48);
  CHECK(count_kind(t, OpKind::Memcpy) == 12);
  CHECK(count_kind(t, OpKind::Memset) == 2);
  CHECK(t.ranges.size() == 12);  // iter0..5 and a nested "consumers" in each
  std::size_t nested = 0, linked = 0, graph_nodes = 0;
  for (const Range& r : t.ranges) nested += r.depth == 1;
  CHECK(nested == 6);
  for (const Op& o : t.ops) {
    if (is_device_op(o.kind) && o.link != kNone) ++linked;
    if (o.flags & Op::kFlagGraphNode) ++graph_nodes;
  }
  CHECK(linked == 62);       // every device op found its launching call
  CHECK(graph_nodes == 18);  // 3 nodes x 6 graph launches
  std::size_t waits = 0, records = 0;
  for (const Op& o : t.ops) {
    if (o.api_class() == ApiClass::StreamWait && t.api(o) && t.api(o)->has_event && t.api(o)->stream != kNone) ++waits;
    if (o.api_class() == ApiClass::EventRecord && t.api(o) && t.api(o)->stream != kNone) ++records;
  }
  CHECK(waits == 24);
  CHECK(records == 18);
  // Launch configurations are stored once each: produce and axpy launch 528 x 256, spin 8 x 64,
  // the graph's scale 264 x 256 (16 registers, no shared memory): 3 distinct over 48 kernels.
  CHECK(t.kernels.size() == 3);
  for (const Op& o : t.ops)
    if (o.kind == OpKind::Kernel && t.name(o) == "spin") CHECK((t.launch(o)->grid(0) == 8 && t.launch(o)->block[0] == 64));
}

TEST_CASE("the launch interner stores each distinct configuration once", "[nsys]") {
  std::vector<LaunchConfig> table;
  LaunchInterner in;
  LaunchConfig a, b;
  a.set_grid(0, 132);
  a.block[0] = 256;
  b = a;
  b.dynamic_smem = 1024;  // differs in one field
  CHECK(in.intern(table, a) == 0);
  CHECK(in.intern(table, b) == 1);
  CHECK(in.intern(table, a) == 0);
  REQUIRE(table.size() == 2);
  CHECK(table[1].dynamic_smem == 1024);
}

TEST_CASE("the public nsys exports of three schema versions import", "[nsys][extended]") {
  struct Case {
    const char* path;
    std::size_t kernels, memcpys, memsets;
    const char* version;
  };
  const Case cases[] = {
      {"dlprof_lenet_rtx2070s/nsys_profile.sqlite", 46, 12, 4, "2022.1"},
      {"dlprof_lenet_rtx2070s/w_Relu/nsys_profile.sqlite", 59, 13, 4, "2022.1"},
      {"memfusion_rtx3090_tensorrt/report1.sqlite", 36, 4, 0, "2023.1"},
      {"p4arth_vecadd_rtx3060/report1.sqlite", 1, 3, 0, "2025.5"},
  };
  for (const auto& c : cases) {
    INFO(c.path);
    Trace t = load_trace(extra_dir() + "/traces/nsys/" + c.path);
    CHECK(t.format.find(c.version) != std::string::npos);
    CHECK(count_kind(t, OpKind::Kernel) == c.kernels);
    CHECK(count_kind(t, OpKind::Memcpy) == c.memcpys);
    CHECK(count_kind(t, OpKind::Memset) == c.memsets);
    auto r = replay(std::move(t));
    Span m = device_span(r.graph, sim_schedule(r.sim));
    CHECK(m.length() > 0);
  }
  // TensorRT launches through both the runtime and the driver API (cudaLaunchKernel,
  // cuLaunchKernelEx) and names NVTX ranges via textId.
  Trace trt = load_trace(extra_dir() + "/traces/nsys/memfusion_rtx3090_tensorrt/report1.sqlite");
  std::size_t linked = 0;
  for (const Op& o : trt.ops) linked += o.kind == OpKind::Kernel && o.link != kNone && trt.ops[o.link].api_class() == ApiClass::Launch;
  CHECK(linked == 36);
  std::size_t driver = 0;
  for (const Op& o : trt.ops) driver += o.kind == OpKind::Kernel && o.link != kNone && trt.name(trt.ops[o.link]) == "cuLaunchKernelEx";
  CHECK(driver == 22);  // the other 14 through cudaLaunchKernel
  CHECK(trt.ranges.size() > 0);
  CHECK(trt.strings.str(trt.ranges[0].name).find("<") == std::string::npos);
}
