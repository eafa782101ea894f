#include "models/whatif/host_path.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

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

InputPipeline::InputPipeline(const Trace& t) {
  std::vector<char> is(t.strings.size(), 0), seen(t.strings.size(), 0);
  for (const Range& r : t.ranges) {
    if (r.structure || r.name >= is.size()) continue;
    if (!seen[r.name]) {
      seen[r.name] = 1;
      is[r.name] = t.strings.str(r.name).rfind("enumerate(DataLoader)#", 0) == 0;
    }
    if (is[r.name] && r.end > r.start) by_lane_[r.lane].emplace_back(r.start, r.end), ++count_;
  }
  for (auto& [lane, v] : by_lane_) {  // sorted and merged (a range inside another counts once)
    std::sort(v.begin(), v.end());
    std::size_t w = 0;
    for (std::size_t k = 1; k < v.size(); ++k)
      if (v[k].first <= v[w].second)
        v[w].second = std::max(v[w].second, v[k].second);
      else
        v[++w] = v[k];
    v.resize(w + 1);
  }
}

TimeNs InputPipeline::overlap(LaneId l, TimeNs a, TimeNs b) const {
  const auto it = by_lane_.find(l);
  if (it == by_lane_.end() || b <= a) return 0;
  const auto& v = it->second;
  TimeNs sum = 0;
  for (auto k = std::upper_bound(v.begin(), v.end(), std::make_pair(a, std::numeric_limits<TimeNs>::max())) - v.begin() - 1;
       k < static_cast<std::ptrdiff_t>(v.size()); ++k) {
    if (k < 0) continue;
    const auto& [s, e] = v[static_cast<std::size_t>(k)];
    if (s >= b) break;
    sum += std::max<TimeNs>(0, std::min(e, b) - std::max(s, a));
  }
  return sum;
}

std::vector<bool> stream_capture_calls(const Trace& t) {
  std::vector<bool> in(t.ops.size(), false);
  std::unordered_map<LaneId, bool> open;
  for (OpId i = 0; i < t.ops.size(); ++i) {
    const Op& o = t.ops[i];
    if (o.kind != OpKind::Api) continue;
    const std::string& n = t.name(o);
    bool& on = open[o.lane];
    if (n.find("StreamBeginCapture") != std::string::npos) on = true;
    in[i] = on;
    if (n.find("StreamEndCapture") != std::string::npos) on = false;
  }
  return in;
}

HostTermOf::HostTermOf(const Trace& t) : allocation_(t.strings.size(), 0), input_(t) {
  const Regex re(kAllocationPattern);
  std::vector<char> seen(t.strings.size(), 0);
  for (const Op& o : t.ops)
    if (o.kind == OpKind::Api && o.name < seen.size() && !seen[o.name]) {
      seen[o.name] = 1;
      allocation_[o.name] = re.search(t.strings.str(o.name));
    }
}

const char* HostTermOf::operator()(const Op& o) const { return allocation(o) ? kAllocationCalls : host_term(o.api_class()); }

void HostTermOf::add_gap(std::map<std::string, TimeNs>& terms, const Op& call, TimeNs gap) const {
  if (gap <= 0) return;
  const TimeNs in = input_.overlap(call.lane, call.start - gap, call.start);
  if (in > 0) terms[kInputPipeline] += in;
  if (gap > in) terms[kBetweenCalls] += gap - in;
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
    const OpId o = g.origin(n);
    if (o == kNone || o >= g.num_trace_nodes()) {
      if (gap > 0) h.terms[kBetweenCalls] += gap;
      h.terms["host work a change added"] += own;
      return;
    }
    term.add_gap(h.terms, g.trace->ops[o], gap);
    h.terms[term(g.trace->ops[o])] += own;
  });
  return h;
}

}  // namespace bneck
