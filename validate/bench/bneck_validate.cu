// bneck_validate: CUDA microbenchmarks that measure what bneck's models need on this GPU.
// Families: stream (copy/scale/add/triad at 2/4/8/16-byte accesses), l2 (L2-resident copy),
// strided (stride 1..32 reads: the coalescing model), fused (a 4-op elementwise chain, unfused vs
// fused, fp32 and bf16), reduction (sum), softmax (fused row softmax), tiled_gemm (own shared-memory
// SGEMM, tiles 8/16/32), occupancy (a copy with shared memory forced up), concurrency (kernels on
// 1..8 streams), gemm (cuBLAS FP32, TF32, BF16, FP16; cuBLASLt FP8), launch (empty kernels, eager
// vs CUDA graph),
// memcpy (H2D/D2H pinned and pageable, D2D, 4 KiB..1 GiB).
// Timing: warm-up, CUDA events, median of repeats, buffers rotated past the L2 where the family
// streams from HBM, inputs filled with non-zero data, every CUDA call checked. Copies are timed on
// the device by CUPTI activity records (what Nsight Systems reports as the copy's duration, without
// the submission that CUDA events around one copy also see); the event time is kept as event_ns.
// Output: one JSON document (device properties, driver, clocks, git commit, measurements).
// Usage: bneck_validate [--quick] [--only FAMILY] [--commit SHA] > measurements.json
#include <cublasLt.h>
#include <cupti.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels.cuh"
#include "host.cuh"

using namespace bneck_validate_kernels;

