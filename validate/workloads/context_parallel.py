# Long-sequence prefill (forward only, torch.no_grad) of a small decoder, for context-parallel
# ground truth: one-GPU traces to forecast from, and ring attention over N GPUs.
# Model (plain PyTorch): token embedding (vocab 32000), 8 pre-LayerNorm blocks, d 2048, 16 heads
# (head dim 128), rotary position embedding (base 10000, rotate-half) on q and k, causal attention,
# MLP Linear(2048, 8192) + tanh-GELU + Linear(8192, 2048), no biases; final LayerNorm and an
# untied LM head applied to the last position only (the next-token logits of a prefill).
#   small: 16384 tokens, batch 1;  large: 32768 tokens, batch 1;  tiny: 2 layers, d 64, 4 heads,
#   256 tokens, vocab 512 (CPU tests only)
# Precision: model.to(torch.bfloat16) (bf16 weights and activations, no autocast); --dtype fp32
# for tests. Random token ids (seed 0), the same full sequence on every rank.
# World size 1 (plain `python3`, or torchrun with one process): the plain model over all T tokens,
# attention = F.scaled_dot_product_attention(q, k, v, is_causal=True), no torch.distributed.
# World size N > 1 (torchrun --nproc_per_node N), or --dist at any size: ring attention in plain
# PyTorch. Rank r holds the contiguous tokens [r*T/N, (r+1)*T/N) (rotary positions global) and runs
# the whole model on them; in each layer it stacks its k and v into one buffer and, for s = 0..N-1,
# holds the kv block of rank j = (r - s) mod N: while it computes the attention of its q against
# that block (the attention op that also returns the log-sum-exp, of the backend that
# F.scaled_dot_product_attention picks for these shapes, so the kernels match the one-GPU run's:
# torch.ops.aten._scaled_dot_product_cudnn_attention where that is cuDNN, as on H200 with torch
# 2.11, else _scaled_dot_product_flash_attention; --ring-attn cudnn|flash forces one; causal for
# j == r, unmasked for j < r, skipped for j > r), it sends the block to
# rank r+1 and receives the next from rank r-1 (dist.batch_isend_irecv of one isend and one irecv,
# NCCL P2P on its own stream, so the transfer overlaps the attention); the partial outputs are
# merged in fp32 by their log-sum-exps (flash-style), then cast back. The contiguous layout is
# causally unbalanced: rank r computes r+1 of the N blocks (rank N-1 does the most).
# --check: before timing, compare the ring path's final hidden states with the plain model's
#   (every rank runs the plain model over all T tokens too) and print max_abs_err / rel_err.
# Timing: --warmup steps (default 5), then --steps (default 20) steps, each between CUDA events on
# the current stream with torch.cuda.synchronize() before and after (and dist.barrier() before, at
# world size > 1). Prints: config ...; steps_ms; wall_steps_ms; median_ms X; mean/min/max;
# peak_mem_gib. At world size > 1 rank 0 prints steps_ms / median_ms of the slowest rank per step
# (all_reduce MAX of the per-step times) and every rank prints "rank R median_ms_local X".
# --kineto DIR: after the unprofiled timing (skipped with --steps 0), torch.profiler (CPU + CUDA,
#   schedule wait=1 warmup=2 active=3, record_shapes unless --no-shapes), each step in
#   record_function(f"step{i}"), gzipped chrome trace
#   DIR/context_parallel.<size>.ws<W>.r<R>.kineto.json.gz, rank 0 only unless --kineto-all-ranks;
#   prints profiled_steps_ms and profiled_median_ms (median of the 3 active steps).
# --nvtx: the timed steps in torch.cuda.nvtx ranges "step{i}" (warm-ups "warm{i}"), for Nsight
#   Systems; times print as nvtx_steps_ms / profiled_median_ms.
import argparse, contextlib, os, statistics, time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (NCCL_NVLS_ENABLE=0)
NAME = "context_parallel"
SIZES = {  # layers, d, heads, ffn, tokens, batch, vocab
    "small": (8, 2048, 16, 8192, 16384, 1, 32000),
    "large": (8, 2048, 16, 8192, 32768, 1, 32000),
    "tiny": (2, 64, 4, 256, 256, 1, 512),
}

