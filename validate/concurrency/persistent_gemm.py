# Persistent GEMMs short of SMs (DP contention, on one GPU): a bf16 torch.mm alone, then
# launched while a "blocker" holds 24 SMs (24 blocks of 544 threads with 104 KiB of dynamic shared
# memory each, an H200 NCCL all-reduce's footprint, spinning 3 ms on the global timer), so that the
# GEMM's one-block-per-SM persistent grid finds 108 SMs. Shapes with few and many output tiles.
# Each case is a record_function range ("alone_MxNxK", "beside_MxNxK"), 5 rounds; one Kineto trace
# (record_shapes: the output shape gives the tiles). bneck then forecasts the GEMM without the
# blocker from each "beside" range (whatif --remove name~blocker) against the "alone" ranges.
# Usage: python3 persistent_gemm.py OUTDIR
import os, sys, json, time
import torch
import cupy as cp
from torch.profiler import profile, ProfilerActivity, record_function

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
src = r'''
extern "C" __global__ void blocker(long long ns) {
  extern __shared__ char smem[];
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); smem[threadIdx.x] = (char)t; } while (t - t0 < ns);
}'''
smem = 103808
k = cp.RawKernel(src, "blocker")
k.max_dynamic_shared_size_bytes = smem
shapes = [(1024, 6144, 6144), (6144, 6144, 1024), (2048, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 8192), (1024, 4096, 4096)]
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
mats = {}
for (m, n, kk) in shapes:
    mats[(m, n, kk)] = (torch.randn(m, kk, device="cuda", dtype=torch.bfloat16), torch.randn(kk, n, device="cuda", dtype=torch.bfloat16),
                        torch.empty(m, n, device="cuda", dtype=torch.bfloat16))

def block():
    with cp.cuda.ExternalStream(s1.cuda_stream):
        k((24,), (544,), (cp.int64(3_000_000),), shared_mem=smem)

def gemm(shape):
    a, b, c = mats[shape]
    with torch.cuda.stream(s2):
        torch.mm(a, b, out=c)

for shape in shapes:  # warm-up (cuBLAS heuristics, module load)
    gemm(shape)
    block()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
    for shape in shapes:
        tag = "x".join(map(str, shape))
        for r in range(5):
            torch.cuda.synchronize()
            with record_function(f"alone_{tag}"):
                gemm(shape)
                torch.cuda.synchronize()
            with record_function(f"beside_{tag}"):
                block()
                time.sleep(0.0002)  # the host waits 200 us: the blocker's blocks are resident before the GEMM
                gemm(shape)
                torch.cuda.synchronize()
prof.export_chrome_trace(os.path.join(out, "persistent_gemm.json"))
print(json.dumps({"shapes": shapes}), flush=True)
