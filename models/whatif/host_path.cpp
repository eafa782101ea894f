#include "models/whatif/host_path.hpp"

#include "sim/base/regex.hpp"

namespace bneck {

const char* host_term(ApiClass c) {
  switch (c) {
    case ApiClass::Launch:
    case ApiClass::GraphLaunch: return "kernel launches";
    case ApiClass::MemcpyAsync:
    case ApiClass::MemcpySync: return "copy calls";
    case ApiClass::EventRecord:
    case ApiClass::StreamWait: return "event calls";
    case ApiClass::StreamSync:
    case ApiClass::EventSync:
    case ApiClass::DeviceSync: return "synchronization waits";
    case ApiClass::Other: break;
  }
  return "other runtime calls";
}

HostTermOf::HostTermOf(const Trace& t) : t_(t), allocation_(t.strings.size(), 0) {
  const std::string sel = kAllocationSelector;
  const Regex re(sel.substr(sel.find('~') + 1));
  std::vector<char> seen(t.strings.size(), 0);
  for (const Op& o : t.ops)
    if (o.kind == OpKind::Api && o.name < seen.size() && !seen[o.name]) {
      seen[o.name] = 1;
      allocation_[o.name] = re.search(t.strings.str(o.name));
    }
}

const char* HostTermOf::operator()(const Op& o) const {
  if (o.kind == OpKind::Api && o.name < allocation_.size() && allocation_[o.name]) return kAllocationCalls;
  return host_term(o.api_class());
}

TimeNs HostOnPath::host() const {
  TimeNs h = 0;
  for (const auto& [k, v] : terms) h += v;
  return h;
}

std::string HostOnPath::note() const {
  const TimeNs h = host();
  if (path_ns <= 0 || h * 4 < path_ns) return "";
  const auto top = std::max_element(terms.begin(), terms.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  auto pct = [&](TimeNs v) { return format_share(static_cast<double>(v) / static_cast<double>(path_ns)); };
  return "the host holds " + pct(h) + " of the critical path; " + top->first + " dominate (" + pct(top->second) + ")";
}

HostOnPath host_on_path(const Graph& g, const SimResult& sim, const std::vector<OpId>& path) {
  HostOnPath h;
  const HostTermOf term(*g.trace);
  std::vector<OpId> nodes;
  for (OpId n : path)
    if (n < g.num_nodes()) nodes.push_back(n);
  h.path_ns = walk_path(sim, std::move(nodes), [&](OpId n, TimeNs gap, TimeNs own) {
    if (g.kind(n) != OpKind::Api) return;
    if (gap > 0) h.terms[kBetweenCalls] += gap;
    const OpId o = g.origin(n);
    h.terms[o == kNone || o >= g.num_trace_nodes() ? "host work a change added" : term(g.trace->ops[o])] += own;
  });
  return h;
}

}  // namespace bneck
