# Small PyTorch loops, each with one bottleneck or one structure, timed unprofiled and traced, for the
# advisor's remedies (copies, host-bound dispatch), the host model (per-op dispatch cost with and
# without autocast) and structure recognition (training anatomy, varying shapes).
# Loops (--loop) and their modes (--mode, comma separated; one process runs them in order):
#   copy      each step copies a 64 MiB host tensor to the GPU, then 4 GEMMs (4096^2, bf16) on it;
#             modes: pageable (torch.empty on the host), pinned (pin_memory(), non_blocking=True)
#   stage     each step copies a 32 MiB pinned batch to the GPU, then 8 GEMMs (2048 x 4096 x 4096, bf16) on it;
#             modes: serial (the copy on the compute stream, before its GEMMs), prefetch (the next
#             step's batch copied on a side stream while this step computes; two buffers, events)
#   host      L layers of Linear(256) + LayerNorm + GELU + residual add at batch 1 (host-bound):
#             modes: fp32, tf32, autocast (bf16); --layers L (default 48)
#   train     a 4-layer transformer encoder (d 1024, 16 heads, batch 8 x 256) trained with AdamW;
#             modes: plain, accum2 (2 microbatches a step, one optimizer step)
#   cycle     BERT-like encoder inference cycling sequence lengths 64 / 128 / 256 (batch 8)
# Every step ends with torch.cuda.synchronize() (as a loss.item() would). Timing: --warmup steps,
# then --steps steps between CUDA events (and wall clock); prints per mode a line
#   loop L mode M steps_ms ... median_ms X wall_median_ms Y
# --nvtx: each timed step in an NVTX range "step{i}" (for Nsight Systems). --kineto FILE: the timed
# steps under torch.profiler (CPU + CUDA, record_shapes), each in record_function("step{i}"),
# chrome trace to FILE (the mode's name is inserted before .json). --count: also print the aten
# ops and kernel launches of one step (torch.profiler, not timed).
import argparse, statistics, sys, time

import torch

p = argparse.ArgumentParser()
p.add_argument("--loop", required=True, choices=["copy", "stage", "host", "train", "cycle"])
p.add_argument("--mode", required=True)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--layers", type=int, default=48)
p.add_argument("--nvtx", action="store_true")
p.add_argument("--kineto", default="")
p.add_argument("--count", action="store_true")
a = p.parse_args()
dev = torch.device("cuda")
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def copy_loop(mode):
    n = 16 << 20  # 64 MiB of fp32
    host = torch.randn(n)
    if mode == "pinned":
        host = host.pin_memory()
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)

    def step(i):
        x = host.to(dev, non_blocking=(mode == "pinned"))
        y = x.view(4096, 4096).to(torch.bfloat16)
        for _ in range(4):
            y = y @ w
        return y
    return step


def stage_loop(mode):
    n = 8 << 20  # 32 MiB of fp32 a batch
    batches = [torch.randn(n).pin_memory() for _ in range(4)]
    w = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16) / 64
    bufs = [torch.empty(n, device=dev) for _ in range(2)]
    side = torch.cuda.Stream()
    ready = [torch.cuda.Event() for _ in range(2)]
    done = [torch.cuda.Event() for _ in range(2)]
    state = {"primed": False}

    def compute(x):
        y = x.view(2048, 4096).to(torch.bfloat16)
        for _ in range(8):
            y = y @ w
        return y

    if mode == "serial":
        def step(i):
            bufs[0].copy_(batches[i % 4], non_blocking=True)
            return compute(bufs[0])
        return step

    def issue(i):
        b = i % 2
        with torch.cuda.stream(side):
            side.wait_event(done[b])  # the buffer's last reader
            bufs[b].copy_(batches[i % 4], non_blocking=True)
            ready[b].record(side)

    def step(i):
        if not state["primed"]:
            issue(i)
            state["primed"] = True
        issue(i + 1)  # the next batch while this one computes
        b = i % 2
        cur = torch.cuda.current_stream()
        cur.wait_event(ready[b])
        y = compute(bufs[b])
        done[b].record(cur)
        return y
    return step


def host_loop(mode):
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    L, d = a.layers, 256
    lins = [torch.nn.Linear(d, d).to(dev) for _ in range(L)]
    lns = [torch.nn.LayerNorm(d).to(dev) for _ in range(L)]
    x0 = torch.randn(1, d, device=dev)

    def step(i):
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=(mode == "autocast")):
            x = x0
            for lin, ln in zip(lins, lns):
                x = x + torch.nn.functional.gelu(lin(ln(x)))
        return x
    return step


def encoder(d=1024, heads=16, layers=4):
    layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(dev)


def train_loop(mode):
    m = encoder()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    micro = 2 if mode == "accum2" else 1
    xs = torch.randn(8, 256, 1024, device=dev)

    def step(i):
        for k in range(micro):
            x = xs[k * (8 // micro):(k + 1) * (8 // micro)]
            loss = m(x).float().pow(2).mean() / micro
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def cycle_loop(mode):
    m = encoder(768, 12, 6).eval()
    xs = {s: torch.randn(8, s, 768, device=dev) for s in (64, 128, 256)}

    def step(i):
        with torch.no_grad():
            return m(xs[(64, 128, 256)[i % 3]])
    return step


LOOPS = {"copy": copy_loop, "stage": stage_loop, "host": host_loop, "train": train_loop, "cycle": cycle_loop}


def count(step):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step(0)
        torch.cuda.synchronize()
    ev = prof.events()
    aten = sum(1 for e in ev if e.name.startswith("aten::"))
    top = sum(1 for e in ev if e.name.startswith("aten::") and e.cpu_parent is None)
    launches = sum(1 for e in ev if e.name in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx"))
    casts = sum(1 for e in ev if e.name == "aten::_to_copy")
    print(f"count loop {a.loop} mode {mode} aten_ops {aten} top_level_ops {top} launches {launches} to_copy {casts}", flush=True)


def run(mode):
    step = LOOPS[a.loop](mode)
    for i in range(a.warmup):
        step(i)
        torch.cuda.synchronize()
    if a.count:
        count(step)
    s = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
    e = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
    walls = []
    prof = None
    if a.kineto:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)
        prof.__enter__()
    torch.cuda.synchronize()
    for i in range(a.steps):
        w0 = time.perf_counter()
        if a.nvtx:
            torch.cuda.nvtx.range_push(f"step{i}")
        ctx = torch.profiler.record_function(f"step{i}") if prof else None
        if ctx:
            ctx.__enter__()
        s[i].record()
        step(a.warmup + i)
        e[i].record()
        torch.cuda.synchronize()
        if ctx:
            ctx.__exit__(None, None, None)
        if a.nvtx:
            torch.cuda.nvtx.range_pop()
        walls.append((time.perf_counter() - w0) * 1e3)
    if prof:
        prof.__exit__(None, None, None)
        path = a.kineto.replace(".json", f".{mode}.json")
        prof.export_chrome_trace(path)
    ms = [x.elapsed_time(y) for x, y in zip(s, e)]
    print(f"loop {a.loop} mode {mode} {'kineto' if prof else 'nvtx' if a.nvtx else 'plain'} steps_ms {' '.join(f'{v:.4f}' for v in ms)} "
          f"median_ms {statistics.median(ms):.4f} wall_median_ms {statistics.median(walls):.4f} "
          f"torch {torch.__version__} gpu {torch.cuda.get_device_name()}", flush=True)


for mode in a.mode.split(","):
    run(mode)