namespace {

template <typename T>
void stream_family(const char* tname, const std::vector<size_t>& sizes, char* pool, size_t pool_bytes, int reps, const char* family) {
  for (size_t bytes : sizes) {
    size_t n = bytes / sizeof(T);
    unsigned blocks = (unsigned)((n + 255) / 256);
    // Rotate among as many (a, b, c) sets as fit in the pool so that repeats do not hit the L2.
    size_t sets = std::max<size_t>(1, std::min<size_t>(8, pool_bytes / (3 * bytes)));
    auto ptr = [&](int r, int k) { return (T*)(pool + ((size_t)r % sets) * 3 * bytes + (size_t)k * bytes); };
    struct Op {
      const char* name;
      int arrays;
    };
    for (Op op : {Op{"copy", 2}, Op{"scale", 2}, Op{"add", 3}, Op{"triad", 3}}) {
      double ms = median_ms(
          [&](int r) {
            T *a = ptr(r, 0), *b = ptr(r, 1), *c = ptr(r, 2);
            if (!std::strcmp(op.name, "copy"))
              k_copy<T><<<blocks, 256>>>(a, b, n);
            else if (!std::strcmp(op.name, "scale"))
              k_scale<T><<<blocks, 256>>>(a, b, n, 1.0001f);
            else if (!std::strcmp(op.name, "add"))
              k_add<T><<<blocks, 256>>>(a, b, c, n);
            else
              k_triad<T><<<blocks, 256>>>(a, b, c, n, 1.0001f);
            KCHECK();
          },
          reps);
      record(family, std::string(op.name) + "_" + tname,
             ks("op", op.name) + ", " + kv("width_bytes", sizeof(T)) + ", " + kv("array_bytes", (double)bytes) + ", " +
                 kv("blocks", blocks) + ", " + kv("threads", 256),
             (double)op.arrays * bytes, op.arrays == 3 && op.name[0] == 't' ? 2.0 * n : (double)n, ms * 1e6, reps);
    }
  }
}

template <class T>
void fused_family(const char* tname, const std::vector<size_t>& elems, char* pool, int reps) {
  for (size_t n : elems) {
    T *x = (T*)pool, *a = x + n, *b = a + n;
    unsigned nb = (unsigned)((n + 255) / 256);
    double un = median_ms(
        [&](int) {
          op_mul<<<nb, 256>>>(x, a, n);
          op_add<<<nb, 256>>>(a, b, n);
          op_relu<<<nb, 256>>>(b, a, n);
          op_sq<<<nb, 256>>>(a, b, n);
          KCHECK();
        },
        reps);
    record("fused", std::string("chain4_") + tname, kv("elems", (double)n) + ", " + kv("width_bytes", sizeof(T)) + ", " + kv("kernels", 4),
           8.0 * n * sizeof(T), 5.0 * n, un * 1e6, reps);
    double fu = median_ms(
        [&](int) {
          fused4<<<nb, 256>>>(x, b, n);
          KCHECK();
        },
        reps);
    record("fused", std::string("fused4_") + tname, kv("elems", (double)n) + ", " + kv("width_bytes", sizeof(T)) + ", " + kv("kernels", 1),
           2.0 * n * sizeof(T), 5.0 * n, fu * 1e6, reps);
  }
}

constexpr size_t MiB = 1ull << 20;

// What every family needs: the device pool (filled with non-zero data) and the repeats.
struct Bench {
  char* pool;
  size_t pool_bytes;
  int reps;
  bool quick;
  int sm_count;
};

// l2: arrays small enough to stay in the L2 between repeats.
void l2_family(const Bench& bench) {
  char* pool = bench.pool;
  const int reps = bench.reps;
  std::vector<size_t> lsz = {1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB, 12 * MiB};
  for (size_t bytes : lsz) {
    size_t n = bytes / 16;
    unsigned blocks = (unsigned)((n + 255) / 256);
    float4 *a = (float4*)pool, *b = (float4*)(pool + bytes);
    double ms = median_ms(
        [&](int) {
          for (int k = 0; k < 20; ++k) k_copy<float4><<<blocks, 256>>>(a, b, n);
          KCHECK();
        },
        reps);
    record("l2", "copy_f32x4_l2",
           kv("width_bytes", 16) + ", " + kv("array_bytes", (double)bytes) + ", " + kv("blocks", blocks) + ", " + kv("threads", 256),
           2.0 * bytes, 0, ms * 1e6 / 20, reps);
  }
}

// strided reads: stride 1..32 floats within a 1 GiB region, each element read at most once
// (2^28 / stride threads, at most 2^26).
void strided_family(const Bench& bench) {
  char* pool = bench.pool;
  const int reps = bench.reps;
  for (int stride : {1, 2, 4, 8, 16, 32}) {
    size_t span = (1ull << 30) / 4, n = std::min<size_t>(1ull << 26, span / stride);
    float *out = (float*)(pool + (2ull << 30) - n * 4 - 4096), *in = (float*)pool;
    double ms = median_ms(
        [&](int) {
          k_strided<<<(unsigned)(n / 256), 256>>>(out, in, n, stride, span);
          KCHECK();
        },
        reps);
    record("strided", "strided_read_f32",
           kv("stride", stride) + ", " + kv("width_bytes", 4) + ", " + kv("elems", (double)n) + ", " + kv("blocks", (double)(n / 256)) +
               ", " + kv("threads", 256),
           8.0 * n, (double)n, ms * 1e6, reps);
  }
}

// reductions.
void reduction_family(const Bench& bench, const std::vector<size_t>& ssz) {
  char* pool = bench.pool;
  const size_t pool_bytes = bench.pool_bytes;
  const int reps = bench.reps;
  for (size_t bytes : ssz) {
    float* out = (float*)(pool + pool_bytes - 4096);
    double ms = median_ms(
        [&](int) {
          k_reduce<<<bench.sm_count * 8, 256>>>((const float4*)pool, out, bytes / 16);
          KCHECK();
        },
        reps);
    record("reduction", "sum_f32",
           kv("array_bytes", (double)bytes) + ", " + kv("width_bytes", 16) + ", " + kv("blocks", bench.sm_count * 8.0) + ", " +
               kv("threads", 256),
           (double)bytes, bytes / 4.0, ms * 1e6, reps);
  }
}

// softmax: rows of 2048 floats.
void softmax_family(const Bench& bench) {
  char* pool = bench.pool;
  const int reps = bench.reps;
  for (size_t rows : {8192ul, 32768ul, 131072ul}) {
    int cols = 2048;
    float *in = (float*)pool, *out = (float*)(pool + rows * cols * 4);
    double ms = median_ms(
        [&](int) {
          k_softmax<<<(unsigned)rows, 256>>>(in, out, cols);
          KCHECK();
        },
        reps);
    record("softmax", "softmax_f32", kv("rows", (double)rows) + ", " + kv("cols", cols) + ", " + kv("width_bytes", 4),
           2.0 * rows * cols * 4, 5.0 * rows * cols, ms * 1e6, reps);
  }
}

// tiled sgemm (own kernels): tile widths 8, 16, 32 at n = 2048 and 4096.
void tiled_gemm_family(const Bench& bench) {
  char* pool = bench.pool;
  const int reps = bench.reps;
  for (int n : {2048, 4096}) {
    float *A = (float*)pool, *B = A + (size_t)n * n, *C = B + (size_t)n * n;
    auto run = [&](int tile) {
      dim3 block(tile, tile), grid(n / tile, n / tile);
      return median_ms(
          [&](int) {
            if (tile == 8)
              k_tiled_gemm<8><<<grid, block>>>(A, B, C, n);
            else if (tile == 16)
              k_tiled_gemm<16><<<grid, block>>>(A, B, C, n);
            else
              k_tiled_gemm<32><<<grid, block>>>(A, B, C, n);
            KCHECK();
          },
          std::max(3, reps / 3));
    };
    for (int tile : {8, 16, 32}) {
      double ms = run(tile);
      // Global traffic of the tiling: each of the (n/tile)^2 blocks loads 2 * n * tile floats.
      double bytes = 2.0 * n * (double)n * n / tile * 4 + (double)n * n * 4;
      record("tiled_gemm", "tiled_sgemm", kv("tile", tile) + ", " + kv("m", n) + ", " + kv("n", n) + ", " + kv("k", n), bytes,
             2.0 * n * (double)n * n, ms * 1e6, std::max(3, reps / 3));
    }
  }
}

// occupancy: a 16-byte copy of 512 MiB with 0..200 KiB of dynamic shared memory per block.
void occupancy_family(const Bench& bench) {
  char* pool = bench.pool;
  const int reps = bench.reps;
  size_t bytes = 512 * MiB, n = bytes / 16;
  CK(cudaFuncSetAttribute(k_copy_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  for (int kib : {0, 16, 48, 100, 200}) {
    int blocks_per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, k_copy_smem, 256, std::max(16, kib * 1024)));
    double ms = median_ms(
        [&](int r) {
          float4 *a = (float4*)(pool + (size_t)(r % 2) * 2 * bytes), *b = (float4*)(pool + (size_t)(r % 2) * 2 * bytes + bytes);
          k_copy_smem<<<(unsigned)(n / 256), 256, std::max(16, kib * 1024)>>>(a, b, n);  // the kernel touches 1 byte
          KCHECK();
        },
        reps);
    record("occupancy", "copy_f32x4_smem",
           kv("smem_kib", kib) + ", " + kv("blocks_per_sm", blocks_per_sm) + ", " + kv("threads", 256) + ", " + kv("width_bytes", 16) +
               ", " + kv("array_bytes", (double)bytes),
           2.0 * bytes, 0, ms * 1e6, reps);
  }
}

// concurrency: 8 small spin kernels (8 blocks each) on 1, 2, 4 and 8 streams.
void concurrency_family(const Bench& bench) {
  char* pool = bench.pool;
  const int reps = bench.reps;
  cudaStream_t ss[8];
  for (auto& x : ss) CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  cudaEvent_t done[8];
  for (auto& e : done) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (int streams : {1, 2, 4, 8}) {
    double ms = median_ms(
        [&](int) {
          for (int k = 0; k < 8; ++k) {
            cudaStream_t st = ss[k % streams];
            if (k < streams) {
              CK(cudaEventRecord(done[k], 0));
              CK(cudaStreamWaitEvent(st, done[k]));
            }
            k_spin<<<8, 64, 0, st>>>((float*)pool, 200000);
          }
          for (int k = 0; k < streams; ++k) {
            CK(cudaEventRecord(done[k], ss[k]));
            CK(cudaStreamWaitEvent(0, done[k]));
          }
          KCHECK();
        },
        reps);
    record(
        "concurrency", "spin_8_kernels",
        kv("streams", streams) + ", " + kv("kernels", 8) + ", " + kv("blocks", 8) + ", " + kv("threads", 64) + ", " + kv("iters", 200000),
        0, 2.0 * 8 * 8 * 64 * 200000, ms * 1e6, reps);
  }
  for (auto& e : done) CK(cudaEventDestroy(e));
  for (auto& x : ss) CK(cudaStreamDestroy(x));
}

// gemm: cuBLAS, square m = n = k.
void gemm_family(const Bench& bench, const std::vector<int>& dims) {
  char* pool = bench.pool;
  const int reps = bench.reps;
  cublasHandle_t h;
  CB(cublasCreate(&h));
  struct G {
    const char* name;
    cudaDataType_t t;
    cublasComputeType_t c;
    int bytes;
  };
  G gs[] = {{"fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F, 4},
            {"tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4},
            {"bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2},
            {"fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, 2}};
  for (const G& g : gs)
    for (int d : dims) {
      size_t mat = (size_t)d * d * g.bytes;
      char *A = pool, *B = pool + mat, *C = pool + 2 * mat;
      // Random-ish data in the operand type (not zeros).
      if (g.bytes == 2) {
        std::vector<__nv_bfloat16> hb((size_t)d * d);
        for (size_t i = 0; i < hb.size(); ++i) hb[i] = __float2bfloat16(0.01f * (float)((i * 2654435761u) % 199) - 1.0f);
        CK(cudaMemcpy(A, hb.data(), mat, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(B, hb.data(), mat, cudaMemcpyHostToDevice));
      }
      float alpha = 1.f, beta = 0.f;
      int r = d >= 4096 ? std::max(3, reps / 3) : reps;
      double ms = median_ms(
          [&](int) {
            CB(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, d, d, d, &alpha, A, g.t, d, B, g.t, d, &beta, C, g.t, d, g.c,
                            CUBLAS_GEMM_DEFAULT));
          },
          r);
      record("gemm", std::string("gemm_") + g.name, ks("dtype", g.name) + ", " + kv("m", d) + ", " + kv("n", d) + ", " + kv("k", d),
             3.0 * mat, 2.0 * d * (double)d * d, ms * 1e6, r);
    }
  CB(cublasDestroy(h));
}

// FP8 (e4m3 inputs, bf16 output, fp32 accumulate) through cuBLASLt, TN as Hopper requires.
void gemm_fp8_family(const Bench& bench, const std::vector<int>& dims) {
  char* pool = bench.pool;
  const size_t pool_bytes = bench.pool_bytes;
  const int reps = bench.reps;
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  size_t ws_bytes = 64 * MiB;
  void* ws = pool + pool_bytes - ws_bytes;
  for (int d : dims) {
    size_t mat = (size_t)d * d;
    unsigned char *A = (unsigned char*)pool, *B = A + mat;
    __nv_bfloat16* C = (__nv_bfloat16*)(B + mat);
    k_fill_fp8<<<1024, 256>>>(A, 2 * mat);
    KCHECK();
    cublasLtMatmulDesc_t op;
    CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtMatrixLayout_t la, lb, lc;
    CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, d, d, d));
    CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, d, d, d));
    CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, d, d, d));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found));
    if (found > 0) {
      float alpha = 1.f, beta = 0.f;
      int r = d >= 4096 ? std::max(3, reps / 3) : reps;
      double ms =
          median_ms([&](int) { CB(cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, C, lc, C, lc, &heur.algo, ws, ws_bytes, 0)); }, r);
      record("gemm", "gemm_fp8", ks("dtype", "fp8") + ", " + kv("m", d) + ", " + kv("n", d) + ", " + kv("k", d), 2.0 * mat + 2.0 * mat,
             2.0 * d * (double)d * d, ms * 1e6, r);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
  }
  CB(cublasLtDestroy(lt));
}

