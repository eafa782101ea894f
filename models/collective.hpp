// Model card: collectives (NCCL-style ring and tree algorithms).
// Captures: the time of AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll and
//   Send/Recv of S bytes per rank among n ranks, over the node's NVLink (PCIe without) when the
//   ranks fit in one node, else over the cluster's NIC (the slower link bounds a ring).
// Equation (alpha-beta with nccl-tests' bus-bandwidth factors): t = steps x latency +
//   S x F(kind, n) / link bandwidth (the spec's nominal; NCCL-measured bus bandwidth comes with the
//   multi-GPU calibration), F = busbw / algbw as nccl-tests defines it:
//   AllReduce 2(n-1)/n, AllGather / ReduceScatter / AllToAll (n-1)/n, Broadcast / Reduce / SendRecv 1.
//   Ring steps: AllReduce 2(n-1), the others n-1 (SendRecv 1). Tree (AllReduce, n > 2):
//   2 ceil(log2 n) steps and S x 2 bytes through each rank's link; the faster of the two is taken,
//   as NCCL's tuner does (tree for small messages across many ranks).
// Calibrated: where the spec has node.collectives for the kind (fitted by `bneck calibrate` from
//   validate/nccl/bneck_nccl_bench), t = latency x steps(n)/steps(ranks measured) + S x F / busbw.
// Valid: one collective at a time per link, no contention with other traffic, steady-state link
//   rate; the in-kernel reduction compute is ignored (memory-bound and overlapped in NCCL).
// Source: nccl-tests doc/PERFORMANCE.md (algbw, busbw and the factors); the hw spec's links.
#pragma once
#include <string>

#include "hw/spec.hpp"
#include "traces/ir.hpp"

namespace bneck {

// busbw / algbw as nccl-tests defines it.
double bus_factor(CollKind k, std::uint32_t ranks);

struct CollectiveEstimate {
  TimeNs time_ns = 0;
  std::string algorithm;      // "ring" or "tree" (or "none" for one rank)
  std::string link;           // "nvlink", "pcie", "nic"
  double link_bandwidth = 0;  // bytes/s used
  TimeNs latency_ns = 0;      // alpha part
};

CollectiveEstimate collective_time(const HwSpec& hw, CollKind kind, Bytes bytes, std::uint32_t ranks);

}  // namespace bneck
