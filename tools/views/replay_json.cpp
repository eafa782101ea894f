// The replay view's JSON (docs/design.md's contract): the report, its ranks and collectives, ranges,
// roofline, graph and anomalies.
#include <nlohmann/json.hpp>

#include "models/collective.hpp"
#include "models/measured.hpp"
#include "models/retarget.hpp"
#include "sim/base/error.hpp"
#include "tools/views/replay_view.hpp"

namespace bneck {
using nlohmann::json;

json op_json(const Trace& t, OpId id, TimeNs start, TimeNs end) {
  const Op& o = t.ops[id];
  const Lane& ln = t.lanes[o.lane];
  json j = {
      {"id", id}, {"name", t.name(o)}, {"kind", o.kind == OpKind::Kernel && (o.flags & Op::kFlagNccl) ? "collective" : to_string(o.kind)}};
  j["device"] = ln.device != kNone ? json(t.devices[ln.device].id) : json(nullptr);
  j["stream"] = ln.kind == LaneKind::Stream ? json(ln.native_id) : json(nullptr);
  if (ln.kind == LaneKind::Thread) j["thread"] = ln.native_id;
  j["start_ns"] = start;
  j["end_ns"] = end;
  return j;
}

namespace {
// Ranks (one per process with device ops) and the collectives joining them.
void add_ranks_json(const ReplayReport& r, json& j) {
  const Trace& t = *r.trace;
  json ranks = json::array();
  for (std::size_t i = 0; i < r.simulated_ranks.size() && i < r.measured_ranks.size(); ++i) {
    const RankStats& s = r.simulated_ranks[i];
    const RankStats& m = r.measured_ranks[i];
    ranks.push_back({{"rank", s.rank},
                     {"measured_span_ns", m.span.length()},
                     {"simulated_span_ns", s.span.length()},
                     {"overlap", overlap_json(s.overlap)},
                     {"measured_overlap", overlap_json(m.overlap)},
                     {"collectives", s.collectives},
                     {"collective_wait_ns", s.waited_ns},
                     {"last_arrivals", s.last_arrivals},
                     {"made_others_wait_ns", s.made_wait_ns}});
  }
  j["ranks"] = std::move(ranks);
  json cj = json::array();
  for (const CollectiveWait& w : r.waits) {
    const Collective& c = t.collectives[w.index];
    json members = json::array();
    for (OpId m : c.members)
      members.push_back({{"rank", t.rank_of(t.ops[m])}, {"id", m}, {"start_ns", r.sim.start[m]}, {"end_ns", r.sim.end[m]}});
    cj.push_back({{"kind", to_string(c.kind)},
                  {"group", c.group},
                  {"seq", c.seq},
                  {"bytes", c.bytes},
                  {"group_size", c.group_size},
                  {"straggler_rank", w.straggler},
                  {"arrival_spread_ns", w.arrival_spread_ns},
                  {"members", members}});
  }
  j["collectives"] = std::move(cj);
  json ck = json::array();  // the collective model against each last arrival's kernel
  for (const CollectiveCheck& c : r.collective_checks) {
    const Collective& col = t.collectives[c.index];
    ck.push_back(
        {{"kind", to_string(col.kind)}, {"bytes", col.bytes}, {"seq", col.seq}, {"measured_ns", c.measured_ns}, {"model_ns", c.model_ns}});
  }
  j["collective_model"] = {{"spec", r.collective_spec}, {"checks", std::move(ck)}};
}

// The ranges --range selects, each with its critical path and slack.
json ranges_json(const ReplayReport& r) {
  const Trace& t = *r.trace;
  json ranges = json::array();
  for (const auto& rr : r.ranges) {
    json rj = {{"name", rr.name},
               {"rank", rr.rank},
               {"start_ns", rr.start_ns},
               {"measured_start_ns", rr.measured_start_ns},
               {"measured_span_ns", rr.measured_span_ns},
               {"simulated_span_ns", rr.simulated_span_ns}};
    json rcp = json::array();
    for (OpId n : rr.critical_path) rcp.push_back(op_json(t, n, r.sim.start[n], r.sim.end[n]));
    rj["critical_path"] = std::move(rcp);
    json sl = json::array();
    for (auto& [o, v] : rr.slack) sl.push_back({{"id", o}, {"name", t.name(t.ops[o])}, {"slack_ns", v}});
    rj["slack"] = std::move(sl);
    rj["lost_to_sharing_ns"] = rr.lost_to_sharing_ns;
    ranges.push_back(std::move(rj));
  }
  return ranges;
}

// Model mode: the roofline by op class and the kernels that moved most.
void add_roofline_json(const ReplayReport& r, json& j) {
  j["source_hw"] = r.source_hw;
  j["target_hw"] = r.target_hw;
  j["assumptions"] = r.assumptions;
  json cls = json::array();
  for (const auto& c : r.classes)
    cls.push_back({{"class", c.cls},
                   {"ops", c.kernels},
                   {"with_shapes", c.with_shapes},
                   {"measured_ns", c.measured_ns},
                   {"model_source_ns", c.model_source_ns},
                   {"predicted_ns", c.predicted_ns},
                   {"flops", c.flops},
                   {"bytes", c.bytes},
                   {"bound", c.bound},
                   {"achieved_fraction_of_peak", c.achieved_fraction}});
  j["roofline"] = cls;
  json mv = json::array();
  for (std::size_t i = 0; i < r.moved.size() && i < 50; ++i)
    mv.push_back({{"name", r.moved[i].name},
                  {"count", r.moved[i].count},
                  {"measured_ns", r.moved[i].measured_ns},
                  {"predicted_ns", r.moved[i].predicted_ns},
                  {"bound", r.moved[i].bound},
                  {"reason", r.moved[i].reason}});
  j["moved"] = mv;
}

json graph_json(const ReplayReport& r) {
  json g = {{"nodes", r.graph->num_nodes()}, {"edges", r.graph->num_edges()}};
  json by = json::object(), bound = json::object();
  for (int k = 0; k < kEdgeTypeCount; ++k) {
    by[to_string(static_cast<EdgeType>(k))] = r.graph->stats.edges_by_type[k];
    bound[to_string(static_cast<EdgeType>(k))] = r.graph->stats.bound_by_type[k];
  }
  g["edges_by_type"] = by;
  g["starts_bound_by_type"] = bound;
  g["blocked_syncs"] = r.graph->stats.blocked_syncs;
  g["inferred_waits"] = r.graph->stats.inferred_waits;
  json res = json::array();
  for (std::size_t k = 0; k < r.graph->resources.size(); ++k)
    res.push_back(
        {{"name", r.graph->resources[k].name}, {"capacity", r.graph->resources[k].capacity}, {"busy_ns", r.sim.resource_busy[k]}});
  g["resources"] = res;
  return g;
}

json anomalies_json(const ReplayReport& r) {
  const Trace& t = *r.trace;
  json an = json::object();
  auto add = [&](const std::map<std::string, Anomaly>& m) {
    for (auto& [k, a] : m)
      an[k] = {{"count", a.count},
               {"severity", a.severity == Severity::Error     ? "error"
                            : a.severity == Severity::Warning ? "warning"
                                                              : "info"},
               {"example", a.example}};
  };
  add(t.anomalies);
  add(r.graph->anomalies);
  return an;
}
}  // namespace

json replay_json(const ReplayReport& r, const ReplayOptions& opt) {
  const Trace& t = *r.trace;
  json j;
  j["source"] = t.source;
  j["format"] = t.format;
  j["model"] = r.model;
  j["makespan_ns"] = r.simulated.length();
  j["measured_makespan_ns"] = r.measured.length();
  j["makespan_error"] = r.measured.length()
                            ? static_cast<double>(r.simulated.length() - r.measured.length()) / static_cast<double>(r.measured.length())
                            : 0.0;
  json cp = json::array();
  for (std::size_t i = 0; i < r.critical_path.size() && i < opt.cp_limit; ++i) {
    OpId n = r.critical_path[i];
    json oj = op_json(t, n, r.sim.start[n], r.sim.end[n]);
    oj["slack_ns"] = r.slack[n];
    cp.push_back(std::move(oj));
  }
  j["critical_path"] = std::move(cp);
  j["critical_path_length"] = r.critical_path.size();
  json bd = json::object();
  for (auto& [k, v] : path_breakdown(*r.graph, r.sim, r.critical_path)) bd[k] = v;
  j["critical_path_breakdown_ns"] = bd;
  j["overlap"] = overlap_json(r.simulated_overlap);
  j["measured_overlap"] = overlap_json(r.measured_overlap);
  add_ranks_json(r, j);
  if (opt.range_regex) j["ranges"] = ranges_json(r);
  {
    json sh = json::array();
    for (const SharedRow& s : r.shared)
      sh.push_back({{"name", s.name}, {"count", s.count}, {"alone_ns", s.alone_ns}, {"shared_ns", s.shared_ns}, {"bound", s.bound}});
    j["sharing"] = {{"lost_ns", r.lost_to_sharing_ns}, {"drained_kernels", r.drained_kernels}, {"ops", std::move(sh)}};
  }
  if (!r.classes.empty()) add_roofline_json(r, j);

  j["graph"] = graph_json(r);
  j["anomalies"] = anomalies_json(r);
  return j;
}

json overlap_json(const Overlap& o) {
  return json{{"compute_ns", o.compute_ns},
              {"communication_ns", o.communication_ns},
              {"memcpy_ns", o.memcpy_ns},
              {"compute_comm_overlap_ns", o.compute_comm_overlap_ns},
              {"exposed_communication_ns", o.exposed_communication_ns},
              {"compute_memcpy_overlap_ns", o.compute_memcpy_overlap_ns},
              {"gpu_busy_ns", o.gpu_busy_ns},
              {"gpu_idle_ns", o.gpu_idle_ns},
              {"window_ns", o.window_ns}};
}

}  // namespace bneck
