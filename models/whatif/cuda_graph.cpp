// --cuda-graph[=SEL]. Model card: CUDA graph. In each selected region (each instance of the
//   selected NVTX ranges, or each top-level range), the host launch calls become one graph launch:
//   the first launch call takes the GPU spec's graph_launch_overhead, the other calls and the CPU
//   time between them take none (blocking syncs keep waiting); the first kernel starts
//   launch_latency after the graph launch, the others follow each other after graph_node_latency.
#include <algorithm>
#include <cmath>
#include <optional>
#include "sim/base/regex.hpp"

#include "models/whatif/transform.hpp"
#include "sim/analysis/analysis.hpp"
#include "sim/base/error.hpp"

namespace bneck {
namespace {

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
    std::vector<std::size_t> regions;
    for (std::size_t r = 0; r < ctx.trace.ranges.size(); ++r) {
      const std::string& name = ctx.trace.strings.str(ctx.trace.ranges[r].name);
      if (re ? re->search(name) : ctx.trace.ranges[r].depth == 0) regions.push_back(r);
    }
    Graph& g = c.edit_graph();
    const GpuSpec& spec = c.spec.gpu;
    std::size_t launches = 0;
    for (std::size_t r : regions) {
      std::vector<OpId> apis;
      idx.api_ops(r, apis);
      OpId last_launch = kNone;
      for (OpId a : apis) {
        ApiClass cls = ctx.trace.ops[a].api_class();
        if (cls == ApiClass::Launch || cls == ApiClass::GraphLaunch || cls == ApiClass::MemcpyAsync) last_launch = a;
      }
      if (last_launch == kNone) continue;
      for (OpId a : apis) {
        ApiClass cls = ctx.trace.ops[a].api_class();
        bool sync = cls == ApiClass::StreamSync || cls == ApiClass::EventSync || cls == ApiClass::DeviceSync || cls == ApiClass::MemcpySync;
        if (a == last_launch)
          c.durations[a] = spec.graph_launch_overhead;
        else if (!sync)
          c.durations[a] = 0;
        if (cls == ApiClass::Launch || cls == ApiClass::MemcpyAsync) ++launches;
        // No CPU time between the calls of a replayed graph.
        for (auto e : boost::make_iterator_range(boost::out_edges(a, g.csr)))
          if (g.csr[e].type() == EdgeType::HostOrder && boost::target(e, g.csr) != apis.front()) {
            OpId v = boost::target(e, g.csr);
            if (v != kNone && ctx.trace.ops[v].lane == ctx.trace.ops[a].lane && ctx.trace.ops[v].start <= ctx.trace.ranges[r].end)
              g.csr[e].set_delay(0);
          }
      }
      const std::vector<OpId> dev = idx.device_ops(r);  // sorted by id (binary-searched below)
      bool first = true;
      for (OpId d : dev) {
        const Op& o = ctx.trace.ops[d];
        if (o.link == kNone) continue;
        for (auto e : boost::make_iterator_range(boost::out_edges(o.link, g.csr)))
          if (boost::target(e, g.csr) == d && (g.csr[e].type() == EdgeType::Launch || g.csr[e].type() == EdgeType::GraphLaunch))
            g.csr[e].set_delay(first ? spec.launch_latency : 0);
        first = false;
      }
      // Consecutive device ops of the region on a stream follow each other after the node latency.
      for (std::size_t k = 0; k < dev.size(); ++k)
        for (auto e : boost::make_iterator_range(boost::out_edges(dev[k], g.csr)))
          if (g.csr[e].type() == EdgeType::StreamOrder && std::binary_search(dev.begin(), dev.end(), boost::target(e, g.csr)))
            g.csr[e].set_delay(spec.graph_node_latency);
    }
    c.log.push_back(text + ": " + std::to_string(regions.size()) + " regions replayed as CUDA graphs (" + std::to_string(launches) +
                    " launch calls -> " + std::to_string(regions.size()) + " graph launches of " +
                    format_duration(spec.graph_launch_overhead) + ", node gap " + format_duration(spec.graph_node_latency) + ")");
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
