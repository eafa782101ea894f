#!/usr/bin/env python3
# The PyTorch profiler's host cost by what it records, on host-bound eager loops (tiny tensors: the
# GPU finishes each kernel long before the next launch, so a step's wall time is host time). Each
# program runs one step of N ops, in one process, in alternating blocks of steps: plain, under
# torch.profiler with record_shapes, under torch.profiler without shapes. The last block with shapes
# is exported and counted: per step the recorded ops, their inputs by kind (a tensor: non-empty dims;
# a tensor list: one per tensor; a scalar or scalar list: empty dims with a type; none: empty dims
# and no type) and the CUDA runtime calls. One line a program (JSON) with the medians and counts.
#   relu        N x torch.relu(x)                       1 tensor
#   add         N x (x + y)                             2 tensors, 1 scalar (alpha)
#   add_scalar  N x x.add(1.5)                          1 tensor, 2 scalars
#   view        N x x.view(2048)                        1 tensor, 1 scalar list; no kernel
#   transpose   N x x.transpose(0, 1)                   1 tensor, 2 scalars, an as_strided inside; no kernel
#   cat8        N x torch.cat([8 tensors])              8 tensors (a list), 1 scalar
#   sum_dim     N x x.sum(dim=1)                        1 tensor, a list, a scalar, a none
#   empty       N x torch.empty(8, 256, device=cuda)    a list and nones; no kernel
#   conv        N x F.conv2d(x, W, padding=1)           convolution's chain: 3 tensors, 10 scalars each level
#   linear      N x F.linear(x, W)                      linear -> t -> transpose -> as_strided, mm
#   allreduce   N x dist.all_reduce(256 KiB) on a one-rank NCCL group: c10d's call, its
#               record_param_comms, the NCCL kernel launch and the stream's events
#   ddp         N x (forward, sum, backward) of DDP(12 x Linear(512)) on a one-rank group, batch 8:
#               the reducer's hooks, bucket copies and one all-reduce a bucket (--bucket-mb sets
#               how many: 0.5 gives every weight its own)
# Each profiled step is a record_function range "stepK" (bneck's --range 'step.*').
import argparse, gzip, json, os, statistics, time
import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--program", required=True)
p.add_argument("--n", type=int, default=200)
p.add_argument("--steps", type=int, default=10, help="steps a block")
p.add_argument("--rounds", type=int, default=5, help="rounds of (plain, shapes, noshapes) blocks")
p.add_argument("--trace", default="", help="where the last shapes block's trace goes (.json.gz)")
p.add_argument("--bucket-mb", type=float, default=25.0, help="ddp: DDP's bucket_cap_mb")
a = p.parse_args()
dev = torch.device("cuda")
N = a.n
x = torch.randn(8, 256, device=dev)
y = torch.randn(8, 256, device=dev)
W = torch.randn(256, 256, device=dev)
xs = [torch.randn(8, 32, device=dev) for _ in range(8)]
cx = torch.randn(1, 16, 8, 8, device=dev)
cW = torch.randn(16, 16, 3, 3, device=dev)
prog = a.program
if prog in ("allreduce", "ddp"):
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", torch.cuda.current_device()))
    xa = torch.randn(65536, device=dev)
    if prog == "ddp":
        model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(12)]).to(dev)
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=a.bucket_mb)
        xd = torch.randn(8, 512, device=dev)


def op():
    if prog == "relu":
        torch.relu(x)
    elif prog == "add":
        x + y
    elif prog == "add_scalar":
        x.add(1.5)
    elif prog == "view":
        x.view(2048)
    elif prog == "transpose":
        x.transpose(0, 1)
    elif prog == "cat8":
        torch.cat(xs)
    elif prog == "sum_dim":
        x.sum(dim=1)
    elif prog == "empty":
        torch.empty(8, 256, device=dev)
    elif prog == "conv":
        F.conv2d(cx, cW, padding=1)
    elif prog == "linear":
        F.linear(x, W)
    elif prog == "allreduce":
        dist.all_reduce(xa)
    elif prog == "ddp":
        ddp(xd).sum().backward()
    else:
        raise SystemExit("unknown program " + prog)


def step():
    for _ in range(N):
        op()


def block(times, ranges=False):
    for k in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if ranges:
            with torch.profiler.record_function("step%d" % k):
                step()
                torch.cuda.synchronize()
        else:
            step()
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)


acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
for _ in range(3):  # warm-up: kernels loaded, cuDNN's plan chosen
    step()
torch.cuda.synchronize()
plain, shapes, noshapes = [], [], []
tmp = "/tmp/profiler_cost_%d.json" % os.getpid()
for r in range(a.rounds):
    block(plain)
    with torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        block(shapes, ranges=True)
    if r == a.rounds - 1:
        prof.export_chrome_trace(tmp)
    with torch.profiler.profile(activities=acts, record_shapes=False):
        block(noshapes)

ev = json.load(open(tmp))["traceEvents"]
ops = calls = comms = 0
launches = []
kinds = {"tensor": 0, "scalar": 0, "none": 0}
for e in ev:
    if e.get("ph") != "X":
        continue
    if e.get("cat") in ("cuda_runtime", "cuda_driver"):
        calls += 1
        if e.get("name") == "cudaLaunchKernel":
            launches.append(e.get("dur", 0))
    if e.get("cat") == "cpu_op" and e.get("name", "").startswith("step"):
        continue  # the step ranges
    if e.get("name", "").startswith(("record_param_comms", "c10d::")):
        comms += 1
    if e.get("cat") != "cpu_op":
        continue
    ops += 1
    args = e.get("args", {})
    dims, types = args.get("Input Dims", []), args.get("Input type", [])
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else ""
        if isinstance(d, list) and d and isinstance(d[0], list):
            kinds["tensor"] += len(d)
        elif d:
            kinds["tensor"] += 1
        elif t:
            kinds["scalar"] += 1
        else:
            kinds["none"] += 1
if a.trace:
    with open(tmp, "rb") as f, gzip.open(a.trace, "wb") as g:
        g.write(f.read())
os.remove(tmp)
S = a.steps
print(json.dumps({
    "program": prog, "n": N, "steps": len(plain),
    "plain_ms": statistics.median(plain), "shapes_ms": statistics.median(shapes), "noshapes_ms": statistics.median(noshapes),
    "ops": ops / S, "tensors": kinds["tensor"] / S, "scalars": kinds["scalar"] / S, "nones": kinds["none"] / S, "calls": calls / S,
    "comms": comms / S, "launch_us": statistics.median(launches) if launches else 0, "bucket_mb": a.bucket_mb if prog == "ddp" else 0,
}))
if prog in ("allreduce", "ddp"):
    dist.destroy_process_group()
