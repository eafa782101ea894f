# GEMMs whose inner or output dimension is not a multiple of 8 elements (a vocabulary of 50257, a
# hidden size of 1023) beside the same GEMM padded to a multiple of 64, in fp32 (TF32 off), TF32 and
# bf16: torch.matmul of (M x K) @ (K x N). Five profiled runs each, the median of the kernels'
# summed device time (CUPTI). Prints CSV: dtype,M,K,N,kernel_ms,kernels.
import statistics, sys, torch
from torch.profiler import ProfilerActivity, profile

dev = torch.device("cuda")
torch.manual_seed(0)
shapes = []
for m in (512, 2048, 8192):
    for k in (768, 1024, 4096):
        for n in (50257, 32001, 30522, 4095, 1023, 1000):
            shapes.append((m, k, n))
            shapes.append((m, k, (n + 63) // 64 * 64))
    for k in (1023, 4095, 50257):  # the inner dimension odd (a backward GEMM through the LM head)
        for n in (1024, 4096):
            shapes.append((m, k, n))
            shapes.append((m, (k + 63) // 64 * 64, n))
print("dtype,M,K,N,kernel_ms,kernels")
for name in ("fp32", "tf32", "bf16"):
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
    dt = torch.bfloat16 if name == "bf16" else torch.float32
    fs = []
    for (m, k, n) in shapes:
        a = torch.randn(m, k, device=dev, dtype=dt)
        w = torch.randn(k, n, device=dev, dtype=dt)
        f = lambda a=a, w=w: a @ w
        for _ in range(3):
            f()
        fs.append(f)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
        for f in fs:
            for _ in range(5):
                f()
        torch.cuda.synchronize()
    ops = [e for e in p.events() if e.name == "aten::mm"]
    for i, (m, k, n) in enumerate(shapes):
        runs = ops[5 * i:5 * (i + 1)]
        ms = statistics.median(sum(x.duration for x in e.kernels) / 1e3 for e in runs) if len(ops) == 5 * len(shapes) else float("nan")
        names = ";".join(x.name.replace(",", " ")[:90] for x in runs[-1].kernels) if runs else ""
        print(f"{name},{m},{k},{n},{ms:.5f},{names}")
    sys.stdout.flush()
    del fs
    torch.cuda.empty_cache()
