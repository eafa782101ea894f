# Partial waves on one GPU: kernels whose grid crosses whole waves of the GPU. For each family
# below, each configuration runs 5 times under the PyTorch profiler inside a record_function range
# "<family>.<i>"; the Kineto trace of each family is written to OUTDIR/<family>.json and one CSV row
# per configuration to stdout: family,i,param,kernel,grid,block,registers,smem,median_us (the median
# over the 5 runs of the largest kernel of the range, CUPTI device time).
#   flash:  SDPA forward, FlashAttention backend, bf16, (1, H, 1024, 128), H = 1 .. 48
#   effic:  SDPA forward, memory-efficient backend, bf16, (1, H, 1024, 64), H = 1 .. 48
#   sgemm:  fp32 matmul (TF32 off) M x 4096 @ 4096 x 1024, M = 128 .. 6144 by 128
#   conv:   fp32 conv2d 3x3, 128 -> 128 channels, 56 x 56, batch 1 .. 24 (TF32 off)
import json, os, statistics, sys, torch
from torch.profiler import ProfilerActivity, profile, record_function

outdir = sys.argv[1]
dev = torch.device("cuda")
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
from torch.nn.attention import SDPBackend, sdpa_kernel
F = torch.nn.functional


def sdpa(backend, d):
    def make(h):
        q, k, v = (torch.randn(1, h, 1024, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
        def f():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v)
        return f
    return make


def sgemm(m):
    a = torch.randn(m, 4096, device=dev)
    b = torch.randn(4096, 1024, device=dev)
    return lambda: a @ b


def conv(n):
    x = torch.randn(n, 128, 56, 56, device=dev)
    w = torch.randn(128, 128, 3, 3, device=dev)
    return lambda: F.conv2d(x, w, padding=1)


families = {
    "flash": (list(range(1, 49)), sdpa(SDPBackend.FLASH_ATTENTION, 128)),
    "effic": (list(range(1, 49)), sdpa(SDPBackend.EFFICIENT_ATTENTION, 64)),
    "sgemm": (list(range(128, 6145, 128)), sgemm),
    "conv": (list(range(1, 25)), conv),
}
print("family,i,param,kernel,grid,block,registers,smem,median_us")
for fam, (params, make) in families.items():
    fs = [make(p) for p in params]
    for f in fs:  # warm-up: algorithm selection, cuDNN autotuning off
        f(); f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        for i, f in enumerate(fs):
            with record_function(f"{fam}.{i}"):
                for _ in range(5):
                    f()
                torch.cuda.synchronize()
    path = os.path.join(outdir, fam + ".json")
    prof.export_chrome_trace(path)
    tr = json.load(open(path))
    ev = tr["traceEvents"] if isinstance(tr, dict) else tr
    ranges = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e["name"].startswith(fam + ".")]
    kern = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"]
    corr = {}
    for e in ev:  # kernels belong to the range whose CPU span holds their launch
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime":
            corr[e["args"].get("correlation")] = e["ts"]
    for r in sorted(ranges, key=lambda e: e["ts"]):
        i = int(r["name"].split(".")[1])
        ks = [k for k in kern if r["ts"] <= corr.get(k["args"].get("correlation"), -1) <= r["ts"] + r["dur"]]
        if not ks:
            continue
        big = max(ks, key=lambda k: k["dur"])
        same = [k["dur"] for k in ks if k["name"] == big["name"]]
        a = big["args"]
        print(f"{fam},{i},{params[i]},{big['name'][:90].replace(',', ' ')},{'x'.join(map(str, a.get('grid', [])))},"
              f"{'x'.join(map(str, a.get('block', [])))},{a.get('registers per thread', '')},{a.get('shared memory', '')},"
              f"{statistics.median(same):.2f}")
    sys.stdout.flush()
