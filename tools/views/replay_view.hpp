// The replay view: renders a ReplayReport (models/replay.hpp) as text, JSON (docs/design.md's contract)
// and a Chrome trace.
#pragma once
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "models/replay.hpp"

namespace bneck {

void print_replay_text(const ReplayReport& r, const ReplayOptions& opt, std::ostream& out);
nlohmann::json replay_json(const ReplayReport& r, const ReplayOptions& opt);
// Chrome trace event format: the measured and the simulated timeline side by side (two
// processes per device in the Perfetto UI), streamed to keep memory flat.
void write_chrome_trace(const ReplayReport& r, std::ostream& out);

// Shared helpers for views.
nlohmann::json overlap_json(const Overlap& o);
// Two schedules of the same trace side by side in the Chrome trace event format (pid 1 and 2,
// one thread per lane), streamed; `extra_args(op)` may add ",\"key\":value" to pid 2's events.
void write_two_timelines(std::ostream& out, const Trace& t, const Schedule& a, const std::string& name_a, const Schedule& b,
                         const std::string& name_b, const std::function<std::string(OpId)>& extra_args = {},
                         const Graph* graph_b = nullptr);
nlohmann::json op_json(const Trace& t, OpId id, TimeNs start, TimeNs end);
std::string short_name(const std::string& name, std::size_t max = 60);
// A comma-separated list cut to at most `max` characters at a comma, with how many items it left
// out ("a, b, c and 18 more"); a longer single item is shortened (short_name).
std::string cut_list(const std::string& list, std::size_t max = 120);
// Names as runs ("multi_tensor_apply x19": consecutive equal short names once, with their count),
// comma-separated, wrapped to lines of at most `width` characters that start with `indent`.
std::string runs_text(const std::vector<std::string>& names, const std::string& indent, std::size_t width = 110);
// Left-aligned / right-aligned to a width, for text tables.
std::string pad(const std::string& s, std::size_t w);
std::string lpad(const std::string& s, std::size_t w);

}  // namespace bneck
