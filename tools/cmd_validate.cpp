// bneck calibrate MEASUREMENTS.json -o FILE [--base PRESET] [--name NAME]
// bneck validate-report MEASUREMENTS.json --hw FILE [--json FILE] [--svg FILE]
#include <filesystem>
#include <iomanip>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "hw/spec.hpp"
#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "tools/views/plot.hpp"
#include "validate/calibrate.hpp"

namespace bneck {
using nlohmann::json;

void add_calibrate(CLI::App& sub, Action& action) {
  static std::vector<std::string> meas;
  static std::string out, base = "h200-sxm", name;
  sub.add_option("MEASUREMENTS", meas, "bneck_validate output (validate/bench); several files are one set")->required();
  sub.add_option("-o,--output", out, "the calibrated spec overlay to write (e.g. hw/calibrated/h200-sxm-calibrated.json)")->required();
  sub.add_option("--base", base, "the preset (or installed spec) the overlay extends; 'auto': the preset matching the measured device")
      ->capture_default_str();
  sub.add_option("--name", name, "the overlay's name (default: BASE-calibrated)");
  sub.callback([&action] {
    action = [] {
      Measurements m = load_measurements(meas);
      if (base == "auto") {
        std::string dev = m.device.is_object() ? m.device.value("name", std::string()) : std::string();
        base = preset_for_device_name(dev);
        if (base.empty())
          throw InputError(meas[0], "no preset matches the device '" + dev + "': make a base spec with `bneck hw from-device " + meas[0] +
                                        "`, install it (`bneck hw install`) and pass its name as --base");
      }
      Calibration c = calibrate(m, base, name.empty() ? base + "-calibrated" : name);
      write_output(out, [&](std::ostream& o) { o << json_text(c.overlay, 2) << "\n"; });
      if (out != "-") {
        std::cout << "calibrated " << base << " from " << m.items.size() << " measurements (training half):\n";
        for (const auto& l : c.log) std::cout << "  " << l << "\n";
        std::cout << "wrote " << out << "\n";
      }
      return 0;
    };
  });
}

void add_validate_report(CLI::App& sub, Action& action) {
  static std::vector<std::string> meas;
  static std::string hw, json_out, svg_out;
  sub.add_option("MEASUREMENTS", meas, "bneck_validate output; several files are one set")->required();
  sub.add_option("--hw", hw, "the spec to check (a calibrated overlay or a preset)")->required();
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.add_option("--svg", svg_out, "predicted vs measured, log-log, to FILE");
  sub.callback([&action] {
    action = [] {
      Measurements m = load_measurements(meas);
      HwSpec h = load_hw(hw);
      AccuracyReport r = accuracy(m, h);
      json j = {
          {"measurements", meas}, {"hw", h.name}, {"median_error", r.median_error}, {"p90_error", r.p90_error}, {"held_out", r.held_out}};
      json fam = json::object();
      for (const auto& f : r.families)
        fam[f.family] = f.modelled
                            ? json{{"n", f.n}, {"held_out", f.held_out}, {"mape", f.mape}, {"median_error", f.median}, {"p90_error", f.p90}}
                            : json{{"n", f.n}, {"modelled", false}};
      j["families"] = fam;
      json rows = json::array();
      for (std::size_t i = 0; i < m.items.size(); ++i) {
        const auto& x = m.items[i];
        rows.push_back({{"family", x.family},
                        {"name", x.name},
                        {"size", measurement_size(x)},
                        {"measured_ns", x.time_ns},
                        {"predicted_ns", r.predicted[i]},
                        {"held_out", !x.train},
                        {"error", r.predicted[i] > 0 ? (r.predicted[i] - x.time_ns) / x.time_ns : 0.0}});
      }
      j["cases"] = rows;
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(j, 1) << "\n"; });
      if (!svg_out.empty()) {
        write_output(svg_out, [&](std::ostream& o) {
          const double lo = 1e3, hi = 1e9;
          auto dur = [](double v) { return format_duration(static_cast<TimeNs>(v)); };
          SvgPlot p(700, 700, h.name + ": predicted vs measured (held-out: filled)", PlotAxis{lo, hi, true, "measured", dur, {}},
                    PlotAxis{lo, hi, true, "predicted", dur, {}}, 80, 30, 40, 60);
          p.grid();
          p.polyline({{lo, lo}, {hi, hi}}, "black", 1);
          std::map<std::string, std::size_t> fidx;
          for (std::size_t i = 0; i < m.items.size(); ++i) {
            if (r.predicted[i] <= 0) continue;
            std::size_t c = fidx.emplace(m.items[i].family, fidx.size()).first->second;
            p.point(m.items[i].time_ns, r.predicted[i], 4, SvgPlot::color(c), m.items[i].name, !m.items[i].train, 1.0);
          }
          std::vector<std::pair<std::string, std::string>> leg;
          for (auto& [f, c] : fidx) leg.emplace_back(SvgPlot::color(c), f);
          p.legend(leg, 100, 50);
          p.write(o);
        });
      }
      if (json_out != "-") {
        std::string files;  // the measurement files by name ("a.json + b.json")
        for (std::size_t at = 0; at <= m.source.size();) {
          const std::size_t plus = std::min(m.source.find(" + ", at), m.source.size());
          files += (files.empty() ? "" : " + ") + std::filesystem::path(m.source.substr(at, plus - at)).filename().string();
          at = plus + 3;
        }
        print_text("%s: %zu held-out measurements, median error %.1f %%, 90th percentile %.1f %% (%s)\n", h.name.c_str(), r.held_out,
                   r.median_error * 100, r.p90_error * 100, files.c_str());
        print_text("  %-12s %5s %9s %8s %8s %8s\n", "family", "n", "held-out", "MAPE", "median", "p90");
        for (const auto& f : r.families)
          if (f.modelled)
            print_text("  %-12s %5zu %9zu %7.1f%% %7.1f%% %7.1f%%\n", f.family.c_str(), f.n, f.held_out, f.mape * 100, f.median * 100,
                       f.p90 * 100);
          else
            print_text("  %-12s %5zu  (measured; no model predicts it yet)\n", f.family.c_str(), f.n);
        // The biggest held-out misses: where the model is least to be trusted on this GPU.
        std::vector<std::size_t> miss;
        for (std::size_t i = 0; i < m.items.size(); ++i)
          if (!m.items[i].train && r.predicted[i] > 0) miss.push_back(i);
        auto err = [&](std::size_t i) { return (r.predicted[i] - m.items[i].time_ns) / m.items[i].time_ns; };
        std::stable_sort(miss.begin(), miss.end(), [&](std::size_t a, std::size_t b) { return std::fabs(err(a)) > std::fabs(err(b)); });
        if (!miss.empty()) print_text("  biggest held-out misses:\n");
        for (std::size_t k = 0; k < miss.size() && k < 5; ++k) {
          const auto& x = m.items[miss[k]];
          print_text("    %-12s %-22s size %-12.4g measured %-10s predicted %-10s %+.1f%%\n", x.family.c_str(), x.name.c_str(),
                     measurement_size(x), format_duration(static_cast<TimeNs>(x.time_ns)).c_str(),
                     format_duration(static_cast<TimeNs>(r.predicted[miss[k]])).c_str(), 100 * err(miss[k]));
        }
        if (m.stability.is_object() && m.stability.contains("change") && m.stability["change"].is_number()) {
          double ch = m.stability["change"].get<double>();
          print_text("  stability: the reference copy changed %+.1f %% from the start of the run to the end%s\n", 100 * ch,
                     std::fabs(ch) > 0.05 ? " (over 5 %: clocks or other work; the figures may not hold)" : "");
        }
      }
      return 0;
    };
  });
}

}  // namespace bneck
