# FP8 pairs for the precision what-if: a stack of transformer-style MLP blocks (x + W2 gelu(W1 x),
# W1: d -> 4d, W2: 4d -> d, no bias) in bf16 (model.to(bfloat16), the baseline), and the same
# blocks with their Linear layers in fp8 through torch._scaled_mm (e4m3 forward, e5m2 gradients):
#   bf16         torch.nn.functional.linear in bf16
#   fp8-tensor   dynamic per-tensor scaling (torchao Float8Linear's "tensorwise"): each operand's
#                amax (one reduction pass) then a scale-and-cast pass, both torch.compile'd
#                (the quantization as a compiler or Transformer Engine runs it); weights: cast each
#                forward in training, once up front in inference
#   fp8-row      (inference only) per-row scaling: one amax per row of the activations, per
#                output channel of the weights (torchao's "rowwise")
# Training: forward, loss (mean of squares), backward (grad_x = gy W and grad_W = gy^T x in fp8;
# each operand's cast writes its transposed copy too, in the same compiled function, for the
# layouts _scaled_mm needs, as Transformer Engine's cast-transpose does), AdamW step. Inference: forward, no grad.
# Usage: fp8_linear.py --mode bf16,fp8-tensor --dim 4096 --tokens 8192 --layers 8 [--train]
#        [--kineto DIR] -> prints steps_ms, median_ms per mode; DIR/<tag>.<mode>.kineto.json.gz
import argparse, statistics, torch

p = argparse.ArgumentParser()
p.add_argument("--mode", default="bf16")
p.add_argument("--dim", type=int, default=4096)
p.add_argument("--tokens", type=int, default=8192)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--train", action="store_true")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--kineto", default="")
a = p.parse_args()
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2
M4, M5 = torch.finfo(E4).max, torch.finfo(E5).max
for k in ("cache_size_limit", "recompile_limit"):  # one compiled variant per operand shape
    if hasattr(torch._dynamo.config, k):
        setattr(torch._dynamo.config, k, 64)


def _amax(x):
    return x.abs().amax().float()


def _cast(x, amax, fmax, dt):
    s = (amax.clamp(min=1e-12) / fmax).float()
    return (x.float() / s).clamp(-fmax, fmax).to(dt), s


def _amax_row(x):
    return x.abs().amax(dim=-1, keepdim=True).float()


amax_t, cast_t, amax_r = (torch.compile(f, dynamic=False) for f in (_amax, _cast, _amax_row))


def q_tensor(x, fmax, dt):
    return cast_t(x, amax_t(x), fmax, dt)


def q_row(x):  # scales of shape (rows, 1)
    return cast_t(x, amax_r(x), M4, E4)


def mm(aq, sa, bq, sb):
    return torch._scaled_mm(aq, bq, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)


def _cast_t(x, amax, fmax, dt):  # the cast and its transposed copy in one compiled function
    q, s = _cast(x, amax, fmax, dt)
    return q, q.t().contiguous(), s


cast_tt = torch.compile(_cast_t, dynamic=False)


def q_tensor_t(x, fmax, dt):
    return cast_tt(x, amax_t(x), fmax, dt)


class Fp8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        x2 = x.reshape(-1, x.shape[-1])
        xq, xq_t, sx = q_tensor_t(x2, M4, E4)
        wq, wq_t, sw = q_tensor_t(w, M4, E4)
        ctx.save_for_backward(xq_t, sx, wq_t, sw)
        return mm(xq, sx, wq.t(), sw).reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, gy):
        xq_t, sx, wq_t, sw = ctx.saved_tensors
        g2 = gy.reshape(-1, gy.shape[-1])
        gq, gq_t, sg = q_tensor_t(g2, M5, E5)
        gx = mm(gq, sg, wq_t.t(), sw)  # (M x N) (N x K): W column-major
        gw = mm(gq_t, sg, xq_t.t(), sx)  # (N x M) (M x K): x column-major
        return gx.reshape(*gy.shape[:-1], xq_t.shape[0]), gw


class Block(torch.nn.Module):
    def __init__(s, d):
        super().__init__()
        s.w1 = torch.nn.Parameter(torch.randn(4 * d, d) * d**-0.5)
        s.w2 = torch.nn.Parameter(torch.randn(d, 4 * d) * (4 * d) ** -0.5)
        s.mode, s.cache = "bf16", None

    def lin(s, x, w, i):
        if s.mode == "bf16":
            return torch.nn.functional.linear(x, w)
        if s.mode == "fp8-tensor" and torch.is_grad_enabled():
            return Fp8Linear.apply(x, w)
        if s.cache is None:  # inference: the weights quantized once
            s.cache = [q_tensor(v.detach(), M4, E4) if s.mode == "fp8-tensor" else q_row(v.detach()) for v in (s.w1, s.w2)]
        wq, sw = s.cache[i]
        x2 = x.reshape(-1, x.shape[-1])
        xq, sx = q_tensor(x2, M4, E4) if s.mode == "fp8-tensor" else q_row(x2)
        return mm(xq, sx, wq.t(), sw.t() if s.mode == "fp8-row" else sw).reshape(*x.shape[:-1], w.shape[0])

    def forward(s, x):
        return x + s.lin(torch.nn.functional.gelu(s.lin(x, s.w1, 0)), s.w2, 1)


torch.manual_seed(0)
model = torch.nn.Sequential(*[Block(a.dim) for _ in range(a.layers)]).cuda().to(torch.bfloat16)
x = torch.randn(a.tokens, a.dim, device="cuda", dtype=torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if a.train else None
tag = "%s-%dx%dx%d" % ("train" if a.train else "inf", a.layers, a.dim, a.tokens)


def step():
    if a.train:
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    else:
        with torch.no_grad():
            model(x)


def timed(n):
    out = []
    for _ in range(n):
        b, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        b.record()
        step()
        e.record()
        torch.cuda.synchronize()
        out.append(b.elapsed_time(e))
    return out


for mode in a.mode.split(","):
    for b in model:
        b.mode, b.cache = mode, None
    try:
        timed(5)
        ms = timed(a.steps)
    except Exception as ex:  # a mode this stack lacks: say so, go on
        print(tag, mode, "failed", type(ex).__name__, str(ex).splitlines()[0][:200], flush=True)
        continue
    print(tag, mode, "steps_ms", " ".join("%.4f" % v for v in ms), flush=True)
    print(tag, mode, "median_ms %.4f peak_mem_gib %.2f" % (statistics.median(ms), torch.cuda.max_memory_allocated() / 2**30), flush=True)
    if a.kineto:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        sched = torch.profiler.schedule(wait=1, warmup=2, active=3)
        with torch.profiler.profile(activities=acts, schedule=sched, record_shapes=True) as prof:
            for i in range(6):
                with torch.profiler.record_function("step%d" % i):
                    step()
                torch.cuda.synchronize()
                prof.step()
        prof.export_chrome_trace("%s/%s.%s.kineto.json" % (a.kineto, tag, mode))