p = argparse.ArgumentParser()
p.add_argument("--size", default="small", choices=sorted(SIZES))
p.add_argument("--steps", type=int, default=20, help="unprofiled timed steps (0: none)")
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--kineto", default="")
p.add_argument("--kineto-all-ranks", action="store_true")
p.add_argument("--no-shapes", action="store_true")
p.add_argument("--nvtx", action="store_true")
p.add_argument("--dist", action="store_true", help="the ring-attention path even at world size 1 (needs torchrun)")
p.add_argument("--check", action="store_true", help="compare the ring path with the plain model first")
p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
p.add_argument("--ring-attn", default="auto", choices=["auto", "cudnn", "flash"],
               help="ring path's block attention: auto = the backend F.scaled_dot_product_attention picks for these shapes")
a = p.parse_args()

# ---- setup shared by the three workloads -------------------------------------------------------
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
DIST = WORLD > 1 or a.dist
CUDA = torch.cuda.is_available()
if CUDA:
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
else:  # CPU: tests of the code paths only
    dev = torch.device("cpu")
if DIST:
    if CUDA:
        dist.init_process_group("nccl", device_id=dev)
    else:
        dist.init_process_group("gloo")
RANK = dist.get_rank() if DIST else 0
DTYPE = torch.bfloat16 if a.dtype == "bf16" else torch.float32
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def say(line, all_ranks=False):
    if RANK == 0 or all_ranks:
        print(line if RANK == 0 and not all_ranks else f"rank {RANK} {line}", flush=True)


def sync():
    if CUDA:
        torch.cuda.synchronize()


def timed(step, nvtx_name=None, rf_name=None):
    sync()
    if DIST and WORLD > 1:
        dist.barrier()
    if CUDA:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    w0 = time.perf_counter()
    if nvtx_name and CUDA:
        torch.cuda.nvtx.range_push(nvtx_name)
    with (torch.profiler.record_function(rf_name) if rf_name else contextlib.nullcontext()):
        if CUDA:
            s.record()
        step()
        if CUDA:
            e.record()
    if nvtx_name and CUDA:
        torch.cuda.nvtx.range_pop()
    sync()
    w = (time.perf_counter() - w0) * 1e3
    return (s.elapsed_time(e) if CUDA else w), w


