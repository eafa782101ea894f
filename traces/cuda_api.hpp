// CUDA runtime and driver API names, as both the nsys and the Kineto importers see them.
#pragma once
#include <string_view>

#include "traces/ir.hpp"

namespace bneck {

// Maps a CUDA runtime/driver API name (version suffix already stripped) to its class.
ApiClass classify_cuda_api(std::string_view name);
// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel"; "cudaMemcpyAsync_ptsz" -> "cudaMemcpyAsync".
std::string_view strip_api_suffix(std::string_view name);

}  // namespace bneck
