# A small GPT-style training loop whose ranges test one thing: a range around loss.backward() must
# cover the kernels that PyTorch's autograd engine launches from its own device thread, not from
# the thread that holds the range.
# Model (pure torch.nn, random weights, fp32 parameters, bf16 autocast): token + position
# embeddings, --layers pre-LN blocks (d_model --dim, --heads heads, causal scaled_dot_product_attention,
# MLP 4 x d_model with GELU), final LayerNorm, an untied LM head over --vocab tokens, cross-entropy
# on random targets; AdamW (PyTorch's default implementation for CUDA tensors), zero_grad(set_to_none).
# Defaults: 4 layers, d_model 1024, 16 heads, seq 512, batch 8, vocab 32768.
# Each step i: range "step{i}" holding "fw" (forward + loss), "bw" (loss.backward()) and "opt"
# (optimizer.step() + zero_grad()). Ground truth: CUDA events recorded on the current stream
# immediately before and after each phase and the whole step, the device synchronized at the end
# of each step. Host wall time of each phase is printed too (cpu_*_ms).
# Prints one line a step, "step I fw_ms X bw_ms Y opt_ms Z step_ms W cpu_fw_ms ... [profiled]",
# and the medians, "median fw_ms ... steps N" (and "profiled_median ..." with --kineto).
# Modes (--warmup steps first in each, not printed as timed):
#   --plain        no NVTX, no profiler (record_function ranges only, inert without a profiler)
#   --kineto DIR   torch.profiler (CPU + CUDA activities, shapes recorded), schedule wait 2, warmup 2,
#                  active 4: trace DIR/train_kineto.json.gz; the 4 active steps are marked "profiled"
#                  (and the wait/warmup ones "profiler_wait"/"profiler_warmup", left out of the medians)
#   --nvtx         the ranges also as NVTX ranges (torch.cuda.nvtx), for Nsight Systems; 8 steps
#   --no-ranges    no range of any kind (neither record_function nor NVTX), with any mode
# Usage: python3 train_ranges.py [--plain | --kineto DIR | --nvtx] [--no-ranges] [--steps N]
import argparse, contextlib, gzip, os, shutil, statistics, tempfile, time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
g = p.add_mutually_exclusive_group()
g.add_argument("--plain", action="store_true")
g.add_argument("--kineto", default="")
g.add_argument("--nvtx", action="store_true")
p.add_argument("--no-ranges", action="store_true")
p.add_argument("--steps", type=int, default=0, help="timed steps (default: 20 plain, 8 nvtx; kineto: 8, the schedule)")
p.add_argument("--warmup", type=int, default=3)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--dim", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--seq", type=int, default=512)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--vocab", type=int, default=32768)
a = p.parse_args()
WAIT, WARM, ACTIVE = 2, 2, 4
steps = WAIT + WARM + ACTIVE if a.kineto else (a.steps or (8 if a.nvtx else 20))
dev = torch.device("cuda")
torch.manual_seed(0)
D, H, S, B, V = a.dim, a.heads, a.seq, a.batch, a.vocab


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        s.qkv, s.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        s.fc1, s.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(s, x):
        b, t, _ = x.shape
        q, k, v = s.qkv(s.ln1(x)).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.proj(o.transpose(1, 2).reshape(b, t, D))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))


class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.tok, s.pos = nn.Embedding(V, D), nn.Embedding(S, D)
        s.blocks = nn.ModuleList(Block() for _ in range(a.layers))
        s.lnf, s.head = nn.LayerNorm(D), nn.Linear(D, V, bias=False)

    def forward(s, idx, tgt):
        x = s.tok(idx) + s.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in s.blocks:
            x = blk(x)
        logits = s.head(s.lnf(x))
        return F.cross_entropy(logits.view(-1, V).float(), tgt.view(-1))


model = GPT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
idx = torch.randint(0, V, (B, S), device=dev)
tgt = torch.randint(0, V, (B, S), device=dev)
nparams = sum(t.numel() for t in model.parameters())


