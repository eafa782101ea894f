// Occupancy ground truth: what the CUDA occupancy API answers for a grid of configurations
// (registers per thread from kernels capped with __maxnreg__, threads per block, dynamic shared
// memory), with the device's limits. bneck's occupancy calculator is tested against the table
// this prints (validate/reference/h200/occupancy.json).
// Build: nvcc -O3 -arch=sm_90 -o occupancy_table occupancy_table.cu
#include <cstdio>
#include <cstdlib>
#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e = (x);                                                                   \
    if (e != cudaSuccess) {                                                                \
      std::fprintf(stderr, "CUDA error %s at line %d\n", cudaGetErrorString(e), __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

template <int N>
__global__ void __maxnreg__(N) heavy(float* out, int n) {
  float acc[160];
#pragma unroll
  for (int i = 0; i < 160; ++i) acc[i] = out[(threadIdx.x + i * 7) % n] * (i + 1);
#pragma unroll
  for (int r = 0; r < 6; ++r)
#pragma unroll
    for (int i = 0; i < 160; ++i) acc[i] = acc[i] * acc[(i + r * 3 + 1) % 160] + 1.0f;
  float s = 0;
#pragma unroll
  for (int i = 0; i < 160; ++i) s += acc[i];
  out[(blockIdx.x * blockDim.x + threadIdx.x) % n] = s;
}
__global__ void light(float* out, int n) { out[(blockIdx.x * blockDim.x + threadIdx.x) % n] = 1.0f; }
__global__ void with_static_smem(float* out, int n) {
  __shared__ float buf[4096];  // 16 KiB static
  buf[threadIdx.x % 4096] = out[threadIdx.x % n];
  __syncthreads();
  out[(blockIdx.x * blockDim.x + threadIdx.x) % n] = buf[(threadIdx.x + 1) % 4096];
}

typedef void (*Kern)(float*, int);

int main() {
  int dev = 0;
  CK(cudaSetDevice(dev));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, dev));
  std::printf(
      "{\"device\": \"%s\", \"cc\": \"%d.%d\", \"sm_count\": %d, \"regs_per_sm\": %d, \"regs_per_block\": %d,"
      " \"smem_per_sm\": %zu, \"smem_per_block_optin\": %zu, \"reserved_smem_per_block\": %zu,"
      " \"max_threads_per_sm\": %d, \"max_blocks_per_sm\": %d, \"warp_size\": %d,\n \"rows\": [\n",
      p.name, p.major, p.minor, p.multiProcessorCount, p.regsPerMultiprocessor, p.regsPerBlock, p.sharedMemPerMultiprocessor,
      p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock, p.maxThreadsPerMultiProcessor, p.maxBlocksPerMultiProcessor, p.warpSize);
  Kern kerns[] = {light,     with_static_smem, heavy<24>, heavy<32>,  heavy<40>,  heavy<48>,
                  heavy<64>, heavy<72>,        heavy<96>, heavy<128>, heavy<168>, heavy<255>};
  const char* names[] = {"light",     "static16k", "maxnreg24", "maxnreg32",  "maxnreg40",  "maxnreg48",
                         "maxnreg64", "maxnreg72", "maxnreg96", "maxnreg128", "maxnreg168", "maxnreg255"};
  int threads[] = {32, 64, 96, 128, 160, 192, 256, 384, 512, 640, 768, 1024};
  size_t smems[] = {0, 1024, 4000, 8192, 24576, 49152, 65536, 102400, 167936, 232448};
  bool first = true;
  for (int k = 0; k < (int)(sizeof kerns / sizeof kerns[0]); ++k) {
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, kerns[k]));
    CK(cudaFuncSetAttribute(kerns[k], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)(p.sharedMemPerBlockOptin - fa.sharedSizeBytes)));
    for (int t : threads) {
      if (t > fa.maxThreadsPerBlock) continue;
      for (size_t s : smems) {
        if (s + fa.sharedSizeBytes > p.sharedMemPerBlockOptin) continue;
        int blocks = -1;
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kerns[k], t, s));
        std::printf(
            "%s  {\"kernel\": \"%s\", \"threads\": %d, \"regs\": %d, \"static_smem\": %zu, \"dynamic_smem\": %zu,"
            " \"blocks_per_sm\": %d}",
            first ? "" : ",\n", names[k], t, fa.numRegs, fa.sharedSizeBytes, s, blocks);
        first = false;
      }
    }
  }
  std::printf("\n]}\n");
  return 0;
}
