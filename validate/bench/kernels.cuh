// The device code of bneck_validate's microbenchmarks (included once, by bneck_validate.cu).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>

namespace bneck_validate_kernels {

// ---- stream kernels: one element of T per thread ---------------------------------------------
template <typename T>
__device__ __forceinline__ T mul(T a, float s) {
  return a * s;
}
template <>
__device__ __forceinline__ float2 mul(float2 a, float s) {
  return make_float2(a.x * s, a.y * s);
}
template <>
__device__ __forceinline__ float4 mul(float4 a, float s) {
  return make_float4(a.x * s, a.y * s, a.z * s, a.w * s);
}
template <>
__device__ __forceinline__ __nv_bfloat16 mul(__nv_bfloat16 a, float s) {
  return __float2bfloat16(__bfloat162float(a) * s);
}
template <typename T>
__device__ __forceinline__ T add(T a, T b) {
  return a + b;
}
template <>
__device__ __forceinline__ float2 add(float2 a, float2 b) {
  return make_float2(a.x + b.x, a.y + b.y);
}
template <>
__device__ __forceinline__ float4 add(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
template <>
__device__ __forceinline__ __nv_bfloat16 add(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16(__bfloat162float(a) + __bfloat162float(b));
}

template <typename T>
__global__ void k_copy(T* a, const T* b, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) a[i] = b[i];
}
template <typename T>
__global__ void k_scale(T* a, const T* b, size_t n, float s) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) a[i] = mul(b[i], s);
}
template <typename T>
__global__ void k_add(T* a, const T* b, const T* c, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) a[i] = add(b[i], c[i]);
}
template <typename T>
__global__ void k_triad(T* a, const T* b, const T* c, size_t n, float s) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) a[i] = add(b[i], mul(c[i], s));
}

__global__ void k_strided(float* out, const float* in, size_t n, int stride, size_t span) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[(i * stride) % span] * 1.5f;
}

// ---- fused chain (as $BNECK_EXTRA_TRACES/capture/chain.cu) ----------------------------------------------
template <class T>
__device__ float ld(const T* p, size_t i) {
  return (float)p[i];
}
template <>
__device__ float ld(const __nv_bfloat16* p, size_t i) {
  return __bfloat162float(p[i]);
}
template <class T>
__device__ void st(T* p, size_t i, float v) {
  p[i] = (T)v;
}
template <>
__device__ void st(__nv_bfloat16* p, size_t i, float v) {
  p[i] = __float2bfloat16(v);
}
template <class T>
__global__ void op_mul(const T* x, T* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) st(y, i, ld(x, i) * 1.01f);
}
template <class T>
__global__ void op_add(const T* x, T* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) st(y, i, ld(x, i) + 0.5f);
}
template <class T>
__global__ void op_relu(const T* x, T* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) st(y, i, fmaxf(ld(x, i), 0.f));
}
template <class T>
__global__ void op_sq(const T* x, T* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = ld(x, i);
    st(y, i, v * v);
  }
}
template <class T>
__global__ void fused4(const T* x, T* y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = fmaxf(ld(x, i) * 1.01f + 0.5f, 0.f);
    st(y, i, v * v);
  }
}

__global__ void k_reduce(const float4* in, float* out, size_t n4) {
  __shared__ float s[256];
  float acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
    float4 v = in[i];
    acc += v.x + v.y + v.z + v.w;
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

__global__ void k_empty() {}

// Valid, varied e4m3 bytes (0.5 .. 1.0 and their negatives), never zero.
__global__ void k_fill_fp8(unsigned char* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = (unsigned char)(0x30 + (i * 7) % 16) | (unsigned char)((i & 64) << 1);
}

// Row softmax, one block of 256 threads per row, the row held in registers: reads once, writes once.
__global__ void k_softmax(const float* in, float* out, int cols) {
  __shared__ float red[256];
  const float* row = in + (size_t)blockIdx.x * cols;
  float* orow = out + (size_t)blockIdx.x * cols;
  float v[8];
  float mx = -1e30f;
  for (int k = 0; k < 8; ++k) {
    int c = threadIdx.x + k * 256;
    v[k] = c < cols ? row[c] : -1e30f;
    mx = fmaxf(mx, v[k]);
  }
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  float sum = 0;
  for (int k = 0; k < 8; ++k) {
    v[k] = __expf(v[k] - mx);
    sum += (threadIdx.x + k * 256 < cols) ? v[k] : 0.f;
  }
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  float inv = 1.f / red[0];
  for (int k = 0; k < 8; ++k) {
    int c = threadIdx.x + k * 256;
    if (c < cols) orow[c] = v[k] * inv;
  }
}

// Shared-memory tiled SGEMM, TILE x TILE tiles, one output element per thread.
template <int TILE>
__global__ void k_tiled_gemm(const float* A, const float* B, float* C, int n) {
  __shared__ float As[TILE][TILE], Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0;
  for (int t = 0; t < n; t += TILE) {
    As[threadIdx.y][threadIdx.x] = A[(size_t)row * n + t + threadIdx.x];
    Bs[threadIdx.y][threadIdx.x] = B[(size_t)(t + threadIdx.y) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  C[(size_t)row * n + col] = acc;
}

// A streaming copy whose occupancy is forced down by dynamic shared memory.
__global__ void k_copy_smem(float4* a, const float4* b, size_t n) {
  extern __shared__ char pad[];
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) pad[0] = 0;
  if (i < n) a[i] = b[i];
}

// A fixed amount of arithmetic on a few blocks (for concurrency across streams).
__global__ void k_spin(float* out, int iters) {
  float x = threadIdx.x * 1e-3f;
  for (int i = 0; i < iters; ++i) x = x * 1.0000001f + 1e-7f;
  if (x == 42.f) out[0] = x;
}

}  // namespace bneck_validate_kernels
