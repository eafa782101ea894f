#include "validate/describe.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "models/access.hpp"
#include "models/retarget.hpp"
#include "models/sharing.hpp"
#include "models/whatif/transform.hpp"
#include "sim/engine/engine.hpp"

namespace bneck {

namespace {

// Builds a workload call by call: each call starts when the previous one ended on the host thread;
// its device op is placed at the call's start (the engine, not these times, schedules it).
class WorkloadBuilder {
 public:
  WorkloadBuilder(const Measurement& m, const HwSpec& hw) : hw_(hw) {
    Trace& t = w_.trace;
    t.source = "microbenchmark " + m.family + "/" + m.name;
    t.format = "bneck-validate";
    t.measured = false;
    Device d;
    d.name = hw.gpu.name;
    d.sm_count = hw.gpu.sm_count;
    t.devices.push_back(d);
    t.processes.push_back({0, "bneck_validate", kNone});
    Lane host;
    host.kind = LaneKind::Thread;
    host.name = "host";
    t.lanes.push_back(host);
  }
  LaneId stream(std::uint32_t k) {
    while (streams_.size() <= k) {
      Lane s;
      s.kind = LaneKind::Stream;
      s.device = 0;
      s.native_id = streams_.size();
      s.name = "stream " + std::to_string(streams_.size());
      streams_.push_back(static_cast<LaneId>(w_.trace.lanes.size()));
      w_.trace.lanes.push_back(s);
    }
    return streams_[k];
  }
  // A kernel launched by a call lasting `call_ns`, starting `delay` after the call began.
  OpId kernel(const std::string& name, const LaunchConfig& lc, const KernelWork& work, TimeNs call_ns, TimeNs delay, std::uint32_t s = 0) {
    Trace& t = w_.trace;
    OpId api = call("cudaLaunchKernel", ApiClass::Launch, call_ns);
    Op k;
    k.kind = OpKind::Kernel;
    k.start = t.ops[api].start;
    k.name = t.strings.intern(name);
    k.lane = stream(s);
    k.link = api;
    k.extra = static_cast<std::uint32_t>(t.kernels.size());
    t.kernels.push_back(lc);
    return device_op(k, work, delay);
  }
  OpId copy(const CopyInfo& ci, TimeNs call_ns, TimeNs delay) {
    Trace& t = w_.trace;
    OpId api = call("cudaMemcpyAsync", ApiClass::MemcpyAsync, call_ns);
    Op c;
    c.kind = OpKind::Memcpy;
    c.start = t.ops[api].start;
    c.name = t.strings.intern("memcpy");
    c.lane = stream(0);
    c.link = api;
    c.extra = static_cast<std::uint32_t>(t.copies.size());
    t.copies.push_back(ci);
    return device_op(c, KernelWork{}, delay);
  }
  // Times every device op by the replay's models on the spec, and wraps the calls in one range.
  MicrobenchWorkload finish(MicrobenchWorkload::Window window, double per = 1, bool cuda_graph = false) {
    Trace& t = w_.trace;
    Range r;
    r.start = 0;
    r.end = host_t_;
    r.name = t.strings.intern("microbenchmark");
    r.lane = 0;
    t.ranges.push_back(r);
    t.finalize();
    RetargetCostModel model(t, hw_, hw_, DurationMode::Model, WorkTable(w_.work));
    for (OpId i = 0; i < t.ops.size(); ++i)
      if (is_device_op(t.ops[i].kind)) t.ops[i].set_duration(model.device_time(i));
    w_.window = window;
    w_.per = per;
    w_.cuda_graph = cuda_graph;
    return std::move(w_);
  }
  MicrobenchWorkload& workload() { return w_; }

