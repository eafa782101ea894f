// bneck_nccl_bench: NCCL collective microbenchmarks on every GPU of one host, one process driving
// all of them (ncclCommInitAll), for calibrating bneck's collective model (models/collective.hpp).
//
// Collectives: AllReduce (sum), AllGather, ReduceScatter, Broadcast (root 0), AllToAll (grouped
// ncclSend/ncclRecv to every peer), SendRecv (point to point in one direction, as a pipeline's
// activation or a trace's send/recv pair: rank 2i sends S bytes to rank 2i+1);
// float32 data; message sizes 8 B .. 1 GiB in x4 steps (--max-bytes to cap). Size S is the
// per-rank input buffer as nccl-tests counts it (AllGather: the output is n x S; ReduceScatter:
// the input is S, the output S/n; AllToAll: S in total per rank).
// Timing: a warm-up of 5 calls, then `reps` timed iterations of `iters` back-to-back calls each,
// CUDA events on every rank's stream; an iteration's time is the slowest rank's, the result the
// median iteration / iters. Each iteration starts behind a 2 ms spin kernel on every stream, so the
// host has enqueued every call before the first runs: the time is the kernels' (what a trace
// shows), not the host's launch rate (~20 us a grouped call for small messages). algbw = S / t, busbw = algbw x factor (nccl-tests'
// PERFORMANCE.md: AllReduce 2(n-1)/n, AllGather / ReduceScatter / AllToAll (n-1)/n, Broadcast / SendRecv 1). NVLink multicast (NVLS) stays
// off: NCCL_NVLS_ENABLE=0 is set before NCCL initializes. Output: one JSON document in bneck's measurements format (family "collective").
// Usage: bneck_nccl_bench [--gpus N] [--max-bytes B] [--reps R] [--iters I] > collectives.json
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x)                                                                                       \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)
#define NK(x)                                                                                       \
  do {                                                                                              \
    ncclResult_t r_ = (x);                                                                          \
    if (r_ != ncclSuccess) {                                                                        \
      std::fprintf(stderr, "NCCL error %s at %s:%d\n", ncclGetErrorString(r_), __FILE__, __LINE__); \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

namespace {

enum Kind { AllReduce, AllGather, ReduceScatter, Broadcast, AllToAll, SendRecv };
const char* kName[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"};

double bus_factor(Kind k, int n) {
  switch (k) {
    case AllReduce: return 2.0 * (n - 1) / n;
    case AllGather:
    case ReduceScatter:
    case AllToAll: return double(n - 1) / n;
    default: return 1.0;
  }
}

struct Rank {
  int dev;
  ncclComm_t comm;
  cudaStream_t s;
  float *in, *out;
  cudaEvent_t a, b;
};

// Holds its stream for `ns` nanoseconds (the global timer), so that the calls after it queue up.
__global__ void spin(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

void launch(Kind k, std::vector<Rank>& R, size_t bytes) {
  const int n = (int)R.size();
  size_t count = bytes / sizeof(float);
  NK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    Rank& x = R[r];
    switch (k) {
      case AllReduce: NK(ncclAllReduce(x.in, x.out, count, ncclFloat, ncclSum, x.comm, x.s)); break;
      case AllGather: NK(ncclAllGather(x.in, x.out, count, ncclFloat, x.comm, x.s)); break;
      case ReduceScatter: NK(ncclReduceScatter(x.in, x.out, std::max<size_t>(1, count / n), ncclFloat, ncclSum, x.comm, x.s)); break;
      case Broadcast: NK(ncclBroadcast(x.in, x.out, count, ncclFloat, 0, x.comm, x.s)); break;
      case AllToAll: {
        size_t per = std::max<size_t>(1, count / n);
        for (int p = 0; p < n; ++p) {
          NK(ncclSend(x.in + p * per, per, ncclFloat, p, x.comm, x.s));
          NK(ncclRecv(x.out + p * per, per, ncclFloat, p, x.comm, x.s));
        }
        break;
      }
      case SendRecv:
        if (r % 2 == 0 && r + 1 < n) NK(ncclSend(x.in, count, ncclFloat, r + 1, x.comm, x.s));
        if (r % 2 == 1) NK(ncclRecv(x.out, count, ncclFloat, r - 1, x.comm, x.s));
        break;
    }
  }
  NK(ncclGroupEnd());
}

}  // namespace

int main(int argc, char** argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  int gpus = 0, reps = 11, iters = 20;
  size_t max_bytes = 1ull << 30;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--gpus") && i + 1 < argc)
      gpus = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--max-bytes") && i + 1 < argc)
      max_bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bneck_nccl_bench [--gpus N] [--max-bytes B] [--reps R] [--iters I]\n");
      return 2;
    }
  }
  int have = 0;
  CK(cudaGetDeviceCount(&have));
  if (gpus <= 0 || gpus > have) gpus = have;
  std::vector<int> devs(gpus);
  for (int i = 0; i < gpus; ++i) devs[i] = i;
  std::vector<ncclComm_t> comms(gpus);
  NK(ncclCommInitAll(comms.data(), gpus, devs.data()));
  // Buffers: the largest message, n times for gathers and all-to-all outputs.
  size_t buf = std::max<size_t>(max_bytes * std::max(1, gpus), 1 << 20);
  std::vector<Rank> R(gpus);
  for (int r = 0; r < gpus; ++r) {
    R[r].dev = r;
    R[r].comm = comms[r];
    CK(cudaSetDevice(r));
    CK(cudaStreamCreateWithFlags(&R[r].s, cudaStreamNonBlocking));
    CK(cudaMalloc(&R[r].in, buf));
    CK(cudaMalloc(&R[r].out, buf));
    CK(cudaMemset(R[r].in, 0, buf));
    CK(cudaEventCreate(&R[r].a));
    CK(cudaEventCreate(&R[r].b));
  }
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  int nccl_version = 0, driver = 0, runtime = 0;
  NK(ncclGetVersion(&nccl_version));
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  std::printf("{\n  \"format\": \"bneck-measurements\", \"version\": 1,\n");
  std::printf(
      "  \"device\": {\"name\": \"%s\", \"cc\": \"%d.%d\", \"sm_count\": %d, \"gpus\": %d, \"nccl\": %d, \"driver\": %d, \"runtime\": "
      "%d},\n",
      p.name, p.major, p.minor, p.multiProcessorCount, gpus, nccl_version, driver, runtime);
  std::printf("  \"measurements\": [\n");
  bool first = true;
  for (int k = 0; k < 6; ++k) {
    Kind kind = Kind(k);
    if (gpus == 1 && (kind == AllToAll || kind == SendRecv)) continue;  // no peer
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= 4) {
      for (int w = 0; w < 5; ++w) launch(kind, R, bytes);
      for (auto& x : R) {
        CK(cudaSetDevice(x.dev));
        CK(cudaStreamSynchronize(x.s));
      }
      std::vector<double> t;
      for (int rep = 0; rep < reps; ++rep) {
        for (auto& x : R) {
          CK(cudaSetDevice(x.dev));
          spin<<<1, 1, 0, x.s>>>(2000000);
          CK(cudaGetLastError());
          CK(cudaEventRecord(x.a, x.s));
        }
        for (int it = 0; it < iters; ++it) launch(kind, R, bytes);
        for (auto& x : R) {
          CK(cudaSetDevice(x.dev));
          CK(cudaEventRecord(x.b, x.s));
        }
        double slowest = 0;
        for (auto& x : R) {
          CK(cudaSetDevice(x.dev));
          CK(cudaEventSynchronize(x.b));
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, x.a, x.b));
          slowest = std::max(slowest, double(ms));
        }
        t.push_back(slowest * 1e6 / iters);
      }
      std::sort(t.begin(), t.end());
      double ns = t[t.size() / 2];
      double algbw = double(bytes) / (ns * 1e-9), busbw = algbw * bus_factor(kind, gpus);
      std::printf(
          "%s    {\"family\": \"collective\", \"name\": \"%s\", \"kind\": \"%s\", \"ranks\": %d, \"size\": %zu, \"bytes\": %zu, "
          "\"flops\": 0, \"time_ns\": %.1f, \"algbw_gbps\": %.3f, \"busbw_gbps\": %.3f, \"repeats\": %d}",
          first ? "" : ",\n", kName[k], kName[k], gpus, bytes, bytes, ns, algbw / 1e9, busbw / 1e9, reps);
      first = false;
      std::fflush(stdout);
    }
  }
  std::printf("\n  ]\n}\n");
  for (auto& x : R) {
    CK(cudaSetDevice(x.dev));
    CK(cudaFree(x.in));
    CK(cudaFree(x.out));
    NK(ncclCommDestroy(x.comm));
  }
  return 0;
}
