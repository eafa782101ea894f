// Calculators: bneck roofline | occupancy | coalesce | tile | amdahl | collective, each with --json.
#include <iomanip>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "hw/spec.hpp"
#include "models/access.hpp"
#include "models/collective.hpp"
#include "models/occupancy.hpp"
#include "models/roofline.hpp"
#include "sim/base/error.hpp"
#include "tools/commands.hpp"
#include "tools/output.hpp"
#include "traces/collectives.hpp"

namespace bneck {
using nlohmann::json;

namespace {

void emit(const std::string& json_out, const json& j, const std::function<void()>& text) {
  if (!json_out.empty()) write_output(json_out, [&](std::ostream& o) { o << json_text(j, 2) << "\n"; });
  if (json_out != "-") text();
}

Dtype parse_dtype(const std::string& s) {
  auto d = dtype_from_string(s);
  if (!d) throw InputError("--dtype " + s + ": unknown (fp64, fp32, tf32, bf16, fp16, fp8, int8)");
  return *d;
}

}  // namespace

void add_occupancy(CLI::App& sub, Action& action) {
  static std::string hw = "h200-sxm", smem = "0 B", json_out;
  static std::uint32_t threads = 0, regs = 0;
  sub.add_option("--hw", hw, "hardware preset or spec file")->capture_default_str();
  sub.add_option("--threads", threads, "threads per block")->required();
  sub.add_option("--regs", regs, "registers per thread")->required();
  sub.add_option("--smem", smem, "shared memory per block, with a unit (e.g. '48 KiB')")->capture_default_str();
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.callback([&action] {
    action = [] {
      HwSpec h = load_hw(hw);
      OccupancyResult r = occupancy(h.gpu, {threads, regs, parse_bytes(smem)});
      json j = {
          {"hw", h.name},
          {"blocks_per_sm", r.blocks_per_sm},
          {"warps_per_sm", r.warps_per_sm},
          {"occupancy", r.occupancy},
          {"limiter", r.limiter},
          {"by", {{"warps", r.by_warps}, {"registers", r.by_registers}, {"shared_memory", r.by_shared_memory}, {"blocks", r.by_blocks}}}};
      emit(json_out, j, [&] {
        print_text("%s: %u threads, %u registers, %s shared per block\n", h.name.c_str(), threads, regs, smem.c_str());
        print_text("  blocks per SM %u (limits: warps %u, registers %u, shared memory %u, blocks %u), limiter: %s\n", r.blocks_per_sm,
                   r.by_warps, r.by_registers, r.by_shared_memory, r.by_blocks, r.limiter.c_str());
        print_text("  warps per SM %u, occupancy %.1f%%\n", r.warps_per_sm, r.occupancy * 100);
      });
      return 0;
    };
  });
}

void add_coalesce(CLI::App& sub, Action& action) {
  static std::uint32_t elem = 4, stride = 1;
  static std::string json_out;
  sub.add_option("--elem-bytes", elem, "bytes per element")->required();
  sub.add_option("--stride", stride, "stride between the elements of neighbouring threads, in elements")->required();
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.callback([&action] {
    action = [] {
      if (elem == 0) throw InputError("--elem-bytes must be positive");
      Coalescing c = coalesce(elem, stride);
      json j = {{"elem_bytes", elem},           {"stride", stride},           {"sectors_per_request", c.sectors_per_request},
                {"bytes_moved", c.bytes_moved}, {"efficiency", c.efficiency}, {"dram_bytes_moved", c.dram_bytes_moved}};
      emit(json_out, j, [&] {
        print_text("a warp reading %u-byte elements %u apart: %u sectors of 32 B, %llu bytes moved for %u used (%.1f%%)\n", elem, stride,
                   c.sectors_per_request, static_cast<unsigned long long>(c.bytes_moved), 32 * elem, c.efficiency * 100);
      });
      return 0;
    };
  });
}

void add_tile(CLI::App& sub, Action& action) {
  static double width = 0;
  static std::string dtype = "fp32", json_out;
  sub.add_option("--width", width, "tile width b (elements)")->required();
  sub.add_option("--dtype", dtype, "element type")->capture_default_str();
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.callback([&action] {
    action = [] {
      Dtype d = parse_dtype(dtype);
      double fpb = tile_flop_per_byte(width, dtype_bytes(d));
      json j = {{"width", width}, {"dtype", to_string(d)}, {"flop_per_byte", fpb}};
      emit(json_out, j,
           [&] { print_text("a %s tile of width %g: 2b^2 FLOPs per 2b elements loaded = %g FLOP/byte\n", to_string(d), width, fpb); });
      return 0;
    };
  });
}

void add_amdahl(CLI::App& sub, Action& action) {
  static double fraction = 0;
  static std::string factor = "", total, json_out;
  sub.add_option("--fraction", fraction, "fraction of the run the change applies to (0..1)")->required();
  sub.add_option("--factor", factor, "speed-up factor of that part ('inf' removes it)")->required();
  sub.add_option("--total", total, "the run's time, with a unit (e.g. '100 ms'), to print times");
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.callback([&action] {
    action = [] {
      if (fraction < 0 || fraction > 1) throw InputError("--fraction must be in [0, 1]");
      double s = factor == "inf" ? 0 : parse_amount(factor, "--factor");
      if (factor != "inf" && s <= 0) throw InputError("--factor must be positive (or 'inf')");
      double sp = amdahl_speedup(fraction, s);
      json j = {{"fraction", fraction}, {"factor", factor == "inf" ? json("inf") : json(s)}, {"speedup", sp}};
      if (!total.empty()) {
        TimeNs t = parse_duration(total);
        auto nt = static_cast<TimeNs>(std::llround(static_cast<double>(t) / sp));
        j["total_ns"] = t;
        j["predicted_ns"] = nt;
        j["saved_ns"] = t - nt;
      }
      emit(json_out, j, [&] {
        print_text("Amdahl: %.4g of the run made %sx faster: speedup %.4f", fraction, factor.c_str(), sp);
        if (j.contains("predicted_ns"))
          print_text(", %s -> %s (saves %s)", format_duration(j["total_ns"]).c_str(), format_duration(j["predicted_ns"]).c_str(),
                     format_duration(j["saved_ns"]).c_str());
        print_text("\n");
      });
      return 0;
    };
  });
}

void add_collective(CLI::App& sub, Action& action) {
  static std::string hw = "h200-sxm", kind = "allreduce", bytes = "1 GiB", json_out;
  static std::uint32_t ranks = 8;
  sub.add_option("--hw", hw, "hardware preset or spec file (its node and cluster links)")->capture_default_str();
  sub.add_option("--kind", kind, "allreduce | allgather | reducescatter | broadcast | reduce | alltoall | sendrecv")->capture_default_str();
  sub.add_option("--bytes", bytes, "message size per rank, with a unit (e.g. '256 MiB')")->capture_default_str();
  sub.add_option("--ranks", ranks, "ranks taking part")->capture_default_str();
  sub.add_option("--json", json_out, "write JSON to FILE ('-' for stdout)");
  sub.callback([&action] {
    action = [] {
      CollKind k = collective_kind_from_name(kind);
      if (k == CollKind::Unknown)
        throw InputError("--kind " + kind + ": expected allreduce, allgather, reducescatter, broadcast, reduce, alltoall or sendrecv");
      if (ranks == 0) throw InputError("--ranks must be at least 1");
      HwSpec h = load_target_hw(hw);
      Bytes b = parse_bytes(bytes);
      CollectiveEstimate e = collective_time(h, k, b, ranks);
      double t = static_cast<double>(std::max<TimeNs>(1, e.time_ns)) * 1e-9;
      double algbw = static_cast<double>(b) / t, busbw = algbw * bus_factor(k, ranks);
      json j = {{"hw", h.name},
                {"kind", to_string(k)},
                {"bytes", b},
                {"ranks", ranks},
                {"time_ns", e.time_ns},
                {"algorithm", e.algorithm},
                {"link", e.link},
                {"link_bandwidth_bytes_per_s", e.link_bandwidth},
                {"latency_ns", e.latency_ns},
                {"algbw_bytes_per_s", algbw},
                {"busbw_bytes_per_s", busbw},
                {"bus_factor", bus_factor(k, ranks)}};
      emit(json_out, j, [&] {
        print_text("%s of %s on %u ranks of %s: %s (%s over %s at %s; latency part %s); algbw %s, busbw %s (x%.4g)\n", to_string(k),
                   format_bytes(b).c_str(), ranks, h.name.c_str(), format_duration(e.time_ns).c_str(), e.algorithm.c_str(), e.link.c_str(),
                   format_bandwidth(e.link_bandwidth).c_str(), format_duration(e.latency_ns).c_str(), format_bandwidth(algbw).c_str(),
                   format_bandwidth(busbw).c_str(), bus_factor(k, ranks));
      });
      return 0;
    };
  });
}

}  // namespace bneck
