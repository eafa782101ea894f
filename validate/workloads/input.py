# A training loop fed by a DataLoader whose batches cost the host time to make (bneck whatif
# --input-workers, docs/whatif.md): without workers the loop's thread makes each batch while the
# GPU waits; with them the batches are made beside the step.
# Usage: python3 input.py WORKERS OUT_PREFIX
# Each process: 5 warm-up steps, 30 steps timed unprofiled (median printed, all written to
# OUT_PREFIX.times), then 6 steps traced by the PyTorch profiler (OUT_PREFIX.json.gz, ProfilerStep#N
# ranges, the DataLoader's enumerate(DataLoader)#... ranges). A sample: a 3 x 64 x 64 float array
# made and transformed with numpy (about 0.3 ms of one core); a batch of 64; the model: 6
# convolutions of 64 channels at 64 x 64 and a linear head, fp32, SGD; the loss read each step.
import gzip, os, shutil, statistics, sys, time
import numpy as np
import torch

workers, out = int(sys.argv[1]), sys.argv[2]
torch.backends.cudnn.benchmark = True
torch.manual_seed(0)


class Samples(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        x = rng.standard_normal((3, 64, 64)).astype(np.float32)
        for _ in range(4):
            x = np.tanh(x * 1.01 + 0.01)
        return torch.from_numpy(x), i % 10


layers = [torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU()]
for _ in range(5):
    layers += [torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU()]
m = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).cuda()
opt = torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
loader = torch.utils.data.DataLoader(Samples(), batch_size=64, num_workers=workers, pin_memory=True,
                                     persistent_workers=workers > 0, prefetch_factor=4 if workers else None)
it = iter(loader)


def step():
    x, y = next(it)
    x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


for _ in range(5):
    step()
times = []
for _ in range(30):
    t0 = time.perf_counter()
    step()
    times.append((time.perf_counter() - t0) * 1e3)
with open(out + ".times", "w") as f:
    f.write(" ".join("%.4f" % t for t in times) + "\n")
print("input workers", workers, "median_step_ms %.4f" % statistics.median(times), "min %.4f max %.4f" % (min(times), max(times)), flush=True)
tmp = out + ".json"
sched = torch.profiler.schedule(wait=1, warmup=2, active=6, repeat=1)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA], schedule=sched,
                            on_trace_ready=lambda p: p.export_chrome_trace(tmp)) as prof:
    for _ in range(9):
        step()
        prof.step()
with open(tmp, "rb") as fi, gzip.open(out + ".json.gz", "wb") as fo:
    shutil.copyfileobj(fi, fo)
os.remove(tmp)
print("input workers", workers, "traced", out + ".json.gz", flush=True)
