#!/usr/bin/env python3
# Host cost of torch.autocast per op, on host-bound eager loops (tiny tensors: the GPU finishes each
# kernel long before the next launch, so a step's wall time is host time). Each program runs one
# step of N ops with and without torch.autocast("cuda", bfloat16) in the same process, alternating
# blocks of steps; prints the per-step medians and (autocast - plain) / N per op.
#   relu_bf16     N x torch.relu(x), x bf16 (on neither autocast list: dispatch only)
#   add_bf16      N x (x + y), both bf16 (the same, a binary op)
#   linear_bf16   N x F.linear(x, W), x and W bf16 (on the lower-precision list; nothing to cast)
#   linear_fp32   N x F.linear(x, W), fp32 (the list: x and W cast every call, 2 casts an op)
#   conv_fp32     N x F.conv2d(x, W), fp32 [1, 16, 8, 8] x [16, 16, 3, 3] (x and W cast: 2 casts an op)
#   bn_bf16       N x F.batch_norm(x, m, v, w, b), x bf16 [1, 16, 8, 8], stats fp32 (on no list)
#   layernorm_bf16 N x F.layer_norm(x, (256,)), x bf16 (the fp32 list: x cast up, 1 cast an op)
#   conv_bn_fp32  N x (F.conv2d(x, W), F.batch_norm(y, m, v, w, b)), fp32, cuDNN's TF32 off (a
#                 CNN's block: under autocast the conv casts x and W, batch norm reads its bf16 output)
#   conv_bn_tf32  the same with cuDNN's TF32 allowed (PyTorch's default, as conv_fp32 runs)
#   bn_mixed      N x F.batch_norm(x, m, v, w, b), stats fp32, x [1, 16, 8, 8] fp32 in the plain
#                 steps and bf16 in the autocast ones (batch norm is on no list: the difference is
#                 cuDNN's fp32 batch norm against PyTorch's native one on a bf16 input, as a CNN's
#                 batch norm reads its convolution's output under autocast)
# --pace: afterwards (no timing runs after it), profile 3 plain steps with torch.profiler (CPU + CUDA,
# record_shapes) and print the median recorded kernel launch call's duration (`pace_us`): the
# host's launch pace as bneck reads it from a trace (its `launch_pace`).
import argparse, json, os, statistics, tempfile, time
import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--program", required=True)
p.add_argument("--n", type=int, default=200)
p.add_argument("--steps", type=int, default=60)
p.add_argument("--blocks", type=int, default=6)
p.add_argument("--pace", action="store_true")
a = p.parse_args()
dev = torch.device("cuda")
bf, f32 = torch.bfloat16, torch.float32
N = a.n
if a.program in ("relu_bf16", "add_bf16", "linear_bf16", "layernorm_bf16"):
    x = torch.randn(8, 256, device=dev, dtype=bf)
    y = torch.randn(8, 256, device=dev, dtype=bf)
    W = torch.randn(256, 256, device=dev, dtype=bf)
elif a.program == "linear_fp32":
    x = torch.randn(8, 256, device=dev, dtype=f32)
    W = torch.randn(256, 256, device=dev, dtype=f32)
elif a.program in ("conv_fp32", "conv_bn_fp32", "conv_bn_tf32"):
    x = torch.randn(1, 16, 8, 8, device=dev, dtype=f32)
    W = torch.randn(16, 16, 3, 3, device=dev, dtype=f32)
    m, v = torch.zeros(16, device=dev), torch.ones(16, device=dev)
    w, b = torch.ones(16, device=dev), torch.zeros(16, device=dev)
    torch.backends.cudnn.allow_tf32 = a.program != "conv_bn_fp32"  # PyTorch's default: True
elif a.program in ("bn_bf16", "bn_mixed"):
    x = torch.randn(1, 16, 8, 8, device=dev, dtype=bf)
    xf = x.float()
    m, v = torch.zeros(16, device=dev), torch.ones(16, device=dev)
    w, b = torch.ones(16, device=dev), torch.zeros(16, device=dev)
else:
    raise SystemExit("unknown program " + a.program)


def step(auto):
    xb = xf if a.program == "bn_mixed" and not auto else x
    for _ in range(N):
        if a.program == "relu_bf16":
            torch.relu(x)
        elif a.program == "add_bf16":
            x + y
        elif a.program in ("linear_bf16", "linear_fp32"):
            F.linear(x, W)
        elif a.program == "conv_fp32":
            F.conv2d(x, W, padding=1)
        elif a.program in ("conv_bn_fp32", "conv_bn_tf32"):
            F.batch_norm(F.conv2d(x, W, padding=1), m, v, w, b, False)
        elif a.program in ("bn_bf16", "bn_mixed"):
            F.batch_norm(xb, m, v, w, b, False)
        elif a.program == "layernorm_bf16":
            F.layer_norm(x, (256,))


def timed(auto):
    out = []
    for _ in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad(), torch.autocast("cuda", dtype=bf, enabled=auto):
            step(auto)
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


with torch.no_grad():
    for _ in range(3):
        timed(False), timed(True)
plain, auto = [], []
for _ in range(a.blocks):
    plain += timed(False)
    auto += timed(True)
mp, ma = statistics.median(plain), statistics.median(auto)
pace = ""
if a.pace:
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.no_grad(), torch.profiler.profile(activities=acts, record_shapes=True) as prof:
        for _ in range(3):
            step(False)
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    os.unlink(path)
    launches = [e["dur"] for e in ev if e.get("ph") == "X" and "LaunchKernel" in e.get("name", "")]
    pace = f" pace_us {statistics.median(launches):.3f} launches {len(launches)}" if launches else " pace_us none"

print(f"program {a.program} n {N} plain_ms {mp:.4f} autocast_ms {ma:.4f} per_op_us {(ma - mp) / N * 1e3:.3f} "
      f"plain_per_op_us {mp / N * 1e3:.3f}{pace} torch {torch.__version__} gpu {torch.cuda.get_device_name()}")
