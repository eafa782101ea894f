#include "models/access.hpp"

#include <set>

namespace bneck {

Coalescing coalesce(std::uint32_t elem_bytes, std::uint32_t stride_elems, std::uint32_t threads) {
  Coalescing c;
  std::set<std::uint64_t> sectors, segments;
  for (std::uint64_t i = 0; i < threads; ++i) {
    std::uint64_t first = i * stride_elems * elem_bytes, last = first + elem_bytes - 1;
    for (std::uint64_t s = first / 32; s <= last / 32; ++s) sectors.insert(s);
    for (std::uint64_t s = first / 64; s <= last / 64; ++s) segments.insert(s);
  }
  c.dram_bytes_moved = 64ull * segments.size();
  c.sectors_per_request = static_cast<std::uint32_t>(sectors.size());
  c.bytes_moved = 32ull * sectors.size();
  c.efficiency = c.bytes_moved ? static_cast<double>(threads) * elem_bytes / static_cast<double>(c.bytes_moved) : 0;
  return c;
}

}  // namespace bneck
