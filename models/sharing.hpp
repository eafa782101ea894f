// Model card: what a device op demands of its GPU when it shares it (the engine's fluid model:
// sim/engine/sharing.hpp says how rates are solved).
// Captures:
//   SMs: blocks spread over min(grid, SMs) SMs; each holds blocks_per_SM x its per-block footprint,
//     the largest fraction of threads, registers, shared memory or block slots (occupancy model:
//     blocks per SM from threads, registers and shared memory). No launch configuration: all SMs,
//     all of each. Host copies run on copy engines: no SMs.
//   HBM (fraction of the achievable bandwidth moved alone): memory-class kernels (elementwise,
//     reductions, norms, softmax, copies) 1; GEMMs, convolutions and attention 0.3 (their operands
//     are re-read from L2; an assumption until the work model gives bytes per kernel); other
//     kernels 0.3; device-to-device copies and memsets 1; host copies 0.02 (PCIe, ~55 GB/s of
//     ~4 TB/s); communication kernels 0.2, at a fixed rate.
//   PCIe: a pinned host copy fills its direction (pageable: the pageable rate over the pinned);
//     with node.pcie_bidirectional_bandwidth, both directions together share that too (an H2D
//     beside a D2H on an H200: ~100 GB/s of 2 x 55).
//   Device-to-device copies and memsets run on the SMs like a full-occupancy copy kernel (an H200
//     D2D cudaMemcpy launched during a copy kernel starts when that kernel drains).
//   Where the kernel's work is known (`enable_sharing` given work descriptors: microbenchmarks,
//     shapes), its HBM bytes over what the achievable bandwidth moves in its time alone replace the
//     class's HBM fraction (a spin loop: 0).
//   drain_weight: gpu.drain_weight of the spec (2 measured on the H200; 1 elsewhere).
//   Persistent GEMMs (a grid that fits one wave: one block per SM slot looping over output tiles,
//   as cuBLAS's Hopper kernels are) whose tiles are known (output shape from shapes, tile from the
//   kernel's name): short of SMs they take rounds of tiles, plus 0.6 of a round from two rounds up
//   (sim/engine/sharing.hpp: kShortRoundsLate, measured beside a 24-SM blocker on one H200).
//   Measured on two H200s beside NCCL's 24 blocks: a 256-tile dgrad 100 -> 187 us (rounds 2 ->
//   3.6: x1.8), a 1024-tile wgrad 112 -> 150 us (8 -> 10.6 rounds: x1.33).
//   Collectives synthesized by a transform (no trace op) need all their SMs before they progress.
// Valid: kernels launched with the trace's geometry on the spec's GPU; synthetic nodes take their
//   origin op's demand, collectives synthesized from nothing a NCCL ring's (24 blocks of 544
//   threads, 96 registers, 101 KiB shared memory: an H200 all-reduce's launch).
// Source: the CUDA occupancy calculator; validate/reference/h200/concurrency (pairs, GEMM beside
//   all-reduce on two H200s).
#pragma once
#include "hw/spec.hpp"
#include "models/kernel_work.hpp"
#include "sim/engine/sharing.hpp"

namespace bneck {

class GpuShareModel : public ShareModel {
 public:
  // `work`, when given (one per trace op), sets the HBM demand of the kernels whose work is known
  // (`hbm_from_work`) and the tiles of persistent GEMMs whose output shape is known.
  GpuShareModel(const Trace& t, HwSpec spec, const WorkTable* work = nullptr, bool hbm_from_work = true);
  ShareDemand demand(NodeId n, const Graph& g) const override;
  std::uint32_t sm_count(std::uint32_t) const override { return spec_.gpu.sm_count; }
  double drain_weight(std::uint32_t) const override { return spec_.gpu.drain_weight; }

 private:
  // The demand of a kernel of class `cls` (KernelClass) with this launch geometry on the spec's GPU.
  // `blocks_per_sm`: the launch's occupancy when known (0: compute it).
  ShareDemand demand_of_class(const LaunchConfig* lc, int cls, std::uint32_t blocks_per_sm = 0) const;
  const Trace& t_;
  HwSpec spec_;
  std::vector<std::int8_t> class_of_name_;                   // per string id: the kernel class of kernels so named (-1: none)
  std::vector<std::uint16_t> blocks_per_sm_;                 // per entry of the trace's kernels table (distinct launches)
  std::vector<float> hbm_of_op_;                             // per trace op, from known work (-1: by class); empty: none
  std::vector<std::pair<OpId, std::uint32_t>> tiles_of_op_;  // persistent GEMMs with known tiles, by op
  std::vector<ShareDemand> of_launch_;                       // per distinct launch: the demand of its class below
  std::vector<std::int8_t> launch_class_;                    // per distinct launch: the class of its first kernel (-1: none)
};

// Builds the graph's sharing model for `spec` and calibrates the alone times of the trace's
// overlapped ops (measured traces), so that replay stays exact.
void enable_sharing(Graph& g, const HwSpec& spec, const WorkTable* work = nullptr, bool hbm_from_work = true);

}  // namespace bneck
