// bneck info TRACE [--json FILE]
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "models/retarget.hpp"
#include "tools/commands.hpp"
#include "tools/trace_options.hpp"
#include "tools/output.hpp"
#include "tools/views/replay_view.hpp"
#include "tools/views/structure_view.hpp"
#include "traces/importer.hpp"

namespace bneck {
using nlohmann::json;

namespace {

json info_json(const Trace& t) {
  json j;
  j["source"] = t.source;
  j["format"] = t.format;
  j["measured"] = t.measured;
  json devs = json::array();
  for (const auto& d : t.devices)
    devs.push_back({{"id", d.id},
                    {"name", d.name},
                    {"inferred_part", unnamed_device_part(t, d)},
                    {"sm_count", d.sm_count},
                    {"clock", format_frequency(d.clock_hz)},
                    {"memory_bandwidth", format_bandwidth(d.memory_bandwidth)},
                    {"l2", format_bytes(d.l2_bytes)},
                    {"memory", format_bytes(d.memory_bytes)},
                    {"compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                    {"async_engines", d.async_engines}});
  j["devices"] = devs;
  json procs = json::array();
  for (const auto& p : t.processes) procs.push_back({{"pid", p.pid}, {"name", p.name}});
  j["processes"] = procs;
  std::size_t threads = 0, streams = 0;
  for (const auto& l : t.lanes) (l.kind == LaneKind::Thread ? threads : streams)++;
  j["threads"] = threads;
  j["streams"] = streams;
  std::map<std::string, std::size_t> kinds, classes;
  TimeNs first = 0, last = 0;
  bool any = false;
  for (const Op& o : t.ops) {
    kinds[o.kind == OpKind::Kernel && (o.flags & Op::kFlagNccl) ? "collective" : to_string(o.kind)]++;
    if (o.kind == OpKind::Api) classes[to_string(o.api_class())]++;
    if (!any) {
      first = o.start;
      last = o.end();
      any = true;
    }
    first = std::min(first, o.start);
    last = std::max(last, o.end());
  }
  j["ops"] = kinds;
  j["api_classes"] = classes;
  j["op_count"] = t.ops.size();
  j["time_window_ns"] = last - first;
  std::map<std::string, std::size_t> rnames;
  for (const auto& r : t.ranges) rnames[t.strings.str(r.name)]++;
  j["ranges"] = {{"count", t.ranges.size()}, {"distinct_names", rnames.size()}};
  json an = json::object();
  for (auto& [k, a] : t.anomalies) an[k] = {{"count", a.count}, {"example", a.example}};
  j["anomalies"] = an;
  return j;
}

void info_text(const Trace& t, const json& j, std::ostream& out) {
  out << "trace   " << t.source << "\nformat  " << t.format << (t.measured ? "" : " (hand-written workload)") << "\n";
  for (const auto& d : j["devices"]) {
    // Its name, and the part its properties tell where the name does not (empty, or ROCm's generic one).
    const std::string name = d["name"].get<std::string>(), part = d["inferred_part"].get<std::string>();
    const std::string told = part.empty() ? "" : "an " + part + " by its properties";
    const std::string label =
        !name.empty() ? name + (told.empty() ? "" : " (" + told + ")") : "(unnamed" + (told.empty() ? "" : ": " + told) + ")";
    out << "device  " << d["id"] << ": " << label << ", " << d["sm_count"] << " SMs, " << d["clock"].get<std::string>() << ", "
        << d["memory_bandwidth"].get<std::string>() << ", L2 " << d["l2"].get<std::string>() << ", " << d["memory"].get<std::string>()
        << ", cc " << d["compute_capability"].get<std::string>() << "\n";
  }
  for (const auto& p : t.processes)
    out << "process " << p.pid << (p.name.empty() ? "" : " " + p.name) << (p.rank != kNone ? ", rank " + std::to_string(p.rank) : "")
        << "\n";
  if (!t.collectives.empty()) {
    std::size_t joined = 0;
    for (const auto& c : t.collectives) joined += c.members.size() > 1;
    out << "collectives " << t.collectives.size() << " (" << joined << " matched across ranks)\n";
  }
  out << "lanes   " << j["threads"] << " host thread(s), " << j["streams"] << " stream(s)\n";
  out << "ops     " << t.ops.size() << ":";
  for (auto& [k, v] : j["ops"].items()) out << " " << v << " " << k;
  out << "\napi     ";
  for (auto& [k, v] : j["api_classes"].items()) out << " " << k << "=" << v;
  out << "\nwindow  " << format_duration(j["time_window_ns"].get<TimeNs>()) << "\n";
  std::map<std::string, std::size_t> rnames;
  for (const auto& r : t.ranges) rnames[t.strings.str(r.name)]++;
  std::string line = "ranges  " + std::to_string(t.ranges.size()) + " (" + std::to_string(rnames.size()) + " distinct names)";
  std::size_t shown = 0;
  for (auto& [k, v] : rnames) {  // as many names as fit in 200 characters
    // A range's name is the user's, kept whole but for its length (not cut at a parenthesis as a
    // kernel's argument list is: "attn(F)" and "attn(B)" are two names).
    const std::string nm = k.size() > 30 ? k.substr(0, 27) + "..." : k;
    const std::string item = (shown++ == 0 ? ": " : ", ") + nm + (v > 1 ? " x" + std::to_string(v) : "");
    if (line.size() + item.size() > 195) {
      line += " ...";
      break;
    }
    line += item;
  }
  out << line << "\n";
  if (!t.anomalies.empty()) {
    out << "anomalies (counted, not fatal):\n";
    for (auto& [k, a] : t.anomalies) out << "  " << k << ": " << a.count << " (e.g. " << cut_list(a.example) << ")\n";
  }
}

}  // namespace

void add_info(CLI::App& sub, Action& action) {
  static std::vector<std::string> trace;
  static std::string json_out;
  sub.add_option("TRACE", trace,
                 "trace file(s): nsys .sqlite (or .nsys-rep, with nsys), Kineto .json[.gz], bneck JSON; several files (or a directory) = "
                 "one trace per rank")
      ->required();
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  static TraceOptions topt;
  add_trace_options(sub, topt);
  sub.callback([&action] {
    action = [] {
      Trace t = load_with_options(trace, topt);
      json j = info_json(t);
      // The structure, up to a million device ops (bneck structure runs it alone beyond).
      const bool with_structure = t.device_op_count() <= 1'000'000;
      Structure s = with_structure ? find_structure(t) : Structure{};
      if (with_structure) j["structure"] = structure_json(s, false);
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(j, 2) << "\n"; });
      if (json_out != "-") {
        info_text(t, j, std::cout);
        if (with_structure) {
          std::cout << "structure (found from the trace; --range @LEVEL):\n";
          print_structure_summary(s, std::cout);
        } else {
          std::cout << "structure: more than 1000000 device ops: bneck structure TRACE finds it\n";
        }
      }
      return 0;
    };
  });
}

}  // namespace bneck
