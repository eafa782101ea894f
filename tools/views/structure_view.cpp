#include "tools/views/structure_view.hpp"

#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>

#include "sim/base/units.hpp"

namespace bneck {

nlohmann::json structure_json(const Structure& s, bool instances) {
  nlohmann::json levels = nlohmann::json::array();
  for (const StructureLevel& lv : s.levels) {
    nlohmann::json l = {{"name", lv.name},           {"range", "@" + lv.name},         {"how", lv.how},      {"count", lv.instances.size()},
                        {"period_ns", lv.period_ns}, {"median_span_ns", lv.median_ns}, {"spread", lv.spread}};
    if (instances) {
      nlohmann::json in = nlohmann::json::array();
      for (const StructureInstance& i : lv.instances)
        in.push_back({{"start_ns", i.start_ns},
                      {"end_ns", i.end_ns},
                      {"span_ns", i.end_ns - i.start_ns},
                      {"rank", i.rank},
                      {"loop", i.loop},
                      {"ops", i.ops.size()},
                      {"host_start_ns", i.host_start_ns},
                      {"host_end_ns", i.host_end_ns}});
      l["instances"] = in;
    }
    levels.push_back(l);
  }
  nlohmann::json rejected = nlohmann::json::array();
  for (const StructureLevel& lv : s.rejected)
    rejected.push_back(
        {{"name", lv.name}, {"how", lv.how}, {"instances", lv.instances.size()}, {"spread", lv.spread}, {"why", lv.rejected}});
  return {{"levels", levels}, {"rejected_levels", rejected}, {"conventions", s.conventions}, {"notes", s.notes}};
}

void print_structure_summary(const Structure& s, std::ostream& out, const char* indent) {
  if (s.levels.empty()) out << indent << "no repeating unit found\n";
  for (const StructureLevel& lv : s.levels) {
    out << indent << std::left << std::setw(11) << ("@" + lv.name) << std::right << std::setw(6) << lv.instances.size() << "  period "
        << std::setw(10) << (lv.period_ns ? format_duration(lv.period_ns) : "-") << "  span " << std::setw(10)
        << format_duration(lv.median_ns) << "  spread " << std::fixed << std::setprecision(1) << 100 * lv.spread << " %  " << lv.how
        << "\n";
    out.unsetf(std::ios::fixed);
  }
  for (const StructureLevel& lv : s.rejected)
    out << indent
        << ("not offered: @" + lv.name + " (" + std::to_string(lv.instances.size()) + " instances): " + lv.rejected).substr(0, 190) << "\n";
  for (const auto& c : s.conventions) out << indent << "convention: " << c << "\n";
  for (const auto& c : s.notes) out << indent << "note: " << c << "\n";
}

void print_structure_text(const Structure& s, std::ostream& out, std::size_t limit) {
  out << "structure (levels usable as --range @LEVEL):\n";
  print_structure_summary(s, out);
  for (const StructureLevel& lv : s.levels) {
    out << "\n@" << lv.name << ": " << lv.instances.size() << " instances\n";
    out << "  " << std::setw(5) << "#" << std::setw(6) << "rank" << std::setw(14) << "start" << std::setw(14) << "span" << std::setw(8)
        << "ops"
        << "\n";
    TimeNs zero = lv.instances.empty() ? 0 : lv.instances.front().start_ns;
    for (std::size_t i = 0; i < lv.instances.size() && i < limit; ++i) {
      const auto& in = lv.instances[i];
      out << "  " << std::setw(5) << i << std::setw(6) << in.rank << std::setw(14) << format_duration(in.start_ns - zero) << std::setw(14)
          << format_duration(in.end_ns - in.start_ns) << std::setw(8) << in.ops.size() << "\n";
    }
    if (lv.instances.size() > limit) out << "  ... " << lv.instances.size() - limit << " more (--limit, --json)\n";
  }
}

}  // namespace bneck
