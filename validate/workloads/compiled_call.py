#!/usr/bin/env python3
# Host cost of one call of a torch.compile'd function: a fixed part per call (Dynamo's guards, the
# pre-graph bytecode, AOTAutograd's wrapper, the compiled module's buffer setup) and a part per
# kernel it launches. A chain of N blocks, each torch.relu(x @ W_i) on tiny tensors (8 x 64 fp32):
# Inductor keeps each matmul a library call (cuBLAS) and makes each ReLU a Triton kernel, so a call
# launches about 2N kernels whose GPU time is a few microseconds each: the call is host-bound and
# its wall time (synchronized after each call) is host time. Eager runs of the same chain give the
# process's launch pace. Prints, per N, the median wall time per call of eager and compiled (and the
# synchronize-only loop), and the kernels a compiled call launches (counted under torch.profiler).
# --trace DIR: afterwards, one Kineto trace (record_shapes) of 3 eager and 3 compiled steps per N in
# --trace-n, each step a `step` range (bneck's --range 'step.*'), for held-out `--fuse auto`
# forecasts.
# --modules bn|linear: the chain built of nn.Modules instead (their parameters and buffers are
# the compiled graph's inputs, each guarded and checked on every call): the fixed part against the
# tensors a call takes.
import argparse, os, statistics, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--ns", default="1,4,16,64")
p.add_argument("--calls", type=int, default=300)
p.add_argument("--blocks", type=int, default=5)
p.add_argument("--trace", default="")
p.add_argument("--trace-n", default="16,64")
p.add_argument("--modules", default="", help="bn or linear: the chain as nn.Modules (parameters and buffers guarded and passed as graph inputs)")
a = p.parse_args()
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
x0 = torch.randn(8, 64, device=dev)
Ws = [torch.randn(64, 64, device=dev) / 8 for _ in range(max(int(n) for n in a.ns.split(",")))]


def chain(n):
    if a.modules == "bn":  # N x BatchNorm1d(64) in eval: 5 tensors a module, all fused into one Triton kernel
        return torch.nn.Sequential(*[torch.nn.BatchNorm1d(64) for _ in range(n)]).to(dev).eval()
    if a.modules == "linear":  # N x (Linear(64, 64), ReLU): 2 tensors and 2 kernels a block
        return torch.nn.Sequential(*[m for _ in range(n) for m in (torch.nn.Linear(64, 64), torch.nn.ReLU())]).to(dev).eval()

    def f(x):
        for i in range(n):
            x = torch.relu(x @ Ws[i])
        return x

    return f


def timed(fn, calls):
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        fn(x0)
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t) * 1e6)
    return out


def kernels_per_call(fn):
    from torch.profiler import profile, ProfilerActivity

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(x0)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def sync_only(_):
    pass


print("config compiled_call modules", a.modules or "none", "torch", torch.__version__, "gpu", torch.cuda.get_device_name(0), flush=True)
fns = {}
for n in (int(s) for s in a.ns.split(",")):
    eager = chain(n)
    comp = torch.compile(chain(n))
    for _ in range(3):
        comp(x0)
    torch.cuda.synchronize()
    fns[n] = (eager, comp)
    k_e, k_c = kernels_per_call(eager), kernels_per_call(comp)
    e_all, c_all, s_all = [], [], []
    for b in range(a.blocks):  # alternate blocks: the host's pace drifts alike for all three
        for _ in range(20):
            eager(x0), comp(x0)
        torch.cuda.synchronize()
        e_all += timed(eager, a.calls)
        c_all += timed(comp, a.calls)
        s_all += timed(sync_only, a.calls)
    me, mc, ms = statistics.median(e_all), statistics.median(c_all), statistics.median(s_all)
    print(
        f"n {n} kernels_eager {k_e} kernels_compiled {k_c} eager_us {me:.2f} compiled_us {mc:.2f} sync_us {ms:.2f} "
        f"eager_per_kernel_us {(me - ms) / max(k_e, 1):.3f} compiled_per_kernel_us {(mc - ms) / max(k_c, 1):.3f}",
        flush=True,
    )

if a.trace:
    from torch.profiler import profile, ProfilerActivity, schedule

    os.makedirs(a.trace, exist_ok=True)
    for n in (int(s) for s in a.trace_n.split(",")):
        if n not in fns:
            continue
        for mode, fn in zip(("eager", "compile"), fns[n]):
            steps = []
            with profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                record_shapes=True,
                schedule=schedule(wait=1, warmup=2, active=3),
            ) as prof:
                for s in range(6):
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                    with torch.profiler.record_function(f"step{s}"):
                        fn(x0)
                        torch.cuda.synchronize()
                    steps.append((time.perf_counter() - t) * 1e6)
                    prof.step()
            path = os.path.join(a.trace, f"chain{n}.{mode}.kineto.json")
            prof.export_chrome_trace(path)
            os.system(f"gzip -f {path}")
            print(f"trace n {n} mode {mode} profiled_step_us " + " ".join(f"{v:.1f}" for v in steps[3:]), flush=True)
