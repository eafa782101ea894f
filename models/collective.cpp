#include "models/collective.hpp"

#include "models/transfer.hpp"

#include <algorithm>
#include <cmath>

namespace bneck {

double bus_factor(CollKind k, std::uint32_t ranks) {
  const double n = std::max<std::uint32_t>(1, ranks);
  switch (k) {
    case CollKind::AllReduce: return 2.0 * (n - 1) / n;
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
    case CollKind::AllToAll: return (n - 1) / n;
    case CollKind::Broadcast:
    case CollKind::Reduce:
    case CollKind::SendRecv: return 1.0;
    case CollKind::Unknown: break;
  }
  return 1.0;
}

namespace {
// Latency steps of a ring: AllReduce 2(n-1), Send/Recv 1, the others n-1.
double ring_steps(CollKind k, double n) { return k == CollKind::AllReduce ? 2 * (n - 1) : k == CollKind::SendRecv ? 1 : n - 1; }
}  // namespace

namespace {
// One calibrated path's time for `s` bytes on `ranks`: its fitted latency and bus bandwidth, or its
// measured curve on its rank count moved to `ranks` (latency by the ring's steps, the rest by the
// bus factor).
CollectiveEstimate calibrated(const NodeSpec::CollectivePath& c, CollKind kind, double s, std::uint32_t ranks, double steps) {
  CollectiveEstimate e;
  const double rc = std::max<std::uint32_t>(2, c.ranks);
  const double steps_c = ring_steps(kind, rc);
  const double alpha = static_cast<double>(c.latency) * (steps_c > 0 ? steps / steps_c : 1.0);
  e.link_bandwidth = c.bus_bandwidth;
  e.latency_ns = static_cast<TimeNs>(std::llround(alpha));
  e.time_ns = static_cast<TimeNs>(std::llround(alpha + s * bus_factor(kind, ranks) / c.bus_bandwidth * 1e9));
  if (!c.curve.empty()) {
    const double first = static_cast<double>(c.curve.front().second), at = static_cast<double>(on_curve(c.curve, s));
    const double fc = bus_factor(kind, static_cast<std::uint32_t>(rc));
    const double scale = fc > 0 ? bus_factor(kind, ranks) / fc : 1.0;
    const double lat_n = first * (steps_c > 0 ? steps / steps_c : 1.0);
    e.latency_ns = static_cast<TimeNs>(std::llround(lat_n));
    e.time_ns = static_cast<TimeNs>(std::llround(lat_n + std::max(0.0, at - first) * scale));
  }
  return e;
}
}  // namespace

CollectiveEstimate collective_time(const HwSpec& hw, CollKind kind, Bytes bytes, std::uint32_t ranks) {
  CollectiveEstimate e;
  if (ranks <= 1 && kind != CollKind::SendRecv) {
    e.algorithm = "none";
    e.time_ns = hw.gpu.kernel_tail;
    return e;
  }
  const NodeSpec& node = hw.node;
  const bool intra = ranks <= std::max<std::uint32_t>(1, node.gpus);
  double bw = node.nvlink_bandwidth > 0 ? node.nvlink_bandwidth : node.pcie_bandwidth;
  TimeNs lat = node.nvlink_bandwidth > 0 ? node.nvlink_latency : node.pcie_latency;
  e.link = node.nvlink_bandwidth > 0 ? "nvlink" : "pcie";
  if (!intra && hw.cluster.nic_bandwidth > 0) {
    bw = std::min(bw > 0 ? bw : hw.cluster.nic_bandwidth, hw.cluster.nic_bandwidth);
    lat = std::max(lat, hw.cluster.nic_latency);
    e.link = "nic";
  }
  if (lat <= 0) lat = 2 * kNsPerUs;  // no figure in the spec: NCCL's per-step latency order
  if (bw <= 0) bw = 10e9;
  const double s = static_cast<double>(bytes), n = std::max<std::uint32_t>(1, ranks);
  double steps = ring_steps(kind, n);
  // Measured on this node (validate/nccl): the fitted latency (scaled by the ring's steps) and bus
  // bandwidth of the kind, or its measured curve, on the calibrated rank count nearest; with curves
  // at rank counts below and above (a key "all_reduce@8" beside "all_reduce"), the two moved to
  // n and interpolated geometrically in log2 ranks (NCCL's bus bandwidth grows with the ranks on
  // NVSwitch nodes, which the ring's factor alone does not say).
  if (intra) {
    const NodeSpec::CollectivePath *lo = nullptr, *hi = nullptr;
    const std::string k = to_string(kind);
    for (const auto& [key, c] : node.collectives) {
      if (c.bus_bandwidth <= 0 || (key != k && key.rfind(k + "@", 0) != 0)) continue;
      const std::uint32_t rc = std::max<std::uint32_t>(2, c.ranks);
      if (rc <= n && (!lo || rc > std::max<std::uint32_t>(2, lo->ranks))) lo = &c;
      if (rc >= n && (!hi || rc < std::max<std::uint32_t>(2, hi->ranks))) hi = &c;
    }
    if (lo || hi) {
      e.algorithm = "calibrated";
      e.link = "nvlink (measured)";
      const CollectiveEstimate a = calibrated(lo ? *lo : *hi, kind, s, ranks, steps);
      e.link_bandwidth = a.link_bandwidth;
      e.latency_ns = a.latency_ns;
      e.time_ns = a.time_ns;
      if (lo && hi && lo != hi) {
        const CollectiveEstimate b = calibrated(*hi, kind, s, ranks, steps);
        const double rl = std::log2(std::max<std::uint32_t>(2, lo->ranks)), rh = std::log2(std::max<std::uint32_t>(2, hi->ranks));
        const double w = (std::log2(n) - rl) / (rh - rl);
        auto mix = [&](double x, double y) { return x > 0 && y > 0 ? std::exp((1 - w) * std::log(x) + w * std::log(y)) : x; };
        e.time_ns = static_cast<TimeNs>(std::llround(mix(static_cast<double>(a.time_ns), static_cast<double>(b.time_ns))));
        e.latency_ns = static_cast<TimeNs>(std::llround(mix(static_cast<double>(a.latency_ns), static_cast<double>(b.latency_ns))));
        e.link_bandwidth = mix(a.link_bandwidth, b.link_bandwidth);
      }
      return e;
    }
  }
  double ring = steps * static_cast<double>(lat) + s * bus_factor(kind, ranks) / bw * 1e9;
  e.algorithm = "ring";
  e.time_ns = static_cast<TimeNs>(std::llround(ring));
  e.latency_ns = static_cast<TimeNs>(std::llround(steps * static_cast<double>(lat)));
  if (kind == CollKind::AllReduce && ranks > 2) {
    double tsteps = 2 * std::ceil(std::log2(n));
    double tree = tsteps * static_cast<double>(lat) + 2 * s / bw * 1e9;
    if (tree < ring) {
      e.algorithm = "tree";
      e.time_ns = static_cast<TimeNs>(std::llround(tree));
      e.latency_ns = static_cast<TimeNs>(std::llround(tsteps * static_cast<double>(lat)));
    }
  }
  e.link_bandwidth = bw;
  e.time_ns += hw.gpu.kernel_tail;
  return e;
}

}  // namespace bneck
