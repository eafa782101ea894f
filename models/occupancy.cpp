#include "models/occupancy.hpp"

#include <algorithm>
#include <cmath>

namespace bneck {
namespace {
std::uint64_t ceil_to(std::uint64_t v, std::uint64_t unit) { return unit ? (v + unit - 1) / unit * unit : v; }
}  // namespace

OccupancyResult occupancy(const GpuSpec& g, const OccupancyInput& in) {
  OccupancyResult r;
  const std::uint32_t warp = g.warp_size ? g.warp_size : 32;
  const std::uint32_t max_warps = g.max_threads_per_sm / warp;
  if (in.threads_per_block == 0 || in.threads_per_block > g.max_threads_per_block) {
    r.limiter = "threads_per_block";
    return r;
  }
  std::uint32_t wpb = (in.threads_per_block + warp - 1) / warp;
  r.by_warps = max_warps / wpb;
  if (in.registers_per_thread > g.max_registers_per_thread) {
    r.by_registers = 0;
  } else if (in.registers_per_thread == 0) {
    r.by_registers = g.max_blocks_per_sm;
  } else {
    std::uint64_t regs_per_warp = ceil_to(std::uint64_t{in.registers_per_thread} * warp, g.register_allocation_unit);
    std::uint64_t warps_by_regs = g.registers_per_sm / regs_per_warp;
    std::uint64_t gran = std::max<std::uint32_t>(1, g.warp_allocation_granularity);
    warps_by_regs = warps_by_regs / gran * gran;
    r.by_registers = static_cast<std::uint32_t>(warps_by_regs / wpb);
  }
  Bytes smem = in.shared_bytes_per_block + g.reserved_shared_memory_per_block;
  if (in.shared_bytes_per_block > g.shared_memory_per_block)
    r.by_shared_memory = 0;
  else
    r.by_shared_memory =
        static_cast<std::uint32_t>(g.shared_memory_per_sm / std::max<Bytes>(1, ceil_to(smem, g.shared_memory_allocation_unit)));
  r.by_blocks = g.max_blocks_per_sm;
  std::pair<std::uint32_t, const char*> lim[] = {
      {r.by_warps, "warps"}, {r.by_registers, "registers"}, {r.by_shared_memory, "shared_memory"}, {r.by_blocks, "blocks"}};
  auto best = std::min_element(std::begin(lim), std::end(lim), [](auto& a, auto& b) { return a.first < b.first; });
  r.blocks_per_sm = best->first;
  r.limiter = best->second;
  r.warps_per_sm = r.blocks_per_sm * wpb;
  r.occupancy = max_warps ? static_cast<double>(r.warps_per_sm) / max_warps : 0;
  return r;
}

Waves wave_quantization(std::uint64_t blocks, std::uint32_t blocks_per_sm, std::uint32_t sm_count) {
  Waves w;
  w.slots = std::uint64_t{std::max<std::uint32_t>(1, blocks_per_sm)} * std::max<std::uint32_t>(1, sm_count);
  if (blocks == 0) return w;
  w.waves = std::ceil(static_cast<double>(blocks) / static_cast<double>(w.slots));
  w.efficiency = static_cast<double>(blocks) / (w.waves * static_cast<double>(w.slots));
  return w;
}

}  // namespace bneck
