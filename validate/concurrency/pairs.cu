// Concurrent kernels on one GPU for the contention model: each kernel alone, then two at
// once on two streams, in NVTX ranges (5 rounds each). Copy kernels with a grid-stride loop at full
// occupancy (8 blocks of 256 threads per SM) and at half (4 per SM), a cuBLAS bf16 GEMM (8192^3),
// device-to-device cudaMemcpyAsync (copy engines), pinned host copies over PCIe (H2D pairs, H2D
// beside D2H), a copy kernel beside a D2D copy. Prints CUDA-event medians per case.
// Build: nvcc -O3 -arch=sm_90 -o pairs pairs.cu -lcublas -lnvToolsExt (nvtx3 is header-only)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <nvtx3/nvToolsExt.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>
#define CK(x)                                                           \
  do {                                                                  \
    cudaError_t e = (x);                                                \
    if (e != cudaSuccess) {                                             \
      printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

__global__ void k_copy(float4* __restrict__ a, const float4* __restrict__ b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) a[i] = b[i];
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t bytes = 1ull << 30, n4 = bytes / 16;
  float4 *a1, *b1, *a2, *b2;
  for (auto** p : {&a1, &b1, &a2, &b2}) {
    CK(cudaMalloc(p, bytes));
    CK(cudaMemset(*p, 1, bytes));
  }
  const int D = 8192;
  __nv_bfloat16 *x1, *y1, *z1, *x2, *y2, *z2;
  for (auto** p : {&x1, &y1, &z1, &x2, &y2, &z2}) {
    CK(cudaMalloc(p, (size_t)D * D * 2));
    CK(cudaMemset(*p, 0x3c, (size_t)D * D * 2));
  }
  cudaStream_t sa, sb;
  CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  cublasHandle_t ha, hb;
  cublasCreate(&ha);
  cublasCreate(&hb);
  cublasSetStream(ha, sa);
  cublasSetStream(hb, sb);
  float alpha = 1, beta = 0;
  auto gemm = [&](cublasHandle_t h, __nv_bfloat16* x, __nv_bfloat16* y, __nv_bfloat16* z) {
    cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, D, D, D, &alpha, x, CUDA_R_16BF, D, y, CUDA_R_16BF, D, &beta, z, CUDA_R_16BF, D,
                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  auto copyk = [&](int per_sm, cudaStream_t s, float4* a, float4* b) { k_copy<<<sms * per_sm, 256, 0, s>>>(a, b, n4); };
  using F = std::function<void()>;
  F cf1 = [&] { copyk(8, sa, a1, b1); }, cf2 = [&] { copyk(8, sb, a2, b2); };
  F ch1 = [&] { copyk(4, sa, a1, b1); }, ch2 = [&] { copyk(4, sb, a2, b2); };
  F g1 = [&] { gemm(ha, x1, y1, z1); }, g2 = [&] { gemm(hb, x2, y2, z2); };
  F m1 = [&] { CK(cudaMemcpyAsync(b1, a1, bytes, cudaMemcpyDeviceToDevice, sa)); };
  F m2 = [&] { CK(cudaMemcpyAsync(b2, a2, bytes, cudaMemcpyDeviceToDevice, sb)); };
  F gb = [&] { gemm(hb, x2, y2, z2); };
  // Host copies over PCIe (pinned, 256 MiB each way): two H2D share the link's direction; an H2D and
  // a D2H use both directions.
  const size_t hbytes = 256ull << 20;
  char *h1, *h2, *h3;
  for (auto** p : {&h1, &h2, &h3}) {
    CK(cudaMallocHost(p, hbytes));
    memset(*p, 1, hbytes);
  }
  F hd1 = [&] { CK(cudaMemcpyAsync(a1, h1, hbytes, cudaMemcpyHostToDevice, sa)); };
  F hd2 = [&] { CK(cudaMemcpyAsync(a2, h2, hbytes, cudaMemcpyHostToDevice, sb)); };
  F dh2 = [&] { CK(cudaMemcpyAsync(h3, b2, hbytes, cudaMemcpyDeviceToHost, sb)); };
  F md2 = [&] { CK(cudaMemcpyAsync(b2, a2, bytes, cudaMemcpyDeviceToDevice, sb)); };
  std::vector<std::pair<std::string, std::vector<F>>> cases = {
      {"copy_alone", {cf1}},       {"copy2_alone", {cf2}},        {"copy_copy", {cf1, cf2}},     {"half_alone", {ch1}},
      {"half2_alone", {ch2}},      {"half_half", {ch1, ch2}},     {"gemm_alone", {g1}},          {"gemm2_alone", {g2}},
      {"gemm_gemm", {g1, g2}},     {"copy_then_gemm", {cf1, gb}}, {"gemm_then_copy", {g1, cf2}}, {"half_then_gemm", {ch1, gb}},
      {"memcpy_alone", {m1}},      {"memcpy2_alone", {m2}},       {"memcpy_memcpy", {m1, m2}},   {"h2d_alone", {hd1}},
      {"h2d2_alone", {hd2}},       {"h2d_h2d", {hd1, hd2}},       {"d2h_alone", {dh2}},          {"h2d_d2h", {hd1, dh2}},
      {"copy_memcpy", {cf1, md2}}, {"h2d_copy", {hd1, cf2}},
  };
  cudaEvent_t e0, e1, ea, eb;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreateWithFlags(&ea, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&eb, cudaEventDisableTiming));
  for (int w = 0; w < 3; ++w)
    for (auto& [name, fs] : cases) {
      for (auto& f : fs) f();
      CK(cudaDeviceSynchronize());
    }
  sleep(1);
  printf("{\"event_ms_median\": {");
  bool first = true;
  for (auto& [name, fs] : cases) {
    std::vector<float> ts;
    for (int r = 0; r < 5; ++r) {
      CK(cudaDeviceSynchronize());
      CK(cudaEventRecord(e0, 0));
      CK(cudaStreamWaitEvent(sa, e0));
      CK(cudaStreamWaitEvent(sb, e0));
      nvtxRangePushA(name.c_str());
      for (auto& f : fs) f();
      nvtxRangePop();
      CK(cudaEventRecord(ea, sa));
      CK(cudaEventRecord(eb, sb));
      CK(cudaStreamWaitEvent(0, ea));
      CK(cudaStreamWaitEvent(0, eb));
      CK(cudaEventRecord(e1, 0));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      ts.push_back(ms);
      usleep(2000);
    }
    std::sort(ts.begin(), ts.end());
    printf("%s\"%s\": %.4f", first ? "" : ", ", name.c_str(), ts[2]);
    first = false;
  }
  printf("}, \"sms\": %d}\n", sms);
  CK(cudaGetLastError());
  return 0;
}
