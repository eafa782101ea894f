// Model card: transfers and launch overhead.
// Captures: a copy costs a fixed latency plus bytes over the bandwidth of the path it takes:
//   H2D/D2H pinned over PCIe, pageable through the host staging buffer (the first chunk at the
//   pinned rate, the rest at the host copy rate), D2D through HBM (read
//   and write), peer over NVLink (PCIe without). A kernel launch costs the host its submission
//   time and the GPU a launch latency; a CUDA graph launch submits once and its nodes follow each
//   other after the graph-node latency.
// Equation: t = latency + bytes / bw; D2D: t = 2 * bytes / (HBM * e_m); a calibrated path with a
//   measured curve (device-side copy times per size, CUPTI) interpolates it piecewise linearly;
//   eager launch of n kernels: host n * host_overhead, GPU gaps launch_latency;
//   graph: host graph_launch_overhead, GPU gaps graph_node_latency.
// Valid: copies large enough to reach the link's rate and small ones dominated by latency;
//   contention between concurrent copies in one direction is the engine's copy-engine resource.
// Source: hw/presets (links), $BNECK_EXTRA_TRACES/traces/h200/memcpy.sqlite and decode_*.sqlite (H200 figures).
#pragma once
#include "hw/spec.hpp"
#include "traces/ir.hpp"

namespace bneck {

TimeNs transfer_time(const HwSpec& hw, MemcpyKind kind, MemKind src, MemKind dst, Bytes bytes);
// A measured curve, piecewise linear in bytes: between two points the segment's own latency and
// bandwidth; below the first, the first segment's line (never under half the first point's time);
// past the last, the last segment's bandwidth. `c` is (size, time), sizes ascending, not empty.
TimeNs on_curve(const std::vector<std::pair<Bytes, TimeNs>>& c, double bytes);
TimeNs memset_time(const HwSpec& hw, Bytes bytes);

}  // namespace bneck
