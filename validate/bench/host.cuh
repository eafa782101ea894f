// The host side of bneck_validate: error checks, CUPTI's copy records, the JSON records, the event
// timer, the command line and the device's checks and properties (included once, by bneck_validate.cu).
#pragma once
#include <cublas_v2.h>
#include <cupti.h>

#include <algorithm>
#include <cctype>
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
#define CB(x)                                                                          \
  do {                                                                                 \
    cublasStatus_t s_ = (x);                                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "cuBLAS error %d at %s:%d\n", (int)s_, __FILE__, __LINE__); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define KCHECK() CK(cudaGetLastError())
#define CU(x)                                                                               \
  do {                                                                                      \
    CUptiResult r_ = (x);                                                                   \
    if (r_ != CUPTI_SUCCESS) {                                                              \
      const char* m_ = nullptr;                                                             \
      cuptiGetResultString(r_, &m_);                                                        \
      std::fprintf(stderr, "CUPTI error %s at %s:%d\n", m_ ? m_ : "?", __FILE__, __LINE__); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

namespace {

// CUPTI activity buffers: device-side durations of the copies since the last take_copies().
std::vector<double> g_copy_ns;
void CUPTIAPI buffer_requested(uint8_t** buf, size_t* size, size_t* max_records) {
  *size = 1 << 20;
  *buf = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}
void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buf, size_t, size_t valid) {
  CUpti_Activity* r = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
    if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(r);
      if (m->end > m->start) g_copy_ns.push_back(static_cast<double>(m->end - m->start));
    }
  std::free(buf);
}
std::vector<double> take_copies() {
  CU(cuptiActivityFlushAll(1));
  std::vector<double> v;
  v.swap(g_copy_ns);
  return v;
}

bool g_first = true;
void record(const char* family, const std::string& name, const std::string& params, double bytes, double flops, double ns, int reps) {
  std::printf("%s    {\"family\": \"%s\", \"name\": \"%s\", %s%s\"bytes\": %.0f, \"flops\": %.0f, \"time_ns\": %.1f, \"repeats\": %d}",
              g_first ? "" : ",\n", family, name.c_str(), params.c_str(), params.empty() ? "" : ", ", bytes, flops, ns, reps);
  g_first = false;
  std::fflush(stdout);
}

std::string kv(const char* k, double v) {
  char b[96];
  std::snprintf(b, sizeof b, "\"%s\": %.0f", k, v);
  return b;
}
std::string ks(const char* k, const char* v) { return std::string("\"") + k + "\": \"" + v + "\""; }

template <typename F>
double median_ms(F&& body, int reps, cudaStream_t s = 0) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  body(0);  // warm-up
  body(1);
  CK(cudaStreamSynchronize(s));
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a, s));
    body(r + 2);
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

__global__ void fill_kernel(float* p, size_t n, float seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = 0.5f + 0.25f * __sinf((float)(i % 4093) * 0.37f + seed);
}
void fill(void* p, size_t bytes, float seed = 1.f) {
  fill_kernel<<<1024, 256>>>((float*)p, bytes / 4, seed);
  KCHECK();
}

// The options: --quick, --only FAMILY, --commit SHA.
struct Options {
  bool quick = false;
  std::string only;  // run one family only
  const char* commit = "unknown";
};
Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick"))
      o.quick = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      o.only = argv[++i];
    else if (!std::strcmp(argv[i], "--commit") && i + 1 < argc) {
      static std::string c;  // keep only characters that need no JSON escaping
      for (const char* q = argv[++i]; *q; ++q)
        if (std::isalnum(static_cast<unsigned char>(*q)) || *q == '.' || *q == '-' || *q == '_') c += *q;
      o.commit = c.empty() ? "unknown" : c.c_str();
    }
  }
  return o;
}

// Refuse clearly (exit 2, one line) where nothing can be measured: 0 when a GPU is there.
int check_devices() {
  int devices = 0;
  cudaError_t ce = cudaGetDeviceCount(&devices);
  if (ce == cudaErrorInsufficientDriver) {
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    std::fprintf(stderr,
                 "bneck_validate: the NVIDIA driver supports CUDA %d.%d, older than this build's runtime %d.%d: update the driver\n",
                 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    return 2;
  }
  if (ce == cudaErrorNoDevice || (ce == cudaSuccess && devices == 0)) {
    const char* vis = std::getenv("CUDA_VISIBLE_DEVICES");
    std::fprintf(stderr, "bneck_validate: no CUDA GPU visible (CUDA_VISIBLE_DEVICES=%s)\n", vis ? vis : "unset");
    return 2;
  }
  if (ce != cudaSuccess) {
    std::fprintf(stderr, "bneck_validate: cannot use the GPU: %s\n", cudaGetErrorString(ce));
    return 2;
  }
  return 0;
}

// The document's head: format, commit and the device's properties; opens the measurements.
void print_device(const cudaDeviceProp& p, int dev, const char* commit) {
  int driver = 0, runtime = 0, clock_khz = 0, mem_clock_khz = 0;
  CK(cudaDriverGetVersion(&driver));
  CK(cudaRuntimeGetVersion(&runtime));
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  CK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev));
  int bus_bits = 0, smem_sm = 0, smem_block = 0, regs_sm = 0, threads_sm = 0, blocks_sm = 0;
  CK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  CK(cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev));
  CK(cudaDeviceGetAttribute(&smem_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  CK(cudaDeviceGetAttribute(&regs_sm, cudaDevAttrMaxRegistersPerMultiprocessor, dev));
  CK(cudaDeviceGetAttribute(&threads_sm, cudaDevAttrMaxThreadsPerMultiProcessor, dev));
  CK(cudaDeviceGetAttribute(&blocks_sm, cudaDevAttrMaxBlocksPerMultiprocessor, dev));
  std::printf("{\n  \"format\": \"bneck-measurements\", \"version\": 1, \"git_commit\": \"%s\",\n", commit);
  std::printf(
      "  \"device\": {\"name\": \"%s\", \"cc\": \"%d.%d\", \"sm_count\": %d, \"clock_khz\": %d, \"memory_clock_khz\": %d, "
      "\"memory_bytes\": %zu, \"l2_bytes\": %d, \"driver\": %d, \"runtime\": %d, \"memory_bus_bits\": %d, "
      "\"shared_memory_per_sm\": %d, \"shared_memory_per_block\": %d, \"registers_per_sm\": %d, \"max_threads_per_sm\": %d, "
      "\"max_blocks_per_sm\": %d},\n  \"measurements\": [\n",
      p.name, p.major, p.minor, p.multiProcessorCount, clock_khz, mem_clock_khz, p.totalGlobalMem, p.l2CacheSize, driver, runtime, bus_bits,
      smem_sm, smem_block, regs_sm, threads_sm, blocks_sm);
}

}  // namespace
