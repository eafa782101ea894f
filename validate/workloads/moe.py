# Mixtral-style mixture-of-experts decoder LM training step, for expert-parallel ground truth:
# one-GPU traces to forecast from, and the same program with experts spread over N GPUs (weak
# scaling: every rank trains on its own batch of the one-GPU size).
# Model (plain PyTorch): token embedding (vocab 32000), pre-RMSNorm blocks: attention (fused QKV,
# 16 heads of 64, rotary embedding base 10000, causal F.scaled_dot_product_attention, out-proj),
# then a sparse MoE block: router Linear(d, E) -> softmax (fp32) -> top-2, the two weights
# renormalised to sum 1; each expert a SwiGLU MLP w2(silu(w1 x) * w3 x), ffn 3584; final RMSNorm,
# untied LM head, cross-entropy loss on the next token. No biases, no dropout, no auxiliary
# load-balancing loss. d 1024, 8 experts, batch 8 x seq 1024 = 8192 tokens per rank.
#   small: 4 layers;  large: 8 layers;  tiny: 2 layers, d 64, 4 heads, 4 experts, ffn 128,
#   batch 2 x seq 32, vocab 512 (CPU tests only)
# Precision: model.to(torch.bfloat16) (bf16 parameters, gradients and AdamW states; router softmax
# in fp32; no autocast); --dtype fp32 for tests. Parameters are drawn per name from fixed seeds, so
# every rank (and the one-GPU run) holds the same weights; data: random ids, seed 0 + rank.
# Step: forward, loss, backward, torch.optim.AdamW(lr 1e-4, defaults) step, zero_grad(set_to_none).
# World size 1 (plain `python3`, or torchrun with one process): no torch.distributed; the experts
# run as in the common eager implementation (Hugging Face Mixtral): a loop over the E experts, each
# torch.where on the one-hot top-2 mask (a host sync), index_select of its tokens, the SwiGLU
# GEMMs, scaling by the routing weight, index_add_ into the output.
# World size N > 1 (torchrun --nproc_per_node N), or --dist at any size: expert parallelism. Rank
# r owns experts [r*E/N, (r+1)*E/N). Dispatch: the (token, choice) pairs are sorted by expert
# (argsort, stable), their tokens gathered (index_select); the per-expert counts are exchanged
# first (all_to_all_single of E int64), then the split sizes read on the host (one sync) and the
# tokens sent with all_to_all_single (uneven splits); the received rows are run through the local
# experts with the same loop (torch.where, index_select, SwiGLU, index_add_), sent back with a
# second all_to_all_single, weighted and index_add_-ed into the output. Both all-to-alls are
# autograd functions whose backward is the reverse all_to_all_single. The non-expert parameters
# (embedding, attention, norms, routers, LM head) are data parallel: after backward their gradients
# are flattened into one buffer and all-reduced (SUM; one NCCL call, not overlapped with backward;
# no DDP); the loss is scaled by 1/N so that the gradients are those of the mean over all ranks'
# tokens (expert gradients, which collect all ranks' tokens, need no reduction).
# --check: before timing, compare the loss and gradients of the expert-parallel model with a copy
#   holding all E experts that runs the one-GPU path over every rank's batch (printed as rel errors).
# Timing: --warmup steps (default 5), then --steps (default 20) steps, each between CUDA events on
# the current stream with torch.cuda.synchronize() before and after (and dist.barrier() before, at
# world size > 1). Prints: config ...; steps_ms; wall_steps_ms; median_ms X; mean/min/max;
# peak_mem_gib; tokens_per_expert (of the last step, this rank's experts). At world size > 1 rank 0
# prints steps_ms / median_ms of the slowest rank per step (all_reduce MAX of the per-step times)
# and every rank prints "rank R median_ms_local X".
# --kineto DIR: after the unprofiled timing (skipped with --steps 0), torch.profiler (CPU + CUDA,
#   schedule wait=1 warmup=2 active=3, record_shapes unless --no-shapes), each step in
#   record_function(f"step{i}"), gzipped chrome trace DIR/moe.<size>.ws<W>.r<R>.kineto.json.gz,
#   rank 0 only unless --kineto-all-ranks; prints profiled_steps_ms and profiled_median_ms.
# --nvtx: the timed steps in torch.cuda.nvtx ranges "step{i}" (warm-ups "warm{i}"), for Nsight
#   Systems; times print as nvtx_steps_ms / profiled_median_ms.
import argparse, contextlib, os, statistics, time, zlib

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (NCCL_NVLS_ENABLE=0)
NAME = "moe"
SIZES = {  # layers, d, heads, experts, ffn, top-k, batch, seq, vocab
    "small": (4, 1024, 16, 8, 3584, 2, 8, 1024, 32000),
    "large": (8, 1024, 16, 8, 3584, 2, 8, 1024, 32000),
    "tiny": (2, 64, 4, 4, 128, 2, 2, 32, 512),
}