 private:
  OpId call(const char* name, ApiClass cls, TimeNs dur) {
    Trace& t = w_.trace;
    Op a;
    a.kind = OpKind::Api;
    a.start = host_t_;
    a.set_duration(dur);
    a.name = t.strings.intern(name);
    a.lane = 0;
    a.set_api_class(cls);
    host_t_ += std::max<TimeNs>(dur, 1);
    t.ops.push_back(a);
    w_.work.emplace_back();
    w_.launch_delay.push_back(0);
    return static_cast<OpId>(t.ops.size() - 1);
  }
  OpId device_op(const Op& o, const KernelWork& work, TimeNs delay) {
    w_.trace.ops.push_back(o);
    w_.work.push_back(work);
    w_.launch_delay.push_back(delay);
    return static_cast<OpId>(w_.trace.ops.size() - 1);
  }
  const HwSpec& hw_;
  MicrobenchWorkload w_;
  std::vector<LaneId> streams_;
  TimeNs host_t_ = 0;
};

LaunchConfig launch_of(double blocks, double threads, Bytes smem = 0) {
  LaunchConfig lc;
  lc.set_grid(0, static_cast<std::uint64_t>(std::max(1.0, blocks)));
  lc.block[0] = static_cast<std::uint16_t>(std::clamp(threads, 1.0, 1024.0));
  lc.dynamic_smem = static_cast<std::uint32_t>(smem);
  return lc;
}

// A memory-bound kernel reading `read` and writing `written` bytes with `width`-byte accesses.
KernelWork streaming(double read, double written, double width, double flops, MemLevel level = MemLevel::Hbm) {
  KernelWork w;
  w.cls = KernelClass::Elementwise;
  w.bytes = read + written;
  w.read_bytes = read;
  w.flops = flops;
  w.access_width = static_cast<Bytes>(width);
  w.level = level;
  w.from_shapes = true;
  return w;
}

// cuBLAS's launch configuration is not recorded: 128 x 128 output tiles of 256 threads, one block
// per SM at a time (the shared memory of an SM), so that the GEMM occupies whole waves of tiles.
LaunchConfig gemm_launch(const Measurement& m, const GpuSpec& g) {
  double M = m.params.value("m", 0.0), N = m.params.value("n", 0.0);
  return launch_of(std::ceil(M / 128) * std::ceil(N / 128), 256, g.shared_memory_per_block ? g.shared_memory_per_block : 0);
}

}  // namespace

double gemm_grid_factor(const Measurement& m, const GpuSpec& g) {
  if (m.params.value("m", 0.0) <= 0 || m.params.value("n", 0.0) <= 0 || g.sm_count == 0) return 1.0;
  return grid_scaling(gemm_launch(m, g), g).compute;
}

std::optional<MicrobenchWorkload> describe_microbenchmark(const Measurement& m, const HwSpec& hw) {
  const GpuSpec& g = hw.gpu;
  using W = MicrobenchWorkload::Window;
  WorkloadBuilder b(m, hw);
  const TimeNs call = g.host_launch_overhead, latency = g.launch_latency;
  const double blocks = m.params.value("blocks", 0.0), threads = m.params.value("threads", 256.0);
  const double width = m.params.value("width_bytes", 4.0);
  if (m.family == "stream") {  // one element per thread: copy and scale read one array, add and triad two
    double array = m.params.value("array_bytes", m.bytes / 2);
    b.kernel(m.name, launch_of(blocks, threads), streaming(m.bytes - array, array, width, m.flops), call, latency);
    return b.finish(W::Events);
  }
  if (m.family == "reduction") {  // reads only
    b.kernel(m.name, launch_of(blocks, threads), streaming(m.bytes, 0, width, m.flops), call, latency);
    return b.finish(W::Events);
  }
  if (m.family == "l2") {  // 20 back-to-back copies of an L2-resident array, timed together
    double array = m.params.value("array_bytes", m.bytes / 2);
    for (int k = 0; k < 20; ++k)
      b.kernel(m.name, launch_of(blocks, threads), streaming(array, array, width, m.flops, MemLevel::L2), call, latency);
    return b.finish(W::Events, 20);
  }
  if (m.family == "strided") {
    // The coalescing model: each warp of 32 threads reads `sectors` 32-byte sectors through the
    // caches (at the 4-byte load rate) and 64-byte segments from DRAM (at the streaming rate of
    // wide loads): the read traffic is the binding one, in bytes at the 4-byte rate. Writes are dense.
    double n = m.params.value("elems", 0.0), stride = m.params.value("stride", 1.0);
    Coalescing co = coalesce(4, static_cast<std::uint32_t>(stride));
    double sectors = n / 32.0 * static_cast<double>(co.bytes_moved), dram = n / 32.0 * static_cast<double>(co.dram_bytes_moved);
    double read = std::max(sectors, dram * g.access_efficiency_for(4) / g.access_efficiency_for(16));
    b.kernel(m.name, launch_of(blocks, threads), streaming(read, 4.0 * n, 4, m.flops), call, latency);
    return b.finish(W::Events);
  }
  if (m.family == "softmax") {
    // Fused: each row read once and written once. What sets the achievable bandwidth is the bytes a
    // thread has in flight: 8 independent 4-byte loads per thread = 32 B, past the widest class.
    b.kernel(m.name, launch_of(m.params.value("rows", 1.0), threads), streaming(m.bytes / 2, m.bytes / 2, 16, m.flops), call, latency);
    return b.finish(W::Events);
  }
  if (m.family == "fused") {  // a chain of kernels, each reading one array and writing one
    double k = std::max(1.0, m.params.value("kernels", 1.0)), n = m.params.value("elems", 0.0);
    for (int i = 0; i < static_cast<int>(k); ++i)
      b.kernel(m.name, launch_of(std::ceil(n / 256), 256), streaming(m.bytes / k / 2, m.bytes / k / 2, width, m.flops / k), call, latency);
    return b.finish(W::Events);
  }
  if (m.family == "gemm") {
    auto d = dtype_from_string(m.params.value("dtype", "fp32"));
    KernelWork w;
    w.cls = KernelClass::Gemm;
    w.dtype = d ? *d : Dtype::FP32;
    w.unit = m.params.value("dtype", "fp32") == "fp32" ? ComputeUnit::Simt : g.best_unit(w.dtype);
    w.flops = m.flops;
    w.bytes = w.read_bytes = m.bytes;
    w.access_width = 16;
    w.from_shapes = true;
    // A cuBLAS call timed with events: the library's host work and launch (the fit's `submit`)
    // before the kernel starts.
    auto it = g.gemm_fit.find(w.dtype);
    TimeNs before = it != g.gemm_fit.end() ? it->second.submit : latency;
    b.kernel(m.name, gemm_launch(m, g), w, call, before);
    return b.finish(W::Events);
  }
  if (m.family == "launch") {  // empty kernels: a tail each
    auto n = static_cast<int>(std::max(1.0, m.params.value("kernels", 1.0)));
    KernelWork empty;
    for (int k = 0; k < n; ++k) b.kernel("k_empty", launch_of(1, 32), empty, call, latency);
    if (m.name == "eager_host") return b.finish(W::Host);
    return b.finish(W::Events, 1, m.name == "graph_gpu");
  }
  if (m.family == "occupancy") {  // a 16-byte copy whose occupancy dynamic shared memory holds down
    double array = m.params.value("array_bytes", m.bytes / 2);
    auto smem = static_cast<Bytes>(std::max(16.0, m.params.value("smem_kib", 0.0) * 1024));
    b.kernel(m.name, launch_of(std::ceil(array / width / threads), threads, smem), streaming(array, array, width, m.flops), call, latency);
    return b.finish(W::Events);
  }
  if (m.family == "concurrency") {
    // `kernels` spin kernels (8 blocks of 64 threads, each thread a chain of `iters` dependent FMAs;
    // bneck_validate.cu) launched round-robin on `streams` streams; the engine runs the streams'
    // kernels side by side on the SMs they share.
    auto n = static_cast<std::uint32_t>(std::max(1.0, m.params.value("kernels", 8.0)));
    auto streams = static_cast<std::uint32_t>(std::max(1.0, m.params.value("streams", 1.0)));
    double iters = m.params.value("iters", 200000.0), grid = m.params.value("blocks", 8.0), block = m.params.value("threads", 64.0);
    KernelWork spin;
    spin.cls = KernelClass::Other;
    spin.flops = 2 * iters * grid * block;
    spin.chain_ops = iters;
    spin.from_shapes = true;
    for (std::uint32_t k = 0; k < n; ++k) b.kernel(m.name, launch_of(grid, block), spin, call, latency, k % streams);
    return b.finish(W::Events);
  }
  if (m.family == "memcpy") {
    std::string p = m.params.value("path", m.name);
    CopyInfo ci;
    ci.bytes = static_cast<Bytes>(m.params.value("size", m.bytes));
    ci.copy_kind = p.rfind("h2d", 0) == 0 ? MemcpyKind::HtoD : p.rfind("d2h", 0) == 0 ? MemcpyKind::DtoH : MemcpyKind::DtoD;
    MemKind host = p.find("pageable") != std::string::npos ? MemKind::Pageable : MemKind::Pinned;
    ci.src = ci.copy_kind == MemcpyKind::HtoD ? host : MemKind::Device;
    ci.dst = ci.copy_kind == MemcpyKind::DtoH ? host : MemKind::Device;
    if (m.params.contains("event_ns")) {  // timed on the device (CUPTI)
      b.copy(ci, call, 0);
      return b.finish(W::Device);
    }
    // Timed from the host with events (older files): the path's submission comes first.
    auto it = hw.node.copy_paths.find(p);
    b.copy(ci, call, it != hw.node.copy_paths.end() ? it->second.submit : 0);
    return b.finish(W::Events);
  }
  return std::nullopt;
}

double simulate_microbenchmark(const MicrobenchWorkload& w, const HwSpec& hw) {
  const Trace& t = w.trace;
  auto g = std::make_shared<Graph>(build_graph(t, GraphOptions{false}));
  const WorkTable work(w.work);
  enable_sharing(*g, hw, &work);  // concurrent kernels share the GPU's SMs and HBM, as in a replay
  // Each device op starts its launch delay after its call began.
  for (auto e : boost::make_iterator_range(boost::edges(g->csr))) {
    EdgeProps& p = g->csr[e];
    if (p.type() == EdgeType::Launch || p.type() == EdgeType::GraphLaunch) p.set_delay(w.launch_delay[boost::target(e, g->csr)]);
  }
  WhatIfEngine engine(t, g, hw);
  std::vector<Transform> transforms;
  if (w.cuda_graph) transforms.push_back(parse_transform("cuda-graph", ""));
  WhatIfCase c = engine.apply(transforms);
  SimResult sim = simulate(*c.graph, VectorCostModel(c.durations));
  TimeNs begin = std::numeric_limits<TimeNs>::max(), end = std::numeric_limits<TimeNs>::min();
  for (OpId i = 0; i < t.ops.size(); ++i) {
    bool dev = is_device_op(t.ops[i].kind);
    if (w.window == MicrobenchWorkload::Window::Device ? dev : !dev) begin = std::min(begin, sim.start[i]);
    if (w.window == MicrobenchWorkload::Window::Host ? !dev : dev) end = std::max(end, sim.end[i]);
  }
  return end > begin ? static_cast<double>(end - begin) / w.per : -1;
}

}  // namespace bneck