// launch: what CUDA events see around one empty kernel (submission + launch + the empty kernel),
// which the other families' single-kernel timings include.
void launch_family(const Bench& bench) {
  const int reps = bench.reps;
  {
    double ms = median_ms(
        [&](int) {
          k_empty<<<1, 32>>>();
          KCHECK();
        },
        reps * 2);
    record("launch", "empty_events", kv("kernels", 1), 0, 0, ms * 1e6, reps * 2);
  }
  // launch: empty kernels, eager vs a CUDA graph of the same kernels.
  for (int count : {10, 30, 100, 300, 1000, 3000}) {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    double gpu_ms = median_ms(
        [&](int) {
          for (int k = 0; k < count; ++k) k_empty<<<1, 32, 0, s>>>();
          KCHECK();
        },
        reps, s);
    // host submission cost: wall time of the launch loop alone
    std::vector<double> host;
    for (int r = 0; r < reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < count; ++k) k_empty<<<1, 32, 0, s>>>();
      auto t1 = std::chrono::steady_clock::now();
      CK(cudaStreamSynchronize(s));
      host.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    std::sort(host.begin(), host.end());
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int k = 0; k < count; ++k) k_empty<<<1, 32, 0, s>>>();
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    double graph_ms = median_ms([&](int) { CK(cudaGraphLaunch(ge, s)); }, reps, s);
    record("launch", "eager_gpu", kv("kernels", count), 0, 0, gpu_ms * 1e6, reps);
    record("launch", "eager_host", kv("kernels", count), 0, 0, host[host.size() / 2], reps);
    record("launch", "graph_gpu", kv("kernels", count), 0, 0, graph_ms * 1e6, reps);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
  }
}

