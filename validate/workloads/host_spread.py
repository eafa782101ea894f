# The host's speed from one process to the next and beside other processes: what a host-bound
# forecast can know of the run it forecasts (the host model's spread, the slowest of N ranks).
# Workloads (--workload):
#   host48      48 x (Linear(256) + LayerNorm + GELU + residual add) at batch 1 (loops.py's host loop)
#   bert_base   Hugging Face BertModel (hidden 768, 12 layers), 1 x 128 tokens, default attention
#   bert_large  BertModel (hidden 1024, 24 layers, 16 heads, ffn 4096), 8 x 512, eager attention
#   gpt2_medium GPT2LMHeadModel (n_embd 1024, 24 layers, 16 heads), 4 x 512, inference
#   gpt2_train  GPT2LMHeadModel (12 layers, n_embd 768), 1 x 16, forward + LM loss + backward +
#               AdamW step + zero_grad (training: --modes fp32 only)
#   ddp_fp32    DDP on one rank (NCCL, world 1) of 12 x (Linear(4096) + GELU), fp32, batch 64, SGD
#               (ddp.py's step; training)
# Modes (--modes, comma separated, run in order in one process): fp32 (TF32 off), tf32, autocast
# (bf16 autocast, TF32 off). Weights fp32, random, no download; inference under no_grad.
# Each step: torch.cuda.synchronize(); wall clock and a CUDA event; step(); the host's issue time
# (wall clock when step() returns: the host's own work, unless a launch blocked); an event;
# synchronize. Prints per mode one line:
#   spread tag T workload W mode M pid P issue_ms ... gpu_ms ... wall_ms ... median_issue_ms X
#   median_gpu_ms Y median_wall_ms Z
# --barrier DIR --n K: after warming up, wait until K processes reached DIR, then time for
#   --seconds S (steps as many as fit) so that the K processes run side by side.
# --kineto FILE: afterwards, 3 steps of the first mode under torch.profiler (CPU + CUDA,
#   record_shapes), each in record_function("step{i}"), chrome trace to FILE; --schedule: 6 steps
#   under schedule(wait=1, warmup=2, active=3) instead (the trace holds the last 3).
import argparse, os, statistics, time

import torch

p = argparse.ArgumentParser()
p.add_argument("--workload", required=True, choices=["host48", "bert_base", "bert_large", "gpt2_medium", "gpt2_train", "ddp_fp32"])
p.add_argument("--modes", default="fp32")
p.add_argument("--steps", type=int, default=15)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--tag", default="")
p.add_argument("--barrier", default="")
p.add_argument("--n", type=int, default=1)
p.add_argument("--seconds", type=float, default=0.0)
p.add_argument("--kineto", default="")
p.add_argument("--schedule", action="store_true")
a = p.parse_args()
dev = torch.device("cuda")
torch.manual_seed(0)


