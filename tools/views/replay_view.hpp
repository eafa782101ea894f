// The replay view: replays a trace with a cost model and reports makespan, critical path, slack,
// overlap and per-range spans, as text, JSON (DESIGN.md's contract) and a Chrome trace.
#pragma once
#include <iosfwd>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/analysis/analysis.hpp"

namespace bneck {

struct ReplayOptions {
  std::optional<std::string> range_regex;  // --range: NVTX ranges whose name matches in full
  std::size_t cp_limit = 10000;            // most critical-path entries listed in JSON
  std::size_t top = 15;                    // rows in text tables
};

struct RangeResult {
  std::size_t index = 0;                   // into trace.ranges
  std::string name;
  TimeNs start_ns = 0;                     // push time as the trace records it
  TimeNs measured_span_ns = 0, simulated_span_ns = 0;
  std::vector<OpId> critical_path;
  std::vector<std::pair<OpId, TimeNs>> slack;  // device ops of the range and their slack
};

struct ReplayReport {
  const Trace* trace = nullptr;
  std::unique_ptr<Graph> graph;
  SimResult sim;
  std::string model;
  Span measured, simulated;
  Overlap measured_overlap, simulated_overlap;
  std::vector<OpId> critical_path;
  std::vector<TimeNs> slack;
  std::vector<RangeResult> ranges;
  double import_s = 0, graph_s = 0, replay_s = 0, analysis_s = 0;
  double import_rss_mb = 0, graph_rss_mb = 0, replay_rss_mb = 0, analysis_rss_mb = 0;  // peak RSS after each phase
};

ReplayReport run_replay(const Trace& t, const ReplayOptions& opt);
void print_replay_text(const ReplayReport& r, const ReplayOptions& opt, std::ostream& out);
nlohmann::json replay_json(const ReplayReport& r, const ReplayOptions& opt);
// Chrome trace event format: the measured and the simulated timeline side by side (two
// processes per device in the Perfetto UI), streamed to keep memory flat.
void write_chrome_trace(const ReplayReport& r, std::ostream& out);

// Peak resident set size of this process so far, MiB (Linux; 0 elsewhere).
double peak_rss_mb();

// Shared helpers for views.
nlohmann::json op_json(const Trace& t, OpId id, TimeNs start, TimeNs end);
std::string short_name(const std::string& name, std::size_t max = 60);
double median(std::vector<double> v);

}  // namespace bneck
