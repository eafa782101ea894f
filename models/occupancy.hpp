// Model card: occupancy, as NVIDIA's CUDA Occupancy Calculator computes it.
// Captures: how many blocks of a kernel fit on one SM at once given its threads per block,
//   registers per thread and shared memory per block, and which resource limits it.
// Equation: warps/block W = ceil(T / 32);
//   by warps:  floor(max_warps_per_sm / W);
//   by regs:   regs/warp = ceil(R * 32, 256); warps_by_regs = floor(floor(65536 / regs_per_warp) / g) * g
//              (g = warp allocation granularity, 4), blocks = floor(warps_by_regs / W); 0 if R > 255;
//   by smem:   per block = ceil(static + dynamic + reserved, 128 B); blocks = floor(smem_per_sm / per_block);
//   by blocks: max_blocks_per_sm;  result = min of the four, limiter = the smallest.
// Valid: compute capability 7.0+ with the spec's limits; the occupancy API's answer for the
//   maximum shared-memory carveout (tested against validate/reference/h200/occupancy.json).
// Source: CUDA Occupancy Calculator (CUDA_Occupancy_Calculator.xls), CUDA C++ Programming Guide.
#pragma once
#include <string>

#include "hw/spec.hpp"

namespace bneck {

struct OccupancyInput {
  std::uint32_t threads_per_block = 0;
  std::uint32_t registers_per_thread = 0;
  Bytes shared_bytes_per_block = 0;  // static + dynamic
};

struct OccupancyResult {
  std::uint32_t blocks_per_sm = 0;
  std::uint32_t warps_per_sm = 0;
  double occupancy = 0;  // active warps / max warps per SM
  std::string limiter;   // "warps", "registers", "shared_memory", "blocks"
  std::uint32_t by_warps = 0, by_registers = 0, by_shared_memory = 0, by_blocks = 0;
};

OccupancyResult occupancy(const GpuSpec& g, const OccupancyInput& in);

// Model card: wave quantization.
// Captures: a grid runs in waves of (blocks per SM x SMs) blocks; the last wave may be partial,
//   so the time is that of ceil(blocks / slots) full waves.
// Equation: waves = ceil(B / (b_sm * SMs)); efficiency = B / (waves * b_sm * SMs).
// Valid: blocks of equal duration; persistent and cooperative kernels are one wave by design.
// Source: NVIDIA, "GPU Performance Background User's Guide" (wave quantization).
struct Waves {
  double waves = 0;         // ceil
  double efficiency = 1;    // useful fraction of the slots of those waves
  std::uint64_t slots = 0;  // blocks resident at once on the device
};
Waves wave_quantization(std::uint64_t blocks, std::uint32_t blocks_per_sm, std::uint32_t sm_count);

}  // namespace bneck
