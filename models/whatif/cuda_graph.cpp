// --cuda-graph[=SEL]. Model card: CUDA graph. In each selected region (each instance of the
//   selected NVTX ranges, or each top-level range), the host launch calls become one graph launch:
//   the last launch call takes the GPU spec's graph_launch_overhead, the other calls and the CPU
//   time between them take none (blocking syncs keep waiting); the first kernel starts
//   launch_latency after the graph launch, the others follow each other after graph_node_latency.
//   A host synchronization cannot be captured (a stream or device synchronize, an event wait, a
//   blocking copy such as .item()): it splits the region into pieces, each its own graph; the
//   blocking copy keeps its call, and the host time after each synchronization (the program reading
//   what it waited for) stays.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string_view>
#include <unordered_map>
#include "sim/base/regex.hpp"

#include "models/whatif/host_path.hpp"
#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"
#include "sim/base/strings.hpp"

namespace bneck {
namespace {

// A call no graph replays: memory allocated or freed (not stream-ordered), streams, events and
// handles created or destroyed, device properties queried, modules loaded, the context set up, a
// captured graph instantiated.
// Setup a graph needs done before its capture; in a traced region (a first iteration, a benchmark
// that includes its start) it keeps its time: cudaDeviceGetStreamPriorityRange creating the context
// took 29.9 s of HTA's AlexNet benchmark trace, its cudaFree and cudaMalloc 8.5 s.
bool setup_call(std::string_view name) {
  const std::string n = ascii_lower(name);
  if (n.find("async") != std::string::npos) return false;  // stream-ordered allocation: captured
  for (const char* k : {"malloc", "free", "create", "destroy", "hostalloc", "hostregister", "getdeviceproperties", "streampriorityrange",
                        "moduleload", "libraryload", "setdevice", "devicereset", "primaryctx", "instantiate"})
    if (n.find(k) != std::string::npos) return true;
  return false;
}

class CudaGraph : public TransformStep {
 public:
  explicit CudaGraph(std::string sel) : sel_(std::move(sel)) {}
  void apply(const WhatIfContext& ctx, WhatIfCase& c) const override {
    // Regions: instances of the ranges the selector's range~ term names, else top-level ranges.
    std::optional<Regex> re;
    // The selector's range~ term: from "range~" (at the start or after '&') to the next '&'.
    for (std::size_t p = sel_.find("range~"); p != std::string::npos; p = sel_.find("range~", p + 1))
      if (p == 0 || sel_[p - 1] == '&') {
        std::size_t b = p + 6, e = sel_.find('&', b);
        re = Regex(sel_.substr(b, e == std::string::npos ? std::string::npos : e - b));
        break;
      }
    RangeIndex idx(ctx.trace);
    const std::vector<bool> in_capture = stream_capture_calls(ctx.trace);  // the calls of graphs being built
    std::vector<std::size_t> regions;
    for (std::size_t r = 0; r < ctx.trace.ranges.size(); ++r) {
      const std::string& name = ctx.trace.strings.str(ctx.trace.ranges[r].name);
      if (re ? re->search(name) : ctx.trace.ranges[r].depth == 0) regions.push_back(r);
    }
    Graph& g = c.edit_graph();
    const GpuSpec& spec = c.spec.gpu;
    std::size_t launches = 0, pieces = 0, held_ops = 0, setups = 0, captured = 0;
    TimeNs setup_ns = 0;
    for (std::size_t r : regions) {
      std::vector<OpId> apis;
      idx.api_ops(r, apis);
      // Pieces between host synchronizations; each piece's last launch call is its graph launch.
      auto is_sync = [&](OpId a) { return blocks_host(ctx.trace.ops[a].api_class()); };
      std::vector<bool> graph_launch(apis.size(), false);
      std::vector<std::uint32_t> piece(apis.size(), 0);
      std::vector<OpId> piece_launch;  // per piece: its graph launch call, kNone if it stays eager
      {
        OpId last = kNone;
        std::size_t last_k = 0, n = 0;
        for (std::size_t k = 0; k <= apis.size(); ++k) {
          if (k == apis.size() || is_sync(apis[k])) {
            // A piece of one launch (an .item()'s copy between two synchronizations) stays as it ran.
            if (n >= 2) graph_launch[last_k] = true;
            piece_launch.push_back(n >= 2 ? last : kNone);
            last = kNone;
            n = 0;
            if (k == apis.size()) break;
            piece[k] = static_cast<std::uint32_t>(piece_launch.size() - 1);
            continue;
          }
          piece[k] = static_cast<std::uint32_t>(piece_launch.size());
          const ApiClass cls = ctx.trace.ops[apis[k]].api_class();
          if (cls == ApiClass::Launch || cls == ApiClass::GraphLaunch || cls == ApiClass::MemcpyAsync) {
            last = apis[k];
            last_k = k;
            ++n;
          }
        }
      }
      if (std::all_of(piece_launch.begin(), piece_launch.end(), [](OpId a) { return a == kNone; })) continue;
      for (OpId a : piece_launch) pieces += a != kNone;
      // A stream capture in progress (cudaStreamBeginCapture .. EndCapture on one thread; vLLM's
      // and SGLang's graph-capture profiles): the program builds its graph there, its launches
      // record nodes and run nothing. A replay would not skip that work: it stays as it ran.
      // (CUDA and HIP spell both calls alike: cudaStreamBeginCapture, hipStreamBeginCapture.)
      std::vector<bool> capturing(apis.size(), false);
      for (std::size_t k = 0; k < apis.size(); ++k) capturing[k] = in_capture[apis[k]];
      for (std::size_t k = 0; k < apis.size(); ++k) {
        const OpId a = apis[k];
        ApiClass cls = ctx.trace.ops[a].api_class();
        const bool sync = is_sync(a);
        if (capturing[k]) {
          ++captured;
          continue;
        }
        if (!sync && piece_launch[piece[k]] == kNone) continue;  // an eager piece
        const bool setup = !sync && cls == ApiClass::Other && setup_call(ctx.trace.name(ctx.trace.ops[a]));
        if (setup) {
          ++setups;
          setup_ns += c.durations[a];
        }
        if (graph_launch[k])
          c.durations[a] = spec.graph_launch_overhead;
        else if (!sync && !setup)
          c.durations[a] = 0;
        if (cls == ApiClass::Launch || cls == ApiClass::MemcpyAsync) ++launches;
        if (sync) continue;  // the host time after a synchronization stays: the program reads what it waited for
        // No CPU time between the calls of a replayed graph.
        for (auto e : boost::make_iterator_range(boost::out_edges(a, g.csr)))
          if (g.csr[e].type() == EdgeType::HostOrder && boost::target(e, g.csr) != apis.front()) {
            OpId v = boost::target(e, g.csr);
            if (v != kNone && ctx.trace.ops[v].lane == ctx.trace.ops[a].lane && ctx.trace.ops[v].start <= ctx.trace.ranges[r].end)
              g.csr[e].set_delay(0);
          }
      }
      const std::vector<OpId> dev = idx.device_ops(r);   // sorted by id (binary-searched below)
      std::unordered_map<OpId, std::uint32_t> piece_of;  // each call's piece
      for (std::size_t k = 0; k < apis.size(); ++k) piece_of.emplace(apis[k], piece[k]);
      std::vector<bool> started(piece_launch.size(), false);
      for (OpId d : dev) {
        const Op& o = ctx.trace.ops[d];
        if (o.link == kNone) continue;
        const auto at = piece_of.find(o.link);
        const std::uint32_t p = at == piece_of.end() ? 0 : at->second;
        if (piece_launch[p] == kNone) continue;  // launched eagerly
        const bool held = g.waited_unknown(d);   // it waited for something the trace does not show: a graph waits too
        held_ops += held;
        for (auto e : boost::make_iterator_range(boost::out_edges(o.link, g.csr)))
          if (boost::target(e, g.csr) == d && (g.csr[e].type() == EdgeType::Launch || g.csr[e].type() == EdgeType::GraphLaunch))
            g.csr[e].set_delay(std::max(started[p] ? 0 : spec.launch_latency, held ? g.csr[e].delay() : 0));
        started[p] = true;
      }
      // Consecutive device ops of the region on a stream follow each other after the node latency.
      for (std::size_t k = 0; k < dev.size(); ++k)
        for (auto e : boost::make_iterator_range(boost::out_edges(dev[k], g.csr)))
          if (g.csr[e].type() == EdgeType::StreamOrder && std::binary_search(dev.begin(), dev.end(), boost::target(e, g.csr)))
            // An op held by an unresolved wait after its predecessor ended keeps that gap too.
            g.csr[e].set_delay(std::max(spec.graph_node_latency, g.waited_unknown(boost::target(e, g.csr)) ? g.csr[e].delay() : 0));
    }
    c.log.push_back(
        text + ": " + std::to_string(regions.size()) + " regions replayed as CUDA graphs (" + std::to_string(launches) +
        " launch calls -> " + std::to_string(pieces) + " graph launches" +
        (pieces > regions.size() ? ", host synchronizations splitting regions," : std::string()) + " of " +
        format_duration(spec.graph_launch_overhead) + ", node gap " + format_duration(spec.graph_node_latency) + ")" +
        (setups ? "; " + std::to_string(setups) +
                      " setup calls a graph does not replay (allocation, creation, device queries) keep their " + format_duration(setup_ns)
                : std::string()) +
        (captured ? "; " + std::to_string(captured) + " calls inside stream captures (the program building its graphs) keep their time"
                  : std::string()) +
        (held_ops ? "; " + std::to_string(held_ops) +
                        " device ops that waited for something the trace does not show (a stream wait it does not resolve) keep "
                        "their measured delay"
                  : std::string()));
  }

 private:
  std::string sel_;
};

std::unique_ptr<TransformStep> parse(const std::string& arg) { return std::make_unique<CudaGraph>(checked_selector(arg)); }

}  // namespace

extern const TransformDef kCudaGraphTransform{"cuda-graph", "SEL", TransformDef::Arg::Optional,
                                              "launches in each selected range (default: each top-level range) become one graph launch",
                                              parse};

}  // namespace bneck
