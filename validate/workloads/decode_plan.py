# The decode-like loop of the H200 exports (capture/decode.py of the shared traces: 12 layers of
# x + silu(rms_norm(x) @ W), width 2048, batch 4, bf16), launch-bound, in the forms `bneck advise`
# chains when it follows the bottleneck: eager, replayed as a CUDA graph, compiled (torch.compile,
# default mode: fusion), and compiled with mode="reduce-overhead" (fusion, then CUDA graphs).
# Each form: warmed up (a compiled form compiles in its first calls), then --steps steps timed
# unprofiled (CUDA events around each, synchronized), median printed; the eager form is then
# traced by the PyTorch profiler (record_shapes, a `tokN` range a step).
# Usage: python3 decode_plan.py --out DIR [--tag p1]
import argparse
import json
import os
import statistics

import torch

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--steps", type=int, default=50)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--tag", default="p1")
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)
torch.manual_seed(0)
d, L = 2048, 12
ws = [torch.randn(d, d, device="cuda", dtype=torch.bfloat16) / 45 for _ in range(L)]
x = torch.randn(4, d, device="cuda", dtype=torch.bfloat16)


def block(x):
    for w in ws:
        x = x + torch.nn.functional.silu(torch.nn.functional.rms_norm(x, (d,)) @ w)
    return x


def form(name):
    if name == "eager":
        return lambda: block(x)
    if name == "graph":
        for _ in range(3):
            block(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            for _ in range(2):
                block(x)
        torch.cuda.current_stream().wait_stream(st)
        with torch.cuda.graph(g):
            block(x)
        return g.replay
    f = torch.compile(block, mode="reduce-overhead" if name == "compile-graphs" else "default")
    return lambda: f(x)


results = {"env": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "tag": args.tag}, "forms": {}}
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for name in ("eager", "graph", "compile", "compile-graphs"):
    run = form(name)
    for _ in range(args.warmup):
        run()
    torch.cuda.synchronize()
    ms = []
    for _ in range(args.steps):
        e0.record()
        run()
        e1.record()
        torch.cuda.synchronize()
        ms.append(e0.elapsed_time(e1))
    r = {"median_ms": statistics.median(ms), "steps_ms": ms}
    if name == "eager":
        from torch.profiler import ProfilerActivity, profile

        traced = []
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            for i in range(20):
                with torch.profiler.record_function(f"tok{i}"):
                    e0.record()
                    run()
                    e1.record()
                    torch.cuda.synchronize()
                traced.append(e0.elapsed_time(e1))
        path = os.path.join(args.out, f"decode.eager.{args.tag}.kineto.json")
        prof.export_chrome_trace(path)
        os.system(f"gzip -9 -f {path}")
        r["traced_ms"] = traced
    results["forms"][name] = r
    print(f"{args.tag} {name} median_ms {r['median_ms']:.4f}" +
          (f" traced_median_ms {statistics.median(r['traced_ms']):.4f}" if "traced_ms" in r else ""), flush=True)
with open(os.path.join(args.out, f"decode_plan.{args.tag}.json"), "w") as fh:
    json.dump(results, fh, indent=1)