def slowest(ts):
    """per-step maximum over ranks (the step time of the job)"""
    if not (DIST and WORLD > 1):
        return ts
    t = torch.tensor(ts, dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def fmt(xs):
    return " ".join(f"{x:.3f}" for x in xs)


def plain(step):
    nv = a.nvtx
    for i in range(a.warmup):
        timed(step, nvtx_name=f"warm{i}" if nv else None)
    if CUDA:
        torch.cuda.reset_peak_memory_stats()
    ts, ws = [], []
    for i in range(a.steps):
        t, w = timed(step, nvtx_name=f"step{i}" if nv else None)
        ts.append(t); ws.append(w)
    job = slowest(ts)
    say(f"warmup {a.warmup} steps {a.steps}")
    say(f"{'nvtx_' if nv else ''}steps_ms {fmt(job)}")
    say(f"wall_steps_ms {fmt(ws)}")
    say(f"{'profiled_median_ms' if nv else 'median_ms'} {statistics.median(job):.3f}")
    say(f"mean_ms {statistics.mean(job):.3f} min_ms {min(job):.3f} max_ms {max(job):.3f} wall_median_ms {statistics.median(ws):.3f}")
    if DIST and WORLD > 1:
        say(f"median_ms_local {statistics.median(ts):.3f}", all_ranks=True)
    if CUDA:
        say(f"peak_mem_gib {torch.cuda.max_memory_allocated() / 2**30:.2f}")


def kineto(step, size):
    on = RANK == 0 or a.kineto_all_ranks
    shapes = not a.no_shapes
    pre = 2 if a.steps > 0 else a.warmup
    for i in range(pre):
        timed(step)
    os.makedirs(a.kineto, exist_ok=True)
    path = os.path.join(a.kineto, f"{NAME}.{size}.ws{WORLD}.r{RANK}.kineto.json.gz")
    exp = {}

    def ready(prof):
        t = time.perf_counter()
        prof.export_chrome_trace(path)
        exp["s"] = time.perf_counter() - t

    WAIT, WARM, ACTIVE = 1, 2, 3
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if CUDA else [])
    ctx = (torch.profiler.profile(activities=acts, record_shapes=shapes, on_trace_ready=ready,
                                  schedule=torch.profiler.schedule(wait=WAIT, warmup=WARM, active=ACTIVE, repeat=1))
           if on else contextlib.nullcontext())
    ts, ws = [], []
    with ctx as prof:
        for i in range(WAIT + WARM + ACTIVE):
            t, w = timed(step, rf_name=f"step{i}")
            ts.append(t); ws.append(w)
            if on:
                prof.step()
    job = slowest(ts)
    say(f"kineto schedule wait {WAIT} warmup {WARM} active {ACTIVE} record_shapes {shapes} pre_warmup {pre}")
    say(f"profiled_steps_ms {fmt(job)}")
    say(f"profiled_wall_steps_ms {fmt(ws)}")
    say(f"profiled_median_ms {statistics.median(job[WAIT + WARM:]):.3f}")
    if on:
        say(f"kineto_trace {path} bytes {os.path.getsize(path) if os.path.exists(path) else -1} export_s {exp.get('s', -1):.1f}",
            all_ranks=RANK != 0)


def finish():
    if DIST:
        dist.barrier()
        dist.destroy_process_group()


def env_desc():
    return (f"torch {torch.__version__} gpu {torch.cuda.get_device_name() if CUDA else 'cpu'} "
            f"backend {dist.get_backend() if DIST else 'none'}")


# ---- the workload ------------------------------------------------------------------------------
L, D, H, FF, T, B, V = SIZES[a.size]
HD = D // H
N = dist.get_world_size() if DIST else 1
assert T % N == 0, "tokens must divide by the world size"
TL = T // N  # tokens per rank


def rope_tables(t, hd, dtype):
    inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    f = torch.outer(torch.arange(t, device=dev, dtype=torch.float32), inv)  # (t, hd/2)
    return f.cos().to(dtype), f.sin().to(dtype)


def rope(x, cos, sin):  # x (b, t, h, hd); cos/sin (t, hd/2)
    h2 = x.shape[-1] // 2
    x1, x2 = x[..., :h2], x[..., h2:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


def attn_lse(q, k, v, causal):
    """attention of q against one kv block and its log-sum-exp (b, h, lq), fp32"""
    if q.is_cuda and RING_BACKEND == "cudnn":
        r = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
        return r[0], r[1].reshape(q.shape[:3])  # cuDNN's lse is (b, h, lq, 1)
    if q.is_cuda:
        r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False)
        return r[0], r[1][..., :q.shape[2]]
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.matmul(torch.exp(s - lse[..., None]), v.float()).to(q.dtype), lse


