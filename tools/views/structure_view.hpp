// The structure view: a trace's structure levels (sim/analysis/structure.hpp) as text and JSON.
#pragma once
#include <iosfwd>
#include <nlohmann/json_fwd.hpp>

#include "sim/analysis/structure.hpp"

namespace bneck {

// {levels: [{name, how, count, period_ns, median_span_ns, spread, instances: [{start_ns, end_ns,
// span_ns, rank, loop, ops, host_start_ns, host_end_ns}]}], conventions: [...]}; without
// instances when `instances` is false (the summary info and replay carry).
nlohmann::json structure_json(const Structure& s, bool instances);
// One line per level (count, period, span and spread, what found it), then the conventions.
void print_structure_summary(const Structure& s, std::ostream& out, const char* indent = "  ");
// The summary, then each level's first `limit` instances.
void print_structure_text(const Structure& s, std::ostream& out, std::size_t limit);

}  // namespace bneck