p = argparse.ArgumentParser()
p.add_argument("--size", default="small", choices=sorted(SIZES))
p.add_argument("--steps", type=int, default=20, help="unprofiled timed steps (0: none)")
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--experts", type=int, default=0, help="number of experts (default: the size's)")
p.add_argument("--kineto", default="")
p.add_argument("--kineto-all-ranks", action="store_true")
p.add_argument("--no-shapes", action="store_true")
p.add_argument("--nvtx", action="store_true")
p.add_argument("--dist", action="store_true", help="the expert-parallel path even at world size 1 (needs torchrun)")
p.add_argument("--check", action="store_true", help="compare the expert-parallel path with the one-GPU path first")
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
L, D, H, E, FF, K, B, S, V = SIZES[a.size]
if a.experts:
    E = a.experts
HD = D // H
N = dist.get_world_size() if DIST else 1
assert E % N == 0, "experts must divide by the world size"
EL = E // N  # experts per rank


def rope_tables(t, hd, dtype):
    inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
    f = torch.outer(torch.arange(t, device=dev, dtype=torch.float32), inv)
    return f.cos().to(dtype), f.sin().to(dtype)


def rope(x, cos, sin):  # x (b, t, h, hd)
    h2 = x.shape[-1] // 2
    x1, x2 = x[..., :h2], x[..., h2:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)


class AllToAll(torch.autograd.Function):
    """all_to_all_single of rows with uneven splits; backward sends the gradients back"""

    @staticmethod
    def forward(ctx, x, out_splits, in_splits):
        ctx.splits = (out_splits, in_splits)
        out = x.new_empty((sum(out_splits),) + tuple(x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits)
        return out

    @staticmethod
    def backward(ctx, gy):
        out_splits, in_splits = ctx.splits
        gx = gy.new_empty((sum(in_splits),) + tuple(gy.shape[1:]))
        dist.all_to_all_single(gx, gy.contiguous(), in_splits, out_splits)
        return gx, None, None


class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(D, FF, bias=False)
        self.w3 = nn.Linear(D, FF, bias=False)
        self.w2 = nn.Linear(FF, D, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    def __init__(self, ep):
        super().__init__()
        self.ep = ep
        self.gate = nn.Linear(D, E, bias=False)
        first = RANK * EL if ep else 0
        self.first, self.n = first, (EL if ep else E)
        self.experts = nn.ModuleDict({str(e): Expert() for e in range(first, first + self.n)})  # global ids
        self.last_counts = None

    def forward(self, x):
        b, t, c = x.shape
        x = x.reshape(-1, c)
        probs = F.softmax(self.gate(x), dim=1, dtype=torch.float)
        w, idx = torch.topk(probs, K, dim=-1)
        w = (w / w.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = self.ep_forward(x, w, idx) if self.ep else self.local_forward(x, w, idx)
        return out.view(b, t, c)

    def local_forward(self, x, w, idx):
        out = torch.zeros_like(x)
        mask = F.one_hot(idx, num_classes=E).permute(2, 1, 0)  # (E, K, tokens)
        counts = []
        for e in range(E):
            kk, tok = torch.where(mask[e])
            counts.append(tok.numel())
            if tok.numel() == 0:
                continue
            y = self.experts[str(e)](x.index_select(0, tok)) * w[tok, kk, None]
            out.index_add_(0, tok, y)
        self.last_counts = counts
        return out

    def ep_forward(self, x, w, idx):
        flat = idx.reshape(-1)  # (tokens * K), expert of each (token, choice)
        order = torch.argsort(flat, stable=True)
        tok = order // K  # token of each sorted pair
        send = x.index_select(0, tok)  # rows grouped by expert, so by owner rank
        cnt = torch.bincount(flat, minlength=E)  # rows this rank sends to each global expert
        rcnt = torch.empty_like(cnt)
        dist.all_to_all_single(rcnt, cnt)  # rcnt.view(N, EL)[src, e]: rows from src for local expert e
        rc = rcnt.view(N, EL)
        sizes = torch.cat([cnt.view(N, EL).sum(1), rc.sum(1)]).tolist()  # one host sync
        send_splits, recv_splits = sizes[:N], sizes[N:]
        recv = AllToAll.apply(send, recv_splits, send_splits)
        eid = torch.repeat_interleave(torch.arange(EL, device=x.device).repeat(N), rc.reshape(-1),
                                      output_size=sum(recv_splits))
        y = torch.zeros_like(recv)
        counts = []
        for e in range(EL):
            rows = torch.where(eid == e)[0]
            counts.append(rows.numel())
            if rows.numel() == 0:
                continue
            y.index_add_(0, rows, self.experts[str(self.first + e)](recv.index_select(0, rows)))
        self.last_counts = counts
        back = AllToAll.apply(y, send_splits, recv_splits)
        out = torch.zeros_like(x)
        out.index_add_(0, tok, back * w.reshape(-1)[order, None])
        return out


class Block(nn.Module):
    def __init__(self, ep):
        super().__init__()
        self.n1 = nn.RMSNorm(D, eps=1e-5)
        self.qkv = nn.Linear(D, 3 * D, bias=False)
        self.o = nn.Linear(D, D, bias=False)
        self.n2 = nn.RMSNorm(D, eps=1e-5)
        self.moe = MoE(ep)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, H, HD).unbind(2)
        y = F.scaled_dot_product_attention(rope(q, cos, sin).transpose(1, 2), rope(k, cos, sin).transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, c))
        return x + self.moe(self.n2(x))


class MoELM(nn.Module):
    def __init__(self, ep):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block(ep) for _ in range(L))
        self.norm = nn.RMSNorm(D, eps=1e-5)
        self.lm_head = nn.Linear(D, V, bias=False)
        with torch.no_grad():  # the same weights on every rank and in every layout: seed per name
            for n, prm in self.named_parameters():
                gen = torch.Generator(device=prm.device).manual_seed(zlib.crc32(n.encode()))
                if prm.dim() == 2:
                    prm.normal_(0.0, 0.02, generator=gen)
                else:
                    prm.fill_(1.0)

    def forward(self, idx, tgt, cos, sin):
        x = self.emb(idx)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.reshape(-1))