def build():
    if a.workload == "host48":
        L, d = 48, 256
        lins = [torch.nn.Linear(d, d).to(dev) for _ in range(L)]
        lns = [torch.nn.LayerNorm(d).to(dev) for _ in range(L)]
        x0 = torch.randn(1, d, device=dev)

        def fwd():
            x = x0
            for ln, lin in zip(lns, lins):
                x = x + torch.nn.functional.gelu(lin(ln(x)))
            return x
        return fwd
    if a.workload == "ddp_fp32":
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1)
        layers = []
        for _ in range(12):
            layers += [torch.nn.Linear(4096, 4096), torch.nn.GELU()]
        m = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers).to(dev), device_ids=[0])
        opt = torch.optim.SGD(m.parameters(), lr=1e-4)
        x = torch.randn(64, 4096, device=dev)

        def train():
            m(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return train
    if a.workload in ("gpt2_medium", "gpt2_train"):
        from transformers import GPT2Config, GPT2LMHeadModel
        if a.workload == "gpt2_medium":
            cfg, B, S = GPT2Config(n_embd=1024, n_layer=24, n_head=16), 4, 512
        else:
            cfg, B, S = GPT2Config(n_layer=12, n_embd=768, n_head=12), 1, 16
        cfg._attn_implementation = "eager"
        m = GPT2LMHeadModel(cfg).to(dev)
        ids = torch.randint(0, cfg.vocab_size, (B, S), device=dev)
        if a.workload == "gpt2_medium":
            m.eval()
            return lambda: m(input_ids=ids, use_cache=False)
        m.train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

        def train():
            m(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return train
    from transformers import BertConfig, BertModel
    if a.workload == "bert_base":
        cfg, B, S, attn = BertConfig(), 1, 128, None
    else:
        cfg, B, S, attn = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096), 8, 512, "eager"
    if attn:
        cfg._attn_implementation = attn
    m = BertModel(cfg).to(dev).eval()
    ids = torch.randint(0, cfg.vocab_size, (B, S), device=dev)
    return lambda: m(input_ids=ids)


fwd = build()


def make_step(mode):
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.allow_tf32 = mode == "tf32"

    if a.workload in ("gpt2_train", "ddp_fp32"):
        return fwd

    def step():
        with torch.no_grad():
            if mode == "autocast":
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    fwd()
            else:
                fwd()
    return step


def timed(step, rf=None):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    w0 = time.perf_counter()
    if rf:
        with torch.profiler.record_function(rf):
            s.record(); step(); issue = time.perf_counter() - w0; e.record()
    else:
        s.record(); step(); issue = time.perf_counter() - w0; e.record()
    torch.cuda.synchronize()
    return issue * 1e3, s.elapsed_time(e), (time.perf_counter() - w0) * 1e3


def wait_barrier():
    os.makedirs(a.barrier, exist_ok=True)
    open(os.path.join(a.barrier, f"{os.getpid()}.ready"), "w").close()
    t = time.perf_counter()
    while len([f for f in os.listdir(a.barrier) if f.endswith(".ready")]) < a.n and time.perf_counter() - t < 120:
        time.sleep(0.01)


fmt = lambda xs: " ".join(f"{x:.3f}" for x in xs)
modes = a.modes.split(",")
for mi, mode in enumerate(modes):
    step = make_step(mode)
    for _ in range(a.warmup):
        timed(step)
    if a.barrier and mi == 0:
        wait_barrier()
    rows = []
    t0 = time.perf_counter()
    while (len(rows) < a.steps) if a.seconds <= 0 else (time.perf_counter() - t0 < a.seconds):
        rows.append(timed(step))
    iss, gpu, wall = zip(*rows)
    print(f"spread tag {a.tag} workload {a.workload} mode {mode} pid {os.getpid()} steps {len(rows)} issue_ms {fmt(iss)} gpu_ms {fmt(gpu)} "
          f"wall_ms {fmt(wall)} median_issue_ms {statistics.median(iss):.3f} median_gpu_ms {statistics.median(gpu):.3f} "
          f"median_wall_ms {statistics.median(wall):.3f}", flush=True)

if a.kineto:
    step = make_step(modes[0])
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    sched = torch.profiler.schedule(wait=1, warmup=2, active=3) if a.schedule else None
    ready = (lambda pr: pr.export_chrome_trace(a.kineto)) if a.schedule else None
    with torch.profiler.profile(activities=acts, record_shapes=True, schedule=sched, on_trace_ready=ready) as prof:
        rows = []
        for i in range(6 if a.schedule else 3):
            rows.append(timed(step, rf=f"step{i}"))
            if a.schedule:
                prof.step()
    if a.schedule:
        rows = rows[3:]
    if not a.schedule:
        prof.export_chrome_trace(a.kineto)
    iss, gpu, wall = zip(*rows)
    print(f"spread tag {a.tag} workload {a.workload} mode {modes[0]} pid {os.getpid()} profiled issue_ms {fmt(iss)} gpu_ms {fmt(gpu)} "
          f"wall_ms {fmt(wall)}", flush=True)