// memcpy: H2D/D2H pinned and pageable, D2D; device-side durations from CUPTI.
void memcpy_family(const Bench& bench) {
  char* pool = bench.pool;
  const int reps = bench.reps;
  const bool quick = bench.quick;
  size_t maxb = quick ? 256 * MiB : 1024 * MiB;
  void* hp;
  CK(cudaMallocHost(&hp, maxb));
  std::vector<char> hv(maxb, 1);
  std::memset(hp, 1, maxb);
  CU(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  std::vector<size_t> msz;
  for (size_t b = 4 << 10; b <= maxb; b *= 4) msz.push_back(b);  // 4 KiB, 16 KiB, ... 1 GiB
  for (size_t b : msz) {
    int r = b >= 256 * MiB ? std::max(3, reps / 3) : reps;
    struct C {
      const char* name;
      void* dst;
      const void* src;
      cudaMemcpyKind k;
      bool sync;
    };
    C cs[] = {{"h2d_pinned", pool, hp, cudaMemcpyHostToDevice, false},
              {"d2h_pinned", hp, pool, cudaMemcpyDeviceToHost, false},
              {"h2d_pageable", pool, hv.data(), cudaMemcpyHostToDevice, true},
              {"d2h_pageable", hv.data(), pool, cudaMemcpyDeviceToHost, true},
              {"d2d", pool + (2ull << 30), pool, cudaMemcpyDeviceToDevice, false}};
    for (const C& c : cs) {
      take_copies();
      double ms = median_ms(
          [&](int) {
            if (c.sync)
              CK(cudaMemcpy(c.dst, c.src, b, c.k));
            else
              CK(cudaMemcpyAsync(c.dst, c.src, b, c.k));
          },
          r);
      std::vector<double> dev = take_copies();
      // The two warm-up copies come first; a missing record falls back to the event time.
      if (dev.size() > 2) dev.erase(dev.begin(), dev.begin() + 2);
      std::sort(dev.begin(), dev.end());
      double ns = dev.empty() ? ms * 1e6 : dev[dev.size() / 2];
      record("memcpy", c.name,
             ks("path", c.name) + ", " + kv("size", (double)b) + ", " + kv("event_ns", ms * 1e6) + ", " +
                 kv("device_records", (double)dev.size()),
             c.name[0] == 'd' && c.name[1] == '2' && c.name[2] == 'd' ? 2.0 * b : (double)b, 0, ns, r);
    }
  }
  CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY));
  CK(cudaFreeHost(hp));
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);
  const bool quick = opt.quick;
  int reps = quick ? 5 : 21;
  int dev = 0;
  if (int rc = check_devices()) return rc;
  CK(cudaSetDevice(dev));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, dev));
  print_device(p, dev, opt.commit);
  size_t pool_bytes = (quick ? 3ull : 6ull) << 30;
  char* pool;
  CK(cudaMalloc(&pool, pool_bytes));
  fill(pool, pool_bytes);
  CK(cudaDeviceSynchronize());
  // Warm-up: about a second of copies so that the clocks are up before anything is timed (the GPU
  // idles at a few hundred MHz).
  {
    auto t0 = std::chrono::steady_clock::now();
    size_t n = (256 * MiB) / 16;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 1.0) {
      for (int k = 0; k < 20; ++k) k_copy<float4><<<(unsigned)(n / 256), 256>>>((float4*)pool, (const float4*)(pool + 256 * MiB), n);
      CK(cudaDeviceSynchronize());
    }
  }
  // Stability: a reference copy timed now and at the end; a GPU whose clocks move or that other
  // work shares gives figures that do not hold.
  auto reference_ns = [&] {
    size_t n = (256 * MiB) / 16;
    return 1e6 *
           median_ms([&](int) { k_copy<float4><<<(unsigned)(n / 256), 256>>>((float4*)pool, (const float4*)(pool + 256 * MiB), n); }, 11);
  };
  const double ref_start = reference_ns();

  const Bench bench{pool, pool_bytes, reps, quick, p.multiProcessorCount};
  auto want = [&](const char* family) { return opt.only.empty() || opt.only == family; };
  if (opt.only.empty()) {  // every family but memcpy (below)
    // stream: 64 MiB .. 1 GiB per array (L2 is 50-60 MB); 2/4/8/16-byte accesses.
    std::vector<size_t> ssz =
        quick ? std::vector<size_t>{64 * MiB, 256 * MiB} : std::vector<size_t>{64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB, 1024 * MiB};
    stream_family<__nv_bfloat16>("bf16", ssz, pool, pool_bytes, reps, "stream");
    stream_family<float>("f32", ssz, pool, pool_bytes, reps, "stream");
    stream_family<float2>("f32x2", ssz, pool, pool_bytes, reps, "stream");
    stream_family<float4>("f32x4", ssz, pool, pool_bytes, reps, "stream");
    l2_family(bench);
    strided_family(bench);
    // fused chains.
    std::vector<size_t> fel = quick ? std::vector<size_t>{1ull << 26} : std::vector<size_t>{1ull << 25, 1ull << 26, 1ull << 27};
    fused_family<float>("f32", fel, pool, reps);
    fused_family<__nv_bfloat16>("bf16", fel, pool, reps);
    reduction_family(bench, ssz);
    softmax_family(bench);
    tiled_gemm_family(bench);
    occupancy_family(bench);
    concurrency_family(bench);
    std::vector<int> dims = quick ? std::vector<int>{1024, 4096} : std::vector<int>{512, 1024, 2048, 3072, 4096, 6144, 8192};
    gemm_family(bench, dims);
    gemm_fp8_family(bench, dims);
    launch_family(bench);
  }  // every family but memcpy
  if (want("memcpy")) memcpy_family(bench);
  const double ref_end = reference_ns();
  const double change = ref_start > 0 ? (ref_end - ref_start) / ref_start : 0;
  CK(cudaFree(pool));
  CK(cudaDeviceSynchronize());
  std::printf(
      "\n  ],\n  \"stability\": {\"reference\": \"copy 256 MiB, 16-byte accesses\", \"start_ns\": %.0f, \"end_ns\": %.0f, \"change\": "
      "%.4f}\n}\n",
      ref_start, ref_end, change);
  if (std::fabs(change) > 0.05)
    std::fprintf(stderr,
                 "bneck_validate: warning: the reference copy took %.1f %% %s at the end than at the start (clocks or other work on the "
                 "GPU): the figures may not hold\n",
                 100 * std::fabs(change), change > 0 ? "longer" : "less");
  return 0;
}
