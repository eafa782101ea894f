# A training loop that reads its loss on the host every step (loss.item(): a copy and a
# synchronization a step) against the same loop reading it once at the end: the measured side of
# `whatif --defer-syncs`. The model: 6 x (Linear(1024) + GELU) at batch 64, AdamW, fp32.
# Each mode: --warmup steps, then --steps steps timed as one run (wall clock from the first step's
# start to a synchronize after the last), in --repeats runs, the median printed; --kineto FILE: one
# run of the mode under the PyTorch profiler (record_shapes), the run in record_function("run").
# Usage: python3 sync_defer.py --mode every,end [--steps 20] [--repeats 15] [--kineto OUT.json]
import argparse
import statistics
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--mode", default="every,end")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--warmup", type=int, default=10)
p.add_argument("--repeats", type=int, default=15)
p.add_argument("--kineto", default="")
a = p.parse_args()
torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU()) for _ in range(6)]).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x = torch.randn(64, 1024, device=dev)


def loop(mode, steps):
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item() if mode == "every" else loss.detach())
    if mode != "every":
        losses = torch.stack(losses).tolist()
    return losses


for mode in a.mode.split(","):
    loop(mode, a.warmup)
    torch.cuda.synchronize()
    runs = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        loop(mode, a.steps)
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0) * 1e3)
    print(f"mode {mode} steps {a.steps} run_ms {' '.join(f'{v:.3f}' for v in runs)} median_run_ms {statistics.median(runs):.3f} "
          f"per_step_ms {statistics.median(runs) / a.steps:.4f} torch {torch.__version__} gpu {torch.cuda.get_device_name()}", flush=True)
    if a.kineto:
        from torch.profiler import ProfilerActivity, profile, record_function

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            with record_function("run"):
                loop(mode, a.steps)
                torch.cuda.synchronize()
        prof.export_chrome_trace(a.kineto.replace(".json", f".{mode}.json"))
