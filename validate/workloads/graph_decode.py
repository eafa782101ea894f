# The decode-like loop of the shared H200 exports (capture/decode.py: layers of
# x + silu(rms_norm(x) @ W), batch 4, bf16), eager or replayed as a CUDA graph, its width and depth
# as arguments, for Nsight Systems traces of a graph's launch and nodes: each step an NVTX range
# `tokN`, CUDA events around it (an event, the step, an event, a synchronize), the events' time
# and the host's time in the step's call (time.perf_counter) printed a step.
# Usage: python3 graph_decode.py eager|graph|compile [--layers 12] [--width 2048] [--steps 20] [--kineto OUT.json]
# (compile: torch.compile, default mode, warmed up 10 calls; --kineto: PyTorch profiler ranges instead of NVTX.)
import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("mode", choices=("eager", "graph", "compile"))
p.add_argument("--layers", type=int, default=12)
p.add_argument("--width", type=int, default=2048)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--kineto", default="", help="trace the steps with the PyTorch profiler (shapes) into this .json instead")
args = p.parse_args()
torch.manual_seed(0)
d, L = args.width, args.layers
ws = [torch.randn(d, d, device="cuda", dtype=torch.bfloat16) / (d**0.5) for _ in range(L)]
x = torch.randn(4, d, device="cuda", dtype=torch.bfloat16)


def block(x):
    for w in ws:
        x = x + torch.nn.functional.silu(torch.nn.functional.rms_norm(x, (d,)) @ w)
    return x


for _ in range(3):
    block(x)
torch.cuda.synchronize()
if args.mode == "graph":
    g = torch.cuda.CUDAGraph()
    st = torch.cuda.Stream()
    st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(st):
        for _ in range(2):
            block(x)
    torch.cuda.current_stream().wait_stream(st)
    with torch.cuda.graph(g):
        y = block(x)
    run = g.replay
elif args.mode == "compile":
    f = torch.compile(block)
    for _ in range(10):
        f(x)
    run = lambda: f(x)
else:
    run = lambda: block(x)
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def steps(mark):
    for i in range(args.steps):
        with mark(f"tok{i}"):
            e0.record()
            t0 = time.perf_counter()
            run()
            t1 = time.perf_counter()
            e1.record()
            torch.cuda.synchronize()
        print(f"{args.mode} L{L} d{d} tok {i} ms {e0.elapsed_time(e1):.4f} call_us {(t1 - t0) * 1e6:.1f}", flush=True)


if args.kineto:
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        steps(record_function)
    prof.export_chrome_trace(args.kineto)
else:
    steps(torch.cuda.nvtx.range)
