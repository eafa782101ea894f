#pragma once
#include <string>

#include "models/measured.hpp"
#include "sim/analysis/analysis.hpp"
#include "traces/json_io.hpp"

namespace bneck::test {

inline std::string source_dir() { return BNECK_SOURCE_DIR; }
inline std::string shared_dir() { return BNECK_SHARED_DIR; }
inline std::string demo_trace() { return source_dir() + "/traces/data/demo_pipeline.sqlite"; }
inline std::string h200(const std::string& f) { return shared_dir() + "/traces/h200/" + f; }

Trace workload(const std::string& json_text);

struct Replayed {
  Trace trace;
  Graph graph;
  SimResult sim;
};
Replayed replay(Trace t);

}  // namespace bneck::test
