// bneck ops TRACE [--select SEL] [--json FILE] [--limit N]
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "sim/whatif/selector.hpp"
#include "tools/commands.hpp"
#include "tools/trace_options.hpp"
#include "tools/output.hpp"
#include "tools/views/replay_view.hpp"
#include "traces/importer.hpp"

namespace bneck {
using nlohmann::json;

void add_ops(CLI::App& sub, Action& action) {
  static std::vector<std::string> trace;
  static std::string json_out, select;
  static std::size_t limit = 200;
  static bool all_ops = false;
  sub.add_option("TRACE", trace,
                 "trace file(s): nsys .sqlite (or .nsys-rep, with nsys), Kineto .json[.gz], bneck JSON; several files (or a directory) = "
                 "one trace per rank")
      ->required();
  sub.add_option("--select", select, "selector, e.g. 'kind=kernel&name~gemm&dur>10us' (see docs/design.md)");
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.add_option("--limit", limit, "list at most N ops (0: all)")->capture_default_str();
  sub.add_flag("--api", all_ops, "include host API calls (default: device ops only, unless --select names kind=api)");
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.callback([&action] {
    action = [] {
      std::optional<Selector> sel;
      if (!select.empty()) sel = Selector::parse(select);
      Trace t = load_with_options(trace, topt, {select});
      if (sel) sel->bind(t);
      bool want_api = all_ops || select.find("kind=api") != std::string::npos;
      std::vector<OpId> hits;
      std::size_t matched = 0;
      for (OpId i = 0; i < t.ops.size(); ++i) {
        if (t.ops[i].kind == OpKind::Api && !want_api) continue;
        if (sel && !sel->matches(i)) continue;
        ++matched;
        if (limit == 0 || hits.size() < limit) hits.push_back(i);
      }
      if (!json_out.empty()) {
        write_output(json_out, [&](std::ostream& o) {
          json j;
          j["source"] = t.source;
          j["selector"] = select;
          j["matched"] = matched;
          json arr = json::array();
          for (OpId i : hits) {
            const Op& op = t.ops[i];
            json oj = op_json(t, i, op.start, op.end());
            oj["duration_ns"] = op.duration();
            if (op.link != kNone) oj["launched_by"] = op.link;
            if (const LaunchConfig* lc = t.launch(op)) {
              oj["grid"] = {lc->grid(0), lc->grid(1), lc->grid(2)};
              oj["block"] = {lc->block[0], lc->block[1], lc->block[2]};
              oj["registers_per_thread"] = lc->registers;
              oj["shared_bytes"] = lc->static_smem + lc->dynamic_smem;
            }
            if (const CopyInfo* ci = t.copy(op)) {
              oj["bytes"] = ci->bytes;
              oj["copy_kind"] = to_string(ci->copy_kind);
            }
            if (op.kind == OpKind::Api) oj["api_class"] = to_string(op.api_class());
            arr.push_back(std::move(oj));
          }
          j["ops"] = std::move(arr);
          o << json_text(j, 1) << "\n";
        });
      }
      if (json_out != "-") {
        TimeNs base = t.ops.empty() ? 0 : t.ops.front().start;
        print_text("%10s  %-10s %-6s %-8s %14s %12s  %s\n", "id", "kind", "device", "stream", "start", "duration", "name / details");
        for (OpId i : hits) {
          const Op& op = t.ops[i];
          const Lane& ln = t.lanes[op.lane];
          std::string dev = ln.device != kNone ? std::to_string(t.devices[ln.device].id) : "-";
          std::string stream = ln.kind == LaneKind::Stream ? std::to_string(ln.native_id) : "t" + std::to_string(ln.native_id);
          std::string details;
          if (const LaunchConfig* lc = t.launch(op))
            details = "  grid " + std::to_string(lc->grid(0)) + "x" + std::to_string(lc->grid(1)) + "x" + std::to_string(lc->grid(2)) +
                      " block " + std::to_string(lc->block[0]) + "x" + std::to_string(lc->block[1]) + "x" + std::to_string(lc->block[2]) +
                      " regs " + std::to_string(lc->registers);
          if (const CopyInfo* ci = t.copy(op)) details = "  " + format_bytes(ci->bytes);
          print_text("%10u  %-10s %-6s %-8s %14s %12s  %s%s\n", i,
                     op.kind == OpKind::Kernel && (op.flags & Op::kFlagNccl) ? "collective" : to_string(op.kind), dev.c_str(),
                     stream.c_str(), format_duration(op.start - base).c_str(), format_duration(op.duration()).c_str(),
                     short_name(t.name(op), 70).c_str(), details.c_str());
        }
        print_text("%zu matched%s\n", matched,
                   matched > hits.size() ? (", " + std::to_string(hits.size()) + " listed (--limit)").c_str() : "");
      }
      return 0;
    };
  });
}

}  // namespace bneck
