// bneck roofline --hw SPEC --dtype T --flops F --bytes B [--unit simt|tensor] [--json FILE]
// bneck roofline TRACE [--hw SPEC] [--svg FILE] [--json FILE]: the trace's kernels on the roofline
#include <iomanip>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/retarget.hpp"
#include "models/kernel_roofline.hpp"
#include "models/roofline.hpp"
#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "tools/views/plot.hpp"
#include "tools/views/replay_view.hpp"
#include "traces/importer.hpp"

namespace bneck {
using nlohmann::json;

namespace {

// Log-log roofline: attainable FLOP/s over arithmetic intensity, one dot per kernel name.
void write_svg(std::ostream& out, const HwSpec& hw, Dtype roof_dtype, const std::vector<json>& points) {
  const double xmin = 1e-2, xmax = 1e4;
  double peak = hw.gpu.peak_of(roof_dtype, hw.gpu.best_unit(roof_dtype)) * hw.gpu.compute_efficiency;
  double bw = hw.gpu.memory_bandwidth * hw.gpu.memory_efficiency;
  double ymax = std::pow(10, std::ceil(std::log10(peak * 1.5))), ymin = ymax / 1e7;
  PlotAxis x{xmin, xmax, true, "arithmetic intensity (FLOP/byte)", {}, {}};
  PlotAxis y{ymin, ymax, true, "", [](double v) { return format_op_rate(v); }, {}};
  SvgPlot p(900, 600,
            "Roofline: " + hw.name + " (" + to_string(roof_dtype) + " peak " + format_op_rate(peak) + ", " + format_bandwidth(bw) + ")", x,
            y);
  p.grid();
  // The roof: bandwidth slope up to the ridge, then the peak.
  p.polyline({{xmin, xmin * bw}, {peak / bw, peak}, {xmax, peak}}, "black");
  for (const auto& pt : points) {
    const double r = 3 + std::min(12.0, std::sqrt(pt["time_ns"].get<double>() / 1e5));
    p.point(pt["intensity"], pt["achieved_flop_per_s"], r, SvgPlot::color(pt["class_index"].get<std::size_t>()),
            pt["name"].get<std::string>() + " (" + pt["class"].get<std::string>() + ")");
  }
  std::vector<std::pair<std::string, std::string>> leg;
  for (int c = 0; c < kKernelClassCount; ++c) {
    bool used = false;
    for (const auto& pt : points) used |= pt["class_index"] == c;
    if (used) leg.emplace_back(SvgPlot::color(static_cast<std::size_t>(c)), to_string(static_cast<KernelClass>(c)));
  }
  p.legend(leg);
  p.write(out);
}

}  // namespace

void add_roofline(CLI::App& sub, Action& action) {
  static std::string trace, hw, dtype = "fp32", unit, flops, bytes, json_out, svg_out, source_hw;
  sub.add_option("TRACE", trace, "a trace: plot its kernels (otherwise: the calculator)");
  sub.add_option("--hw", hw, "hardware preset or spec file (calculator default: h200-sxm; trace: its own GPU)");
  sub.add_option("--dtype", dtype, "precision (fp64 fp32 tf32 bf16 fp16 fp8 int8)")->capture_default_str();
  sub.add_option("--unit", unit, "simt or tensor (default: tensor where the precision has it)");
  sub.add_option("--flops", flops, "floating-point operations of the kernel");
  sub.add_option("--bytes", bytes, "bytes it moves to and from memory");
  sub.add_option("--source-hw", source_hw, "the trace's GPU, if its device name does not tell");
  sub.add_option("--svg", svg_out, "write the roofline plot of the trace's kernels to FILE");
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.callback([&action] {
    action = [] {
      auto d = dtype_from_string(dtype);
      if (!d) throw InputError("--dtype " + dtype + ": unknown (fp64, fp32, tf32, bf16, fp16, fp8, int8)");
      if (trace.empty()) {
        if (flops.empty() || bytes.empty()) throw InputError("roofline: give --flops and --bytes (or a TRACE)");
        HwSpec h = load_hw(hw.empty() ? "h200-sxm" : hw);
        ComputeUnit u = unit.empty() ? h.gpu.best_unit(*d) : unit == "simt" ? ComputeUnit::Simt : ComputeUnit::Tensor;
        if (!unit.empty() && unit != "simt" && unit != "tensor") throw InputError("--unit must be simt or tensor");
        RooflineInput in{*d, u, parse_amount(flops, "--flops"), parse_amount(bytes, "--bytes"), MemLevel::Hbm, false, -1, -1};
        RooflineResult r = roofline(h.gpu, in);
        json j = {{"hw", h.name},
                  {"dtype", to_string(*d)},
                  {"unit", to_string(u)},
                  {"peak_flop_per_s", r.peak},
                  {"bandwidth_bytes_per_s", r.bandwidth},
                  {"ridge_flop_per_byte", r.ridge_flop_per_byte},
                  {"intensity_flop_per_byte", in.bytes > 0 ? in.flops / in.bytes : 0.0},
                  {"attainable_flop_per_s", r.attainable_flop_per_s},
                  {"time_ns", r.time_ns},
                  {"bound", to_string(r.bound)}};
        if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(j, 2) << "\n"; });
        if (json_out != "-")
          print_text(
              "%s %s on %s: peak %s, bandwidth %s, ridge %.4g FLOP/byte\n  intensity %.4g FLOP/byte: attainable %s, "
              "time %s, %s-bound\n",
              to_string(*d), to_string(u), h.name.c_str(), format_op_rate(r.peak).c_str(), format_bandwidth(r.bandwidth).c_str(),
              r.ridge_flop_per_byte, j["intensity_flop_per_byte"].get<double>(), format_op_rate(r.attainable_flop_per_s).c_str(),
              format_duration(r.time_ns).c_str(), to_string(r.bound));
        return 0;
      }
      Trace t = load_trace(trace);
      HwSpec src = source_spec(t, source_hw);
      HwSpec h = hw.empty() ? src : load_target_hw(hw);
      auto work = estimate_work(t, src);
      // One point per kernel name: summed work over summed measured time (kernel_roofline.hpp).
      std::vector<json> points;
      for (const KernelPoint& p : kernel_points(t, work, src.gpu))
        points.push_back({{"name", p.name},
                          {"class", to_string(p.cls)},
                          {"class_index", static_cast<int>(p.cls)},
                          {"dtype", to_string(p.dtype)},
                          {"flops", p.flops},
                          {"bytes", p.bytes},
                          {"time_ns", p.time_ns},
                          {"count", p.count},
                          {"from_shapes", p.from_shapes == p.count},
                          {"intensity", p.intensity()},
                          {"achieved_flop_per_s", p.achieved_flop_per_s()},
                          {"achieved_bytes_per_s", p.achieved_bytes_per_s()},
                          {"achieved_fraction_of_peak", p.achieved_fraction()}});
      std::sort(points.begin(), points.end(),
                [](const json& a, const json& b) { return a["time_ns"].get<double>() > b["time_ns"].get<double>(); });
      if (!svg_out.empty()) write_output(svg_out, [&](std::ostream& o) { write_svg(o, h, *d, points); });
      json j = {{"trace", t.source}, {"hw", h.name}, {"kernels", points}};
      if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(j, 1) << "\n"; });
      if (json_out != "-") {
        print_text("%-48s %-11s %6s %12s %12s %14s %s\n", "kernel", "class", "count", "time", "FLOP/byte", "achieved", "work from");
        for (std::size_t i = 0; i < points.size() && i < 25; ++i) {
          const json& p = points[i];
          print_text("%-48s %-11s %6d %12s %12.3g %14s %s\n", short_name(p["name"], 46).c_str(), p["class"].get<std::string>().c_str(),
                     p["count"].get<int>(), format_duration(static_cast<TimeNs>(p["time_ns"].get<double>())).c_str(),
                     p["intensity"].get<double>(), format_op_rate(p["achieved_flop_per_s"]).c_str(),
                     p["from_shapes"].get<bool>() ? "shapes" : "duration");
        }
        print_text("\nby class (time-weighted): %-10s %6s %12s %9s\n", "class", "count", "time", "of roof");
        for (const KernelPoint& c : class_points(kernel_points(t, work, src.gpu)))
          print_text("  %-35s %6zu %12s %8.1f %%\n", c.name.c_str(), c.count, format_duration(static_cast<TimeNs>(c.time_ns)).c_str(),
                     100 * c.achieved_fraction());
      }
      return 0;
    };
  });
}

}  // namespace bneck