@contextlib.contextmanager
def rng(name):  # record_function (seen by Kineto) and, with --nvtx, an NVTX range of the same name
    if a.no_ranges:
        yield
        return
    if a.nvtx:
        torch.cuda.nvtx.range_push(name)
    try:
        with torch.profiler.record_function(name):
            yield
    finally:
        if a.nvtx:
            torch.cuda.nvtx.range_pop()


PH = ("fw", "bw", "opt", "step")


def step(i):
    ev = {k: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for k in PH}
    cpu = {}
    t_step = time.perf_counter()
    with rng(f"step{i}"):
        ev["step"][0].record()
        t = time.perf_counter()
        with rng("fw"):
            ev["fw"][0].record()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(idx, tgt)
            ev["fw"][1].record()
        cpu["fw"] = time.perf_counter() - t
        t = time.perf_counter()
        with rng("bw"):
            ev["bw"][0].record()
            loss.backward()
            ev["bw"][1].record()
        cpu["bw"] = time.perf_counter() - t
        t = time.perf_counter()
        with rng("opt"):
            ev["opt"][0].record()
            opt.step()
            opt.zero_grad(set_to_none=True)
            ev["opt"][1].record()
        cpu["opt"] = time.perf_counter() - t
        ev["step"][1].record()
    cpu["step"] = time.perf_counter() - t_step
    torch.cuda.synchronize()
    gpu = {k: e0.elapsed_time(e1) for k, (e0, e1) in ev.items()}
    return gpu, {k: v * 1e3 for k, v in cpu.items()}, loss.detach()


def line(prefix, gpu, cpu, suffix=""):
    return (prefix + " " + " ".join(f"{k}_ms {gpu[k]:.4f}" for k in PH) + " "
            + " ".join(f"cpu_{k}_ms {cpu[k]:.4f}" for k in PH) + suffix)


def medians(rows):
    return ({k: statistics.median(r[0][k] for r in rows) for k in PH},
            {k: statistics.median(r[1][k] for r in rows) for k in PH})


mode = "kineto" if a.kineto else "nvtx" if a.nvtx else "plain"
print(f"config mode {mode} ranges {'off' if a.no_ranges else 'on'} layers {a.layers} dim {D} heads {H} seq {S} batch {B} "
      f"vocab {V} params {nparams} torch {torch.__version__} gpu {torch.cuda.get_device_name()}", flush=True)
for i in range(a.warmup):
    gpu, cpu, loss = step(i)
    print(line(f"warmup {i}", gpu, cpu), flush=True)

rows, prof_rows = [], []
if a.kineto:
    os.makedirs(a.kineto, exist_ok=True)
    tmp = tempfile.mkdtemp()
    raw = os.path.join(tmp, "train_kineto.json")
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                  schedule=torch.profiler.schedule(wait=WAIT, warmup=WARM, active=ACTIVE, repeat=1),
                                  on_trace_ready=lambda pr: pr.export_chrome_trace(raw), record_shapes=True)
    prof.start()
for j in range(steps):
    i = a.warmup + j
    gpu, cpu, loss = step(i)
    state = ("" if not a.kineto else " profiler_wait" if j < WAIT else " profiler_warmup" if j < WAIT + WARM else " profiled")
    print(line(f"step {i}", gpu, cpu, state), flush=True)
    if state == " profiled":
        prof_rows.append((gpu, cpu))
    elif not a.kineto:
        rows.append((gpu, cpu))
    if a.kineto:
        prof.step()
if a.kineto:
    prof.stop()
    with open(raw, "rb") as f, gzip.open(os.path.join(a.kineto, "train_kineto.json.gz"), "wb", compresslevel=6) as z:
        shutil.copyfileobj(f, z)
    shutil.rmtree(tmp)
    print(f"kineto trace {os.path.join(a.kineto, 'train_kineto.json.gz')} profiled steps "
          f"{a.warmup + WAIT + WARM}..{a.warmup + steps - 1}", flush=True)
for name, rs in (("median", rows), ("profiled_median", prof_rows)):
    if rs:
        gm, cm = medians(rs)
        print(line(name, gm, cm, f" steps {len(rs)}"), flush=True)
print(f"final_loss {loss.item():.4f}", flush=True)
