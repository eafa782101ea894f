#include "traces/cuda_api.hpp"

#include <algorithm>

namespace bneck {

std::string_view strip_api_suffix(std::string_view n) {
  for (std::string_view suf : {"_ptsz", "_ptds"})
    if (n.size() > suf.size() && n.substr(n.size() - suf.size()) == suf) n.remove_suffix(suf.size());
  auto p = n.rfind("_v");
  if (p != std::string_view::npos && p + 2 < n.size() &&
      std::all_of(n.begin() + static_cast<long>(p) + 2, n.end(), [](char c) { return c >= '0' && c <= '9'; }))
    n = n.substr(0, p);
  for (std::string_view suf : {"_ptsz", "_ptds"})
    if (n.size() > suf.size() && n.substr(n.size() - suf.size()) == suf) n.remove_suffix(suf.size());
  return n;
}

ApiClass classify_cuda_api(std::string_view n) {
  auto starts = [&](std::string_view p) { return n.substr(0, p.size()) == p; };
  auto has = [&](std::string_view p) { return n.find(p) != std::string_view::npos; };
  if (starts("cudaGraphLaunch") || starts("cuGraphLaunch")) return ApiClass::GraphLaunch;
  if (starts("cudaLaunch") || starts("cuLaunch") || n == "cudaConfigureCall") return ApiClass::Launch;
  if (starts("cudaEventRecord") || starts("cuEventRecord")) return ApiClass::EventRecord;
  if (starts("cudaStreamWaitEvent") || starts("cuStreamWaitEvent")) return ApiClass::StreamWait;
  if (starts("cudaStreamSynchronize") || starts("cuStreamSynchronize")) return ApiClass::StreamSync;
  if (starts("cudaEventSynchronize") || starts("cuEventSynchronize")) return ApiClass::EventSync;
  if (starts("cudaDeviceSynchronize") || starts("cuCtxSynchronize") || starts("cudaThreadSynchronize")) return ApiClass::DeviceSync;
  if (starts("cudaMemcpy") || starts("cudaMemset") || starts("cuMemcpy") || starts("cuMemset")) {
    if (has("Async")) return ApiClass::MemcpyAsync;
    if (has("Peer") || has("ToSymbol") || has("FromSymbol") || has("2D") || has("3D") || has("Array") || starts("cudaMemcpy") ||
        starts("cuMemcpy") || starts("cudaMemset") || starts("cuMemset"))
      return ApiClass::MemcpySync;
  }
  return ApiClass::Other;
}

}  // namespace bneck
