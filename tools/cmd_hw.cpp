// bneck hw list | bneck hw show NAME|FILE [--json FILE]
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "hw/spec.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"

namespace bneck {
using nlohmann::json;

void add_hw(CLI::App& sub, Action& action) {
  sub.require_subcommand(1);
  static std::string name, json_out;
  auto* list = sub.add_subcommand("list", "List the hardware presets");
  list->add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  list->callback([&action] {
    action = [] {
      json arr = json::array();
      for (const auto& n : hw_preset_names()) {
        HwSpec h = load_hw(n);
        arr.push_back({{"name", n}, {"description", h.description}, {"extends", h.chain.size() > 1 ? json(h.chain[1]) : json(nullptr)}});
      }
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << std::setw(2) << arr << "\n"; });
      if (json_out != "-")
        for (const auto& a : arr)
          std::printf("%-26s %s\n", a["name"].get<std::string>().c_str(), a["description"].get<std::string>().c_str());
      return 0;
    };
  });
  auto* show = sub.add_subcommand("show", "Show a preset or spec file, resolved, with the source of every number");
  show->add_option("NAME", name, "preset name or JSON file")->required();
  show->add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  show->callback([&action] {
    action = [] {
      HwSpec h = load_hw(name);
      json out = h.resolved;
      out["extends_chain"] = h.chain;
      out["unsourced"] = unsourced_fields(h);
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << std::setw(2) << out << "\n"; });
      if (json_out == "-") return 0;
      std::cout << h.name << ": " << h.description << "\n";
      if (h.chain.size() > 1) {
        std::cout << "extends:";
        for (std::size_t i = 1; i < h.chain.size(); ++i) std::cout << " " << h.chain[i];
        std::cout << "\n";
      }
      auto source_of = [&](const std::string& path) -> std::string {
        for (std::string p = path;;) {
          auto it = h.sources.find(p);
          if (it != h.sources.end()) return it->second;
          auto dot = p.rfind('.');
          if (dot == std::string::npos) return "(no source)";
          p = p.substr(0, dot);
        }
      };
      std::function<void(const json&, const std::string&)> walk = [&](const json& v, const std::string& path) {
        if (v.is_object()) {
          for (auto it = v.begin(); it != v.end(); ++it) walk(it.value(), path + "." + it.key());
          return;
        }
        std::string val = v.is_string() ? v.get<std::string>() : v.dump();
        std::printf("  %-34s %-16s %s\n", path.c_str(), val.c_str(), source_of(path).c_str());
      };
      for (const char* sec : {"gpu", "node", "cluster"})
        if (h.resolved.contains(sec)) walk(h.resolved[sec], sec);
      return 0;
    };
  });
}

}  // namespace bneck