def ring_attention(q, k, v):
    """q, k, v (b, h, TL, hd) of this rank's tokens; causal attention over the whole sequence"""
    r = RANK
    kv = torch.stack([k.transpose(1, 2), v.transpose(1, 2)])  # (2, b, TL, h, hd): the layout of the plain path
    out = lse = None
    for s in range(N):
        j = (r - s) % N  # owner of the kv block held now
        reqs = []
        if s < N - 1:
            nxt = torch.empty_like(kv)
            reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, kv, (r + 1) % N),
                                           dist.P2POp(dist.irecv, nxt, (r - 1) % N)])
        if j <= r:
            o, l = attn_lse(q, kv[0].transpose(1, 2), kv[1].transpose(1, 2), causal=(j == r))
            if out is None:
                out, lse = o.float(), l
            else:
                new = torch.logaddexp(lse, l)
                out = out * torch.exp(lse - new)[..., None] + o.float() * torch.exp(l - new)[..., None]
                lse = new
        for q_ in reqs:
            q_.wait()
        if s < N - 1:
            kv = nxt
    return out.to(q.dtype)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D, bias=False)
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.ln2 = nn.LayerNorm(D, bias=False)
        self.up = nn.Linear(D, FF, bias=False)
        self.down = nn.Linear(FF, D, bias=False)

    def forward(self, x, cos, sin, ring):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, H, HD).unbind(2)
        q = rope(q, cos, sin).transpose(1, 2)
        k = rope(k, cos, sin).transpose(1, 2)
        v = v.transpose(1, 2)
        y = ring_attention(q, k, v) if ring else F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(D, bias=False)
        self.lm_head = nn.Linear(D, V, bias=False)
        for prm in self.parameters():
            if prm.dim() == 2:
                nn.init.normal_(prm, 0.0, 0.02)

    def forward(self, idx, cos, sin, ring):
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x, cos, sin, ring)
        x = self.ln_f(x)
        return x, self.lm_head(x[:, -1])


torch.manual_seed(0)
t0 = time.perf_counter()
with torch.device(dev):
    model = Decoder()
model = model.to(DTYPE).eval()
nparams = sum(q.numel() for q in model.parameters())
build_s = time.perf_counter() - t0
g = torch.Generator(device=dev).manual_seed(0)
ids_full = torch.randint(0, V, (B, T), device=dev, generator=g)
cos_full, sin_full = rope_tables(T, HD, DTYPE)
lo = RANK * TL
ids, cos, sin = ids_full[:, lo:lo + TL].contiguous(), cos_full[lo:lo + TL], sin_full[lo:lo + TL]

def pick_ring_backend():
    """the backend F.scaled_dot_product_attention would use for this rank's (q, k, v) blocks"""
    if not CUDA:
        return "math(cpu)"
    if a.ring_attn != "auto":
        return a.ring_attn
    try:
        x = torch.empty(B, TL, H, HD, device=dev, dtype=DTYPE).transpose(1, 2)
        choice = torch._fused_sdp_choice(x, x, x, None, 0.0, True)
        name = torch.nn.attention.SDPBackend(choice).name
    except Exception as e:  # unknown: cuDNN, as on H200 with torch 2.11
        say(f"ring_backend_probe_failed {type(e).__name__}: {e}"[:300])
        return "cudnn"
    return "cudnn" if name == "CUDNN_ATTENTION" else "flash"


RING_BACKEND = pick_ring_backend() if DIST else "none"
say(f"config workload {NAME} size {a.size} world {WORLD} path {'distributed(ring attention)' if DIST else 'single-gpu'} "
    f"inference(prefill, no_grad) layers {L} d {D} heads {H} head_dim {HD} ffn {FF} tokens {T} batch {B} "
    f"tokens_per_rank {TL} vocab {V} params {nparams} dtype {a.dtype}(model.to) autocast none "
    f"attn {'ring(' + RING_BACKEND + ' block attention with lse + fp32 lse merge, batch_isend_irecv)' if DIST else 'sdpa(is_causal)'} "
    f"build_s {build_s:.1f} {env_desc()}")

if a.check:
    with torch.no_grad():
        ref, _ = model(ids_full, cos_full, sin_full, ring=False)
        got, _ = model(ids, cos, sin, ring=DIST)
        ref = ref[:, lo:lo + TL].float()
        err = (got.float() - ref).abs().max().item()
        rel = ((got.float() - ref).norm() / ref.norm()).item()
    say(f"check max_abs_err {err:.3e} rel_err {rel:.3e} ref_absmax {ref.abs().max().item():.3e}", all_ranks=True)
    del ref, got


def step():
    with torch.no_grad():
        model(ids, cos, sin, ring=DIST)


if a.steps > 0 or a.nvtx:
    plain(step)
if a.kineto and not a.nvtx:
    kineto(step, a.size)
finish()
