#include "helpers.hpp"

#include <sstream>

namespace bneck::test {

Trace workload(const std::string& json_text) {
  std::istringstream in(json_text);
  return read_trace_json(in, "workload.json");
}

Replayed replay(Trace t) {
  Replayed r{std::move(t), {}, {}};
  r.graph = build_graph(r.trace);
  MeasuredCostModel m;
  r.sim = simulate(r.graph, m);
  return r;
}

}  // namespace bneck::test
