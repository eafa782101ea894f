// bneck hw list | bneck hw show NAME|FILE [--json FILE] | bneck hw install FILE [--name NAME]
// | bneck hw from-device MEASUREMENTS [-o FILE]
#include <iomanip>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "hw/from_device.hpp"
#include "hw/spec.hpp"
#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"

namespace bneck {
using nlohmann::json;

namespace {

// `list` and `show` write JSON to the same option's file.
std::string json_out;

void add_list(CLI::App& sub, Action& action) {
  auto* list = sub.add_subcommand("list", "List the hardware presets");
  list->add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  list->callback([&action] {
    action = [] {
      json arr = json::array();
      for (const auto& n : hw_preset_names()) {
        if (!installed_hw_path(n).empty()) continue;  // listed below, where it resolves
        HwSpec h = load_hw(n);
        arr.push_back({{"name", n},
                       {"description", h.description},
                       {"extends", h.chain.size() > 1 ? json(h.chain[1]) : json(nullptr)},
                       {"installed", nullptr}});
      }
      std::size_t presets = arr.size();
      for (const auto& n : installed_hw_names()) {
        std::string desc;
        try {
          desc = load_hw(n).description;
        } catch (const InputError& e) { desc = std::string("(unreadable: ") + e.what() + ")"; }
        arr.push_back({{"name", n}, {"description", desc}, {"installed", installed_hw_path(n)}});
      }
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(arr, 2) << "\n"; });
      if (json_out != "-") {
        for (std::size_t i = 0; i < arr.size(); ++i) {
          if (i == presets) print_text("installed (%s):\n", user_hw_dir().c_str());
          print_text("%-26s %s\n", arr[i]["name"].get<std::string>().c_str(), arr[i]["description"].get<std::string>().c_str());
        }
      }
      return 0;
    };
  });
}

void add_install(CLI::App& sub, Action& action) {
  static std::string install_file, install_name;
  auto* install =
      sub.add_subcommand("install", "Install a spec (e.g. a calibrated overlay) where --hw and device matching find it by name");
  install->add_option("FILE", install_file, "the spec JSON")->required();
  install->add_option("--name", install_name, "install under this name (default: the spec's own name)");
  install->callback([&action] {
    action = [] {
      HwSpec h = load_hw(install_file);  // it must load, `extends` and all
      std::ifstream in(install_file, std::ios::binary);
      json j = json::parse(in, nullptr, false);
      if (!j.is_object()) throw InputError(install_file, "not a JSON object");
      std::string inst = install_name.empty() ? j.value("name", h.name) : install_name;
      bool ok = !inst.empty() && inst != "." && inst != "..";
      for (char c : inst) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
      if (!ok) throw InputError(install_file, "spec name '" + inst + "' is not a plain file name (letters, digits, '-', '_', '.')");
      j["name"] = inst;
      const std::string dir = user_hw_dir();
      if (dir.empty()) throw InputError(install_file, "no directory to install into: set BNECK_HW_DIR, XDG_DATA_HOME or HOME");
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec) throw InputError(dir, "cannot create directory: " + ec.message());
      const std::string path = dir + "/" + inst + ".json";
      write_output(path, [&](std::ostream& o) { o << json_text(j, 2) << "\n"; });
      std::cout << "installed " << inst << " -> " << path << " (--hw " << inst << "; traces from a matching GPU use it)\n";
      return 0;
    };
  });
}

void add_from_device(CLI::App& sub, Action& action) {
  static std::string fd_meas, fd_out;
  auto* fromdev = sub.add_subcommand("from-device",
                                     "The base spec for the GPU a measurements file was taken on: a matching preset, or one made "
                                     "from its device properties (printed: 'preset NAME' or 'spec NAME FILE')");
  fromdev->add_option("MEASUREMENTS", fd_meas, "bneck_validate output (its \"device\" object)")->required();
  fromdev->add_option("-o,--output", fd_out,
                      "where to write a spec made from the device properties (default: NAME.json beside MEASUREMENTS)");
  fromdev->callback([&action] {
    action = [] {
      std::ifstream in(fd_meas, std::ios::binary);
      if (!in) throw InputError(fd_meas, "cannot open for reading");
      json m = json::parse(in, nullptr, false);
      if (!m.is_object() || !m.contains("device") || !m["device"].is_object() || !m["device"].contains("name") ||
          !m["device"]["name"].is_string())
        throw InputError(fd_meas, "no \"device\" object with a name: not a bneck_validate measurements file");
      const std::string dev = m["device"]["name"].get<std::string>();
      if (std::string p = preset_for_device_name(dev); !p.empty()) {
        std::cout << "preset " << p << "\n";
        return 0;
      }
      json spec = spec_from_device(m["device"], fd_meas);
      const std::string nm = spec["name"].get<std::string>();
      std::string path = fd_out;
      if (path.empty()) {
        auto dir = std::filesystem::path(fd_meas).parent_path();
        path = (dir.empty() ? std::filesystem::path(nm + ".json") : dir / (nm + ".json")).string();
      }
      write_output(path, [&](std::ostream& o) { o << json_text(spec, 2) << "\n"; });
      std::cout << "spec " << nm << " " << path << "\n";
      return 0;
    };
  });
}

void add_show(CLI::App& sub, Action& action) {
  static std::string name;
  auto* show = sub.add_subcommand("show", "Show a preset or spec file, resolved, with the source of every number");
  show->add_option("NAME", name, "preset name or JSON file")->required();
  show->add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  show->callback([&action] {
    action = [] {
      HwSpec h = load_hw(name);
      json out = h.resolved;
      out["extends_chain"] = h.chain;
      out["unsourced"] = unsourced_fields(h);
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(out, 2) << "\n"; });
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
        print_text("  %-34s %-16s %s\n", path.c_str(), val.c_str(), source_of(path).c_str());
      };
      for (const char* sec : {"gpu", "node", "cluster"})
        if (h.resolved.contains(sec)) walk(h.resolved[sec], sec);
      return 0;
    };
  });
}

}  // namespace

void add_hw(CLI::App& sub, Action& action) {
  sub.require_subcommand(1);
  add_list(sub, action);
  add_install(sub, action);
  add_from_device(sub, action);
  add_show(sub, action);
}

}  // namespace bneck
