# The transformer block training step of the H200 exports (capture/block.py of the shared traces: two
# blocks of attention and MLP, batch 8 x 1024 tokens, width 2048, AdamW; TF32 off) in the precisions
# and compilations `bneck advise` chains when it follows the bottleneck: fp32, bf16 autocast, the
# whole model in bf16, and each 16-bit one compiled (torch.compile, default mode).
# Each mode: built, warmed up (a compiled mode compiles in its first call), then --steps steps timed
# unprofiled (CUDA events around each step, synchronized), median printed; --trace-modes get a
# PyTorch profiler trace (record_shapes, a `stepN` range a step) after their timings.
# Usage: python3 block_plan.py --out DIR [--modes fp32,autocast,bf16,compile-autocast,compile-bf16]
import argparse
import json
import os
import statistics
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--modes", default="fp32,autocast,bf16,compile-autocast,compile-bf16")
p.add_argument("--trace-modes", default="fp32")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--tag", default="p1")
args = p.parse_args()
os.makedirs(args.out, exist_ok=True)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
B, T, D, H = 8, 1024, 2048, 16


class Block(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        s.qkv, s.proj = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        s.fc1, s.fc2 = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)

    def forward(s, x):
        q, k, v = s.qkv(s.ln1(x)).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + s.fc2(torch.nn.functional.gelu(s.fc1(s.ln2(x))))


def build(mode):
    torch.manual_seed(0)
    m = torch.nn.Sequential(Block(), Block()).cuda()
    pure = mode in ("bf16", "compile-bf16")
    if pure:
        m = m.to(torch.bfloat16)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    x = torch.randn(B, T, D, device="cuda", dtype=torch.bfloat16 if pure else torch.float32)
    f = torch.compile(m) if mode.startswith("compile") else m
    autocast = mode in ("autocast", "compile-autocast")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = f(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


results = {"env": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "tag": args.tag}, "modes": {}}
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for mode in args.modes.split(","):
    step = build(mode)
    t0 = time.time()
    step()
    torch.cuda.synchronize()
    first_s = time.time() - t0
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    ms = []
    for _ in range(args.steps):
        s.record()
        step()
        e.record()
        torch.cuda.synchronize()
        ms.append(s.elapsed_time(e))
    r = {"median_ms": statistics.median(ms), "steps_ms": ms, "first_call_s": first_s}
    if mode in args.trace_modes.split(","):
        from torch.profiler import ProfilerActivity, profile

        traced = []
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            for i in range(5):
                with torch.profiler.record_function(f"step{i}"):
                    s.record()
                    step()
                    e.record()
                    torch.cuda.synchronize()
                traced.append(s.elapsed_time(e))
        path = os.path.join(args.out, f"block.{mode}.{args.tag}.kineto.json")
        prof.export_chrome_trace(path)
        os.system(f"gzip -9 -f {path}")
        r["traced_ms"] = traced
    results["modes"][mode] = r
    print(f"{args.tag} {mode} median_ms {r['median_ms']:.3f} first_call_s {first_s:.1f}" +
          (f" traced_median_ms {statistics.median(r['traced_ms']):.3f}" if "traced_ms" in r else ""), flush=True)
    del step
    torch.cuda.empty_cache()
with open(os.path.join(args.out, f"block_plan.{args.tag}.json"), "w") as fh:
    json.dump(results, fh, indent=1)
