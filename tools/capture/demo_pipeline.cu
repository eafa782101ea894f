// The bundled demo workload (traces/data/demo_pipeline.sqlite was captured from it on an H200).
// Per iteration, inside NVTX range "iterN": H2D copy, a producer kernel, an event edge to two
// consumer streams (a memory-bound elementwise kernel and a spin kernel), a 3-kernel CUDA graph,
// a join, a D2H copy and a stream synchronize; then a short host gap.
// Build: nvcc -O3 -arch=sm_90 -o demo_pipeline demo_pipeline.cu
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <nvtx3/nvToolsExt.h>
#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e = (x);                                                                   \
    if (e != cudaSuccess) {                                                                \
      std::fprintf(stderr, "CUDA error %s at line %d\n", cudaGetErrorString(e), __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

__device__ void spin_for(long long cycles) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
}
__global__ void produce(const float* in, float* out, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) out[i] = in[i] * 1.5f + 1.0f;
}
__global__ void axpy(const float* x, float* y, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) y[i] = 2.0f * x[i] + y[i];
}
__global__ void spin(long long c, int* s) {
  spin_for(c);
  if (!threadIdx.x) s[blockIdx.x] = 1;
}
__global__ void scale(float* y, size_t n, float a) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) y[i] *= a;
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? std::atoi(argv[1]) : 6;
  int dev;
  CK(cudaGetDevice(&dev));
  int khz = 0;
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  auto us = [&](double u) { return (long long)(u * khz / 1000.0); };
  const size_t n = 1 << 24;  // 64 MiB of floats
  const size_t copy_b = 16u << 20;
  float *a, *b, *c;
  int* sink;
  void *h_in, *h_out;
  CK(cudaMalloc(&a, n * 4));
  CK(cudaMalloc(&b, n * 4));
  CK(cudaMalloc(&c, n * 4));
  CK(cudaMalloc(&sink, 1 << 16));
  CK(cudaMallocHost(&h_in, copy_b));
  CK(cudaMallocHost(&h_out, copy_b));
  for (size_t i = 0; i < copy_b / 4; ++i) ((float*)h_in)[i] = (float)(i % 977) * 0.5f;
  CK(cudaMemset(b, 1, n * 4));
  CK(cudaMemset(c, 2, n * 4));
  cudaStream_t sa, sb, sc;
  CK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
  cudaEvent_t e_prod, e_b, e_c;
  for (auto* ev : {&e_prod, &e_b, &e_c}) CK(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
  // A small CUDA graph: three dependent elementwise kernels, captured on stream C.
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(sc, cudaStreamCaptureModeGlobal));
  scale<<<264, 256, 0, sc>>>(c, n / 4, 0.5f);
  scale<<<264, 256, 0, sc>>>(c, n / 4, 2.0f);
  scale<<<264, 256, 0, sc>>>(c, n / 4, 1.0f);
  CK(cudaStreamEndCapture(sc, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaDeviceSynchronize());
  for (int it = 0; it < iters; ++it) {
    char nm[32];
    std::snprintf(nm, sizeof nm, "iter%d", it);
    nvtxRangePushA(nm);
    CK(cudaMemcpyAsync(a, h_in, copy_b, cudaMemcpyHostToDevice, sa));
    produce<<<528, 256, 0, sa>>>(a, b, n);
    CK(cudaEventRecord(e_prod, sa));
    CK(cudaStreamWaitEvent(sb, e_prod));
    CK(cudaStreamWaitEvent(sc, e_prod));
    nvtxRangePushA("consumers");
    axpy<<<528, 256, 0, sb>>>(b, c, n);
    spin<<<8, 64, 0, sb>>>(us(300), sink);
    CK(cudaGraphLaunch(ge, sc));
    spin<<<8, 64, 0, sc>>>(us(150), sink + 64);
    nvtxRangePop();
    CK(cudaEventRecord(e_b, sb));
    CK(cudaEventRecord(e_c, sc));
    CK(cudaStreamWaitEvent(sa, e_b));
    CK(cudaStreamWaitEvent(sa, e_c));
    axpy<<<528, 256, 0, sa>>>(c, b, n);
    CK(cudaMemcpyAsync(h_out, b, copy_b, cudaMemcpyDeviceToHost, sa));
    CK(cudaStreamSynchronize(sa));
    nvtxRangePop();
    usleep(200);
  }
  CK(cudaGetLastError());
  std::printf("demo_pipeline: %d iterations, checksum %f\n", iters, (double)((float*)h_out)[12345]);
  return 0;
}
