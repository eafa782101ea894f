# GPT-2-class decoder LM training step for multi-GPU ground truth (FSDP): one-GPU traces to
# forecast from, and the same program sharded with FSDP on N GPUs (weak scaling: every rank trains
# on its own batch of the one-GPU size, so the global batch is N x --batch).
# Model (plain PyTorch): token embedding (vocab 50304 = GPT-2's 50257 padded to a multiple of 64)
# + learned position embedding, pre-LayerNorm blocks (fused QKV Linear, causal
# F.scaled_dot_product_attention, out-proj; MLP Linear(d, 4d) + tanh-GELU + Linear(4d, d); all
# Linear with bias), final LayerNorm, LM head tied to the token embedding; no dropout.
#   small: 12 layers, d 768, 12 heads, seq 1024, batch 8   (GPT-2 small shape)
#   large: 24 layers, d 1024, 16 heads, seq 1024, batch 8  (GPT-2 medium shape)
#   tiny : 2 layers, d 64, 4 heads, seq 64, batch 2, vocab 512 (CPU tests only)
# Precision: the model is cast with model.to(torch.bfloat16) (bf16 parameters, gradients and AdamW
# states; no autocast), on one GPU and on N GPUs alike; --dtype fp32 for tests.
# Step: forward, cross-entropy loss on the next token, backward, torch.optim.AdamW(lr 1e-4,
# defaults) step, zero_grad(set_to_none=True). Random token ids, fixed for the run (seed 0 + rank).
# World size 1 (plain `python3`, or torchrun with one process): the plain one-GPU program, no
# torch.distributed. World size > 1 (torchrun --nproc_per_node N), or --dist at any size:
# torch.distributed.fsdp.fully_shard (FSDP2) on every block, then on the root (embeddings, final
# LayerNorm, tied LM head); no MixedPrecisionPolicy (parameters are already bf16, so all-gathers
# and reduce-scatters move bf16). Without FSDP2, FSDP1 (FullyShardedDataParallel,
# ModuleWrapPolicy({Block}), use_orig_params=True); --fsdp1 forces it.
# Timing: --warmup steps (default 5), then --steps (default 20) steps, each between CUDA events on
# the current stream with torch.cuda.synchronize() before and after (and dist.barrier() before, at
# world size > 1). Prints: config ...; steps_ms; wall_steps_ms; median_ms X; mean/min/max;
# peak_mem_gib. At world size > 1 rank 0 prints steps_ms / median_ms of the slowest rank per step
# (all_reduce MAX of the per-step times) and every rank prints "rank R median_ms_local X".
# --kineto DIR: after the unprofiled timing (skipped with --steps 0), torch.profiler (CPU + CUDA,
#   schedule wait=1 warmup=2 active=3, record_shapes unless --no-shapes), each step in
#   record_function(f"step{i}"), gzipped chrome trace DIR/fsdp_gpt.<size>.ws<W>.r<R>.kineto.json.gz,
#   rank 0 only unless --kineto-all-ranks; prints profiled_steps_ms and profiled_median_ms (median
#   of the 3 active steps; slowest rank per step at world size > 1).
# --nvtx: the timed steps in torch.cuda.nvtx ranges "step{i}" (warm-ups "warm{i}"), for Nsight
#   Systems; times print as nvtx_steps_ms / profiled_median_ms.
import argparse, contextlib, os, statistics, time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (NCCL_NVLS_ENABLE=0)
NAME = "fsdp_gpt"
SIZES = {  # layers, d, heads, seq, batch, vocab
    "small": (12, 768, 12, 1024, 8, 50304),
    "large": (24, 1024, 16, 1024, 8, 50304),
    "tiny": (2, 64, 4, 64, 2, 512),
}

p = argparse.ArgumentParser()
p.add_argument("--size", default="small", choices=sorted(SIZES))
p.add_argument("--steps", type=int, default=20, help="unprofiled timed steps (0: none)")
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--batch", type=int, default=0, help="per-rank batch (default: the size's)")
p.add_argument("--kineto", default="")
p.add_argument("--kineto-all-ranks", action="store_true")
p.add_argument("--no-shapes", action="store_true")
p.add_argument("--nvtx", action="store_true")
p.add_argument("--dist", action="store_true", help="the distributed (FSDP) path even at world size 1 (needs torchrun)")
p.add_argument("--fsdp1", action="store_true", help="FSDP1 even where FSDP2 exists")
p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
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
L, D, H, S, B, V = SIZES[a.size]
if a.batch:
    B = a.batch


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.h, c // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, c // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, c // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(S, D)
        self.blocks = nn.ModuleList(Block(D, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for n, prm in self.named_parameters():
            if prm.dim() == 2:
                nn.init.normal_(prm, 0.0, 0.02 / ((2 * L) ** 0.5 if n.endswith(("proj.weight", "fc2.weight")) else 1.0))

    def forward(self, idx, tgt):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.reshape(-1))


torch.manual_seed(0)
t0 = time.perf_counter()
with torch.device(dev):
    model = GPT()
model = model.to(DTYPE)
nparams = sum(q.numel() for q in model.parameters())  # tied weight counted once
how = "none"
if DIST:
    fs = None
    if not a.fsdp1:
        try:
            from torch.distributed.fsdp import fully_shard as fs
        except ImportError:
            try:
                from torch.distributed._composable.fsdp import fully_shard as fs
            except ImportError:
                fs = None
    if fs is not None:
        for blk in model.blocks:
            fs(blk)
        fs(model)
        how = "fsdp2(fully_shard per block + root, no MixedPrecisionPolicy)"
    else:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}), device_id=dev if CUDA else None,
                     use_orig_params=True)
        how = "fsdp1(FullyShardedDataParallel, ModuleWrapPolicy({Block}), use_orig_params)"
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
build_s = time.perf_counter() - t0
g = torch.Generator(device=dev).manual_seed(RANK)
ids = torch.randint(0, V, (B, S + 1), device=dev, generator=g)
inp, tgt = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
model.train()


def step():
    loss = model(inp, tgt)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


say(f"config workload {NAME} size {a.size} world {WORLD} path {'distributed' if DIST else 'single-gpu'} sharding {how} "
    f"train layers {L} d {D} heads {H} seq {S} batch {B} vocab {V} tokens_per_step_per_rank {B * S} "
    f"tokens_per_step {B * S * WORLD} params {nparams} dtype {a.dtype}(model.to) autocast none attn sdpa(is_causal) "
    f"optimizer AdamW(lr=1e-4,defaults) build_s {build_s:.1f} {env_desc()}")
if a.steps > 0 or a.nvtx:
    plain(step)
if a.kineto and not a.nvtx:
    kineto(step, a.size)
finish()