def is_expert(name):
    return ".experts." in name


def build(ep):
    with torch.device(dev):
        m = MoELM(ep)
    return m.to(DTYPE).train()


def allreduce_dense(m):
    gs = [q.grad for n, q in m.named_parameters() if not is_expert(n) and q.grad is not None]
    flat = torch._utils._flatten_dense_tensors(gs)
    dist.all_reduce(flat)
    for g_, f_ in zip(gs, torch._utils._unflatten_dense_tensors(flat, gs)):
        g_.copy_(f_)


t0 = time.perf_counter()
model = build(DIST)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
build_s = time.perf_counter() - t0
n_local = sum(q.numel() for q in model.parameters())
n_expert_local = sum(q.numel() for n, q in model.named_parameters() if is_expert(n))
n_dense = n_local - n_expert_local
n_expert_all = n_expert_local * N
n_total = n_dense + n_expert_all
per_expert = 3 * D * FF
n_active = n_dense + L * K * per_expert  # per token
cos, sin = rope_tables(S, HD, DTYPE)


def batch(r):
    g = torch.Generator(device=dev).manual_seed(r)
    ids = torch.randint(0, V, (B, S + 1), device=dev, generator=g)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()


inp, tgt = batch(RANK)

say(f"config workload {NAME} size {a.size} world {WORLD} path {'distributed(expert parallel, all_to_all_single)' if DIST else 'single-gpu'} "
    f"train layers {L} d {D} heads {H} experts {E} experts_per_rank {EL} ffn {FF} top_k {K} batch {B} seq {S} "
    f"tokens_per_step_per_rank {B * S} tokens_per_step {B * S * WORLD} vocab {V} params_total {n_total} "
    f"params_this_rank {n_local} params_dense {n_dense} params_per_expert {per_expert} params_active_per_token {n_active} "
    f"dtype {a.dtype}(model.to) autocast none attn sdpa(is_causal) optimizer AdamW(lr=1e-4,defaults) "
    f"build_s {build_s:.1f} {env_desc()}")

if a.check:
    ref = build(False)  # all E experts, the one-GPU path, every rank's batch
    loss_ref = 0.0
    for r in range(N):
        i_, t_ = batch(r)
        lr_ = ref(i_, t_, cos, sin) / N
        lr_.backward()
        loss_ref += lr_.item()
    loss = model(inp, tgt, cos, sin) / N
    loss.backward()
    lsum = loss.detach().clone()
    if DIST:
        dist.all_reduce(lsum)
        allreduce_dense(model)
    refp = dict(ref.named_parameters())

    def rel(kind):
        num = den = 0.0
        for n, q in model.named_parameters():
            if is_expert(n) == (kind == "expert") and q.grad is not None:
                r_ = refp[n].grad.float()
                num += (q.grad.float() - r_).pow(2).sum().item()
                den += r_.pow(2).sum().item()
        return (num / max(den, 1e-30)) ** 0.5

    say(f"check loss_ep {lsum.item():.6f} loss_ref {loss_ref:.6f} grad_rel_err_expert {rel('expert'):.3e} "
        f"grad_rel_err_dense {rel('dense'):.3e}", all_ranks=True)
    opt.zero_grad(set_to_none=True)
    del ref, refp


def step():
    loss = model(inp, tgt, cos, sin)
    if DIST:
        (loss / N).backward()
        allreduce_dense(model)
    else:
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


if a.steps > 0 or a.nvtx:
    plain(step)
    say("tokens_per_expert " + " | ".join(f"layer{i} " + ",".join(map(str, blk.moe.last_counts))
                                          for i, blk in enumerate(model.blocks)), all_ranks=DIST and WORLD > 1)
if a.kineto and not a.nvtx:
    kineto(step, a.size)
finish()
