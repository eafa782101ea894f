# A training loop whose allocator returns memory and asks for it again every step, against the same
# loop with PyTorch's caching allocator keeping it (bneck whatif --keep-memory, docs/whatif.md).
# Usage: python3 alloc.py MODE OUT_PREFIX
#   MODE nocache: run under PYTORCH_NO_CUDA_MEMORY_CACHING=1 (the caller sets it): every tensor a
#                 cudaMalloc and a cudaFree; empty: the cache on, torch.cuda.empty_cache() after
#                 every step; cached: the cache on (the forecasts' measured side).
# Each process: 5 warm-up steps, 30 steps timed unprofiled (median printed and written to
# OUT_PREFIX.times), then (not for cached) 6 steps traced by the PyTorch profiler with shapes
# (OUT_PREFIX.json.gz, ProfilerStep#N ranges). The model: 8 x (Linear(2048), GELU) on a batch of
# 512, fp32, SGD with momentum; a step synchronizes at its end (its loss read).
import gzip, json, os, shutil, statistics, sys, time
import torch

mode, out = sys.argv[1], sys.argv[2]
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0)
D, N, L = 2048, 512, 8
m = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(D, D), torch.nn.GELU()) for _ in range(L)]).cuda()
opt = torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
x = torch.randn(N, D, device="cuda")


def step():
    loss = m(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    v = loss.item()
    if mode == "empty":
        torch.cuda.empty_cache()
    return v


for _ in range(5):
    step()
torch.cuda.synchronize()
times = []
for _ in range(30):
    t0 = time.perf_counter()
    step()
    times.append((time.perf_counter() - t0) * 1e3)
med = statistics.median(times)
with open(out + ".times", "w") as f:
    f.write(" ".join("%.4f" % t for t in times) + "\n")
print("alloc", mode, "median_step_ms %.4f" % med, "min %.4f max %.4f" % (min(times), max(times)), flush=True)
if mode != "cached":
    tmp = out + ".json"
    sched = torch.profiler.schedule(wait=1, warmup=2, active=6, repeat=1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                schedule=sched, record_shapes=True,
                                on_trace_ready=lambda p: p.export_chrome_trace(tmp)) as prof:
        for _ in range(9):
            step()
            prof.step()
    with open(tmp, "rb") as fi, gzip.open(out + ".json.gz", "wb") as fo:
        shutil.copyfileobj(fi, fo)
    os.remove(tmp)
    print("alloc", mode, "traced", out + ".json.gz", flush=True)
