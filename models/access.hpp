// Model card: coalescing (bytes a warp's access moves, in 32-byte sectors).
// Captures: a warp of 32 threads reading one element each, thread i at element i * stride, is
//   served in 32-byte sectors; strided access moves sectors it mostly does not use.
// Equation: sectors = |{ floor(i * stride * E / 32) : i = 0..31 }|; bytes moved = 32 * sectors;
//   efficiency = 32 * E / bytes moved.
//   DRAM serves 64-byte segments: sparse accesses (32 B or more apart) move twice their sectors
//   from memory (measured on the H200: strides of 8 and 16 floats take the same time).
// Valid: aligned base addresses, one element per thread, global memory through L1/L2.
// Source: CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory".
//
// Model card: tiling intensity.
// Captures: a square tile of width b of C = A * B keeps a b x b block of the result on chip while
//   it streams b-wide panels of A and B: per step it loads 2b elements and does 2b^2 FLOPs.
// Equation: FLOPs per byte = 2 b^2 / (2 b * E) = b / E (FP32: b / 4).
// Valid: GEMM-like kernels whose tile fits in shared memory/registers; ignores reuse across tiles.
// Source: the GPU-systems text's tiling example; Volkov & Demmel, SC08.
//
// Model card: Amdahl's law.
// Equation: speedup = 1 / ((1 - f) + f / s); new time = T * ((1 - f) + f / s); removal: s -> inf.
// Valid: the naive forecast; bneck shows it beside the simulated one because overlap breaks it.
// Source: Amdahl, AFIPS 1967.
#pragma once
#include <cstdint>

namespace bneck {

struct Coalescing {
  std::uint32_t sectors_per_request = 0;
  std::uint64_t bytes_moved = 0;  // 32-byte sectors through L1/L2
  double efficiency = 0;
  std::uint64_t dram_bytes_moved = 0;  // 64-byte DRAM segments (H100/H200 fetch granularity)
};
Coalescing coalesce(std::uint32_t elem_bytes, std::uint32_t stride_elems, std::uint32_t threads = 32);

inline double tile_flop_per_byte(double width, double elem_bytes) { return width / elem_bytes; }

inline double amdahl_speedup(double fraction, double factor) {
  double rest = factor <= 0 ? 0 : fraction / factor;  // factor 0 or less: removed
  return 1.0 / ((1.0 - fraction) + rest);
}

}  // namespace bneck
