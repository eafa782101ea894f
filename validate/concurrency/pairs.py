# Concurrent kernels on one H200: each kernel alone, then two at once on two streams (NVTX range per
# case, 5 rounds each), for the contention model. Also a CUDA graph of 100 tiny kernels
# and the same launched eagerly (device-side kernel time and node gaps).
# Usage: python3 pairs.py            (under nsys: ranges and kernels; alone: CUDA-event times)
import sys, time, json
import torch

dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
N_COPY = 512 * 1024 * 1024  # bf16 elements: 1 GiB per array
D = 8192
a1, b1 = torch.ones(N_COPY, dtype=torch.bfloat16, device=dev), torch.empty(N_COPY, dtype=torch.bfloat16, device=dev)
a2, b2 = torch.ones(N_COPY, dtype=torch.bfloat16, device=dev), torch.empty(N_COPY, dtype=torch.bfloat16, device=dev)
x1, y1, z1 = (torch.randn(D, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
x2, y2, z2 = (torch.randn(D, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
sa, sb = torch.cuda.Stream(), torch.cuda.Stream()

def copy1(): b1.copy_(a1)
def copy2(): b2.copy_(a2)
def gemm1(): torch.mm(x1, y1, out=z1)
def gemm2(): torch.mm(x2, y2, out=z2)

cases = {
    "copy_alone": [(sa, copy1)], "copy2_alone": [(sb, copy2)], "copy_copy": [(sa, copy1), (sb, copy2)],
    "gemm_alone": [(sa, gemm1)], "gemm2_alone": [(sb, gemm2)], "gemm_gemm": [(sa, gemm1), (sb, gemm2)],
    "copyg_alone": [(sa, copy1)], "gemmc_alone": [(sb, gemm2)], "copy_gemm": [(sa, copy1), (sb, gemm2)],
}
tiny = torch.zeros(1, device=dev)
def tiny100():
    for _ in range(100): tiny.add_(1)
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    tiny100(); torch.cuda.synchronize()
    with torch.cuda.graph(g): tiny100()
torch.cuda.synchronize()
for _ in range(3):  # warm-up (clocks up, cuBLAS heuristics)
    for name, work in cases.items():
        for st, f in work:
            with torch.cuda.stream(st): f()
    torch.cuda.synchronize()
time.sleep(1)
out = {}
for name, work in cases.items():
    ts = []
    for r in range(5):
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(torch.cuda.current_stream())
        for st in {st for st, _ in work}: st.wait_stream(torch.cuda.current_stream())
        torch.cuda.nvtx.range_push(name)
        for st, f in work:
            with torch.cuda.stream(st): f()
        torch.cuda.nvtx.range_pop()
        for st in {st for st, _ in work}: torch.cuda.current_stream().wait_stream(st)
        e1.record(torch.cuda.current_stream())
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
        time.sleep(0.002)
    ts.sort()
    out[name] = ts[len(ts) // 2]
for name, fn in (("graph100", lambda: g.replay()), ("eager100", tiny100)):
    ts = []
    for r in range(5):
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.cuda.nvtx.range_push(name)
        fn()
        torch.cuda.nvtx.range_pop()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    ts.sort()
    out[name] = ts[len(ts) // 2]
print(json.dumps({"event_ms_median": out, "device": torch.cuda.get_device_name()}, indent=1))
