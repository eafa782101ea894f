# GEMM times on one GPU over the shapes transformer layers use, in fp32 (TF32 off), TF32 and bf16:
# dense (M x K) @ (K x N) with M tokens 128 .. 16384 and K, N among the hidden and MLP sizes
# 768 .. 8192, and batched (B, M, K) @ (B, K, N) of attention (B = batch x heads 16 .. 512,
# M = N = sequence 128 .. 2048, K = head size 64 / 128, and its transpose K = sequence, N = head size).
# Each: 3 warm-up runs, then the median of up to 25 runs (CUDA events, each run alone), capped at
# about 0.1 s of GPU time a shape (events_ms: a start and an end event around each run, which on a
# slow host also time the launch), then five runs of each shape under the PyTorch profiler:
# kernel_ms, the median of their kernels' summed device time (CUPTI; a split-K workspace memset
# included), and the kernels' names. Prints CSV: dtype,B,M,K,N,events_ms,kernel_ms,kernels.
# argv[1]: the precisions (default fp32,tf32,bf16); argv[2]: the dense layout, "nn" (default: a @ w,
# w of K x N, which cuBLAS runs as its nn kernels) or "tn" (nn.Linear's: a @ w.T, w of N x K).
import statistics, sys, torch
from torch.profiler import ProfilerActivity, profile

dev = torch.device("cuda")
torch.manual_seed(0)
out = sys.stdout
out.write("dtype,B,M,K,N,events_ms,kernel_ms,kernels\n")


def kernel_times(fs, reps=5):
    """Per function: the median over `reps` runs of its kernels' summed device time (ms, CUPTI) and
    their names, from one profiled session (events around one launch also time the host's launch)."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for f in fs:
            for _ in range(reps):
                f()
        torch.cuda.synchronize()
    ops = [e for e in p.events() if e.name in ("aten::mm", "aten::bmm")]
    if len(ops) != reps * len(fs):
        return [(float("nan"), "")] * len(fs)
    out = []
    for i in range(len(fs)):
        runs = ops[reps * i:reps * (i + 1)]
        sums = [sum(k.duration for k in e.kernels) / 1e3 for e in runs]  # us -> ms
        names = ";".join(k.name.replace(",", " ")[:100] for k in runs[-1].kernels)
        out.append((statistics.median(sums), names))
    return out


def timed(f):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(25):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
        if sum(ts) > 100:
            break
    return statistics.median(ts)


dense = [(m, k, n) for m in (128, 512, 1024, 2048, 4096, 8192, 16384)
         for k in (768, 1024, 2048, 4096, 8192) for n in (768, 1024, 3072, 4096, 8192)]
batched = []
for b in (16, 64, 128, 512):
    for s in (128, 512, 1024, 2048):
        if b * s * s > 512 * 1024 * 1024:
            continue
        for h in (64, 128):
            batched.append((b, s, h, s))  # scores: q @ k^T
            batched.append((b, s, s, h))  # context: p @ v
layout = sys.argv[2] if len(sys.argv) > 2 else "nn"
if layout == "tn":
    batched = []  # the dense shapes only
for name in (sys.argv[1].split(",") if len(sys.argv) > 1 else ("fp32", "tf32", "bf16")):  # argv[1]: some of them
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    dt = torch.bfloat16 if name == "bf16" else torch.float32
    rows, fs = [], []
    for (b, m, k, n) in [(1,) + s for s in dense] + batched:
        a = torch.randn(m, k, device=dev, dtype=dt) if b == 1 else torch.randn(b, m, k, device=dev, dtype=dt)
        if b == 1 and layout == "tn":
            w = torch.randn(n, k, device=dev, dtype=dt)
            f = lambda a=a, w=w: a @ w.t()
        else:
            w = torch.randn(k, n, device=dev, dtype=dt) if b == 1 else torch.randn(b, k, n, device=dev, dtype=dt)
            f = (lambda a=a, w=w: a @ w) if b == 1 else (lambda a=a, w=w: torch.bmm(a, w))
        rows.append((b, m, k, n, timed(f)))
        fs.append(f)
    for (b, m, k, n, ms), (kms, kn) in zip(rows, kernel_times(fs)):
        out.write(f"{name},{b},{m},{k},{n},{ms:.5f},{kms:.5f},{kn}\n")
    out.flush()
    del fs
    torch.cuda.empty_cache()
