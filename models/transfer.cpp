#include "models/transfer.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace bneck {

namespace {
TimeNs over(double bytes, double bw) { return bw > 0 ? static_cast<TimeNs>(std::llround(bytes / bw * 1e9)) : 0; }

}  // namespace

TimeNs on_curve(const std::vector<std::pair<Bytes, TimeNs>>& c, double b) {
  if (c.size() == 1) return c[0].second;
  std::size_t i = 1;
  while (i + 1 < c.size() && static_cast<double>(c[i].first) < b) ++i;
  const double x0 = static_cast<double>(c[i - 1].first), x1 = static_cast<double>(c[i].first);
  const double y0 = static_cast<double>(c[i - 1].second), y1 = static_cast<double>(c[i].second);
  double slope = std::max(0.0, (y1 - y0) / (x1 - x0));
  double t = y0 + (b - x0) * slope;
  if (b < x0) t = std::max(t, 0.5 * y0);
  return static_cast<TimeNs>(std::llround(std::max(t, 0.0)));
}
TimeNs transfer_time(const HwSpec& hw, MemcpyKind kind, MemKind src, MemKind dst, Bytes bytes) {
  const auto b = static_cast<double>(bytes);
  const NodeSpec& n = hw.node;
  bool pageable = src == MemKind::Pageable || dst == MemKind::Pageable;
  if (!n.copy_paths.empty()) {  // calibrated paths
    const char* path = nullptr;
    switch (kind) {
      case MemcpyKind::HtoD:
      case MemcpyKind::HtoA:
      case MemcpyKind::UvmHtoD: path = pageable ? "h2d_pageable" : "h2d_pinned"; break;
      case MemcpyKind::DtoH:
      case MemcpyKind::AtoH:
      case MemcpyKind::UvmDtoH: path = pageable ? "d2h_pageable" : "d2h_pinned"; break;
      case MemcpyKind::DtoD:
      case MemcpyKind::AtoA:
      case MemcpyKind::AtoD:
      case MemcpyKind::DtoA:
      case MemcpyKind::UvmDtoD: path = "d2d"; break;
      default: break;
    }
    if (path) {
      auto it = n.copy_paths.find(path);
      std::string ps(path);
      if (it != n.copy_paths.end() && !it->second.curve.empty()) return on_curve(it->second.curve, b);
      if (it != n.copy_paths.end() && pageable && n.pageable_chunk > 0) {
        // A trace's device op for a pageable copy: the first staging chunk moves like a pinned copy,
        // the rest at the host's staging rate.
        auto pinned = n.copy_paths.find(ps.substr(0, 4) + "pinned");
        if (pinned != n.copy_paths.end()) {
          double first = std::min(b, static_cast<double>(n.pageable_chunk));
          return pinned->second.latency + over(first, pinned->second.bandwidth) + over(b - first, it->second.bandwidth);
        }
      }
      if (it != n.copy_paths.end()) return it->second.latency + over(ps == "d2d" ? 2 * b : b, it->second.bandwidth);
    }
  }
  switch (kind) {
    case MemcpyKind::HtoD:
    case MemcpyKind::DtoH:
    case MemcpyKind::HtoA:
    case MemcpyKind::AtoH:
    case MemcpyKind::UvmHtoD:
    case MemcpyKind::UvmDtoH:
      if (!pageable || n.pageable_bandwidth <= 0) return n.pcie_latency + over(b, n.pcie_bandwidth);
      {
        // Through the staging buffer: the first chunk at the pinned rate, the rest at the host's.
        double first = std::min(b, static_cast<double>(n.pageable_chunk));
        return n.pcie_latency + over(first, n.pcie_bandwidth) + over(b - first, n.pageable_bandwidth);
      }
    case MemcpyKind::PtoP:
      return (n.nvlink_bandwidth > 0 ? n.nvlink_latency : n.pcie_latency) +
             over(b, n.nvlink_bandwidth > 0 ? n.nvlink_bandwidth : n.pcie_bandwidth);
    case MemcpyKind::HtoH: return over(b, n.pageable_bandwidth > 0 ? n.pageable_bandwidth : n.pcie_bandwidth);
    default:  // device to device: read and write through HBM
      return hw.gpu.kernel_tail + over(2 * b, hw.gpu.memory_bandwidth * hw.gpu.memory_efficiency);
  }
}

TimeNs memset_time(const HwSpec& hw, Bytes bytes) {
  return hw.gpu.kernel_tail + over(static_cast<double>(bytes), hw.gpu.memory_bandwidth * hw.gpu.memory_efficiency);
}

}  // namespace bneck
