# Data-, tensor- and pipeline-parallel workloads for the parallelism what-ifs' ground truth.
# Each runs on 1 GPU (the trace bneck forecasts from) and on N GPUs (what it forecasts), with the
# same per-GPU program except for the parallelism itself:
#   dp : DDP training step, bf16, 10 x Linear(6144, 6144) (755 MB of gradients), 1024 tokens per GPU
#        (weak scaling: every rank does the 1-GPU work), SGD. NVTX/record_function "stepN".
#   tp : Megatron-style tensor parallelism, inference prefill (forward only), bf16, 4 transformer
#        layers (d 4096, 32 heads, MLP 16384), 2 x 1024 tokens: QKV and fc1 column-parallel, the
#        attention heads split, out-proj and fc2 row-parallel followed by an all-reduce of their
#        output (none at 1 GPU). Ranges "stepN" > "layerL" > "column_parallel" / "attention" /
#        "row_parallel" / "allreduce".
#   pp : pipeline parallelism, training, bf16, 8 x Linear(8192, 8192) + GELU, 4 microbatches of
#        1024 tokens, SGD after the last. 1 GPU: "stepN" > "microbatchM" > "forward" / "backward",
#        then "optimizer". N GPUs: the layers cut into N equal stages, activations and their
#        gradients sent between stages (NCCL send/recv), schedule gpipe (all forwards, then all
#        backwards) or 1f1b (--schedule).
# Timing: --steps unprofiled steps timed by CUDA events on every rank (the median is the ground
# truth), then --prof-steps under the PyTorch profiler (one Kineto trace per rank in --kineto DIR).
# Prints "rank R world W mode M median_step_ms T" (unprofiled) and "... profiled_median_step_ms T".
# Usage: torchrun --nproc_per_node N parallel.py --mode dp|tp|pp [--schedule gpipe|1f1b] [--kineto DIR]
import argparse, os, statistics, torch, torch.distributed as dist
import torch.nn.functional as F

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (NCCL_NVLS_ENABLE=0)
p = argparse.ArgumentParser()
p.add_argument("--mode", required=True, choices=["dp", "tp", "pp"])
p.add_argument("--schedule", default="gpipe", choices=["gpipe", "1f1b"])
p.add_argument("--steps", type=int, default=12)
p.add_argument("--prof-steps", type=int, default=6)
p.add_argument("--kineto", default="")
# Sizes (defaults: the reference workloads above); other values make held-out cases.
p.add_argument("--dim", type=int, default=0)
p.add_argument("--tokens", type=int, default=0)
p.add_argument("--layers", type=int, default=0)
p.add_argument("--microbatches", type=int, default=0)
a = p.parse_args()
def size(v, d):
    return v if v > 0 else d
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
local = int(os.environ.get("LOCAL_RANK", rank))
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
torch.manual_seed(0)
bf16 = torch.bfloat16
nvtx = torch.cuda.nvtx


class Range:  # an NVTX range (nsys) and a record_function (Kineto) of the same name
    def __init__(self, name):
        self.name, self.rf = name, torch.profiler.record_function(name)

    def __enter__(self):
        nvtx.range_push(self.name)
        self.rf.__enter__()

    def __exit__(self, *exc):
        self.rf.__exit__(*exc)
        nvtx.range_pop()


if a.mode == "dp":
    D, T, L = size(a.dim, 6144), size(a.tokens, 1024), size(a.layers, 10)
    model = torch.nn.Sequential(*[torch.nn.Linear(D, D, bias=False) for _ in range(L)]).to(dev, bf16)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(T, D, device=dev, dtype=bf16)

    def step(i):
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

elif a.mode == "tp":
    D, H, B, S, L = size(a.dim, 4096), size(a.dim, 4096) // 128, max(1, size(a.tokens, 2048) // 1024), 1024, size(a.layers, 4)
    hd, tp = D // H, world
    assert H % tp == 0
    hl = H // tp  # heads on this rank

    def w(o, i):
        return torch.randn(o, i, device=dev, dtype=bf16) * 0.02

    layers = [dict(ln1=torch.nn.LayerNorm(D).to(dev, bf16), qkv=w(3 * D // tp, D), out=w(D, D // tp),
                   ln2=torch.nn.LayerNorm(D).to(dev, bf16), fc1=w(4 * D // tp, D), fc2=w(D, 4 * D // tp)) for _ in range(L)]
    x0 = torch.randn(B * S, D, device=dev, dtype=bf16)

    def allreduce(t):
        if tp > 1:
            with Range("allreduce"):
                dist.all_reduce(t)

    @torch.no_grad()
    def step(i):
        x = x0
        for li, ly in enumerate(layers):
            with Range(f"layer{li}"):
                h = ly["ln1"](x)
                with Range("column_parallel"):
                    qkv = F.linear(h, ly["qkv"])
                with Range("attention"):
                    q, k, v = qkv.view(B, S, 3, hl, hd).permute(2, 0, 3, 1, 4)
                    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    o = o.transpose(1, 2).reshape(B * S, hl * hd)
                with Range("row_parallel"):
                    o = F.linear(o, ly["out"])
                allreduce(o)
                x = x + o
                h = ly["ln2"](x)
                with Range("column_parallel"):
                    h = F.gelu(F.linear(h, ly["fc1"]))
                with Range("row_parallel"):
                    o = F.linear(h, ly["fc2"])
                allreduce(o)
                x = x + o
        return x

else:  # pp
    D, T, L, M = size(a.dim, 8192), size(a.tokens, 1024), size(a.layers, 8), size(a.microbatches, 4)
    S = world
    assert L % S == 0
    per = L // S
    torch.manual_seed(0)
    full = [torch.nn.Linear(D, D, bias=False) for _ in range(L)]
    stage = torch.nn.Sequential(*sum(([full[j], torch.nn.GELU()] for j in range(rank * per, (rank + 1) * per)), [])).to(dev, bf16)
    opt = torch.optim.SGD(stage.parameters(), lr=1e-4)
    mbs = [torch.randn(T, D, device=dev, dtype=bf16) for _ in range(M)]
    first, last = rank == 0, rank == S - 1

    def p2p(ops):  # one NCCL group of sends/receives to/from neighbouring stages
        if ops:
            for r in dist.batch_isend_irecv([dist.P2POp(dist.isend if kind == "send" else dist.irecv, t, peer) for kind, t, peer in ops]):
                r.wait()

    def fwd(m, acts, inp=None, send=True):
        with Range(f"microbatch{m}"), Range("forward"):
            if first:
                inp = mbs[m]
            elif inp is None:
                inp = torch.empty(T, D, device=dev, dtype=bf16)
                dist.recv(inp, rank - 1)
            if not first:
                inp.requires_grad_(True)
            out = stage(inp)
            if last:
                out = out.float().pow(2).mean()
            elif send:
                dist.send(out.detach(), rank + 1)
            acts[m] = (inp, out)

    def bwd(m, acts, grad=None, send=True):
        with Range(f"microbatch{m}"), Range("backward"):
            inp, out = acts.pop(m)
            if last:
                out.backward()
            else:
                if grad is None:
                    grad = torch.empty(T, D, device=dev, dtype=bf16)
                    dist.recv(grad, rank + 1)
                out.backward(grad)
            if not first and send:
                dist.send(inp.grad, rank - 1)
            return inp.grad

    def step(i):
        acts = {}
        if S == 1:
            for m in range(M):  # gradient accumulation: each microbatch forward then backward
                fwd(m, acts)
                bwd(m, acts)
        elif a.schedule == "gpipe":
            for m in range(M):
                fwd(m, acts)
            for m in range(M):
                bwd(m, acts)
        else:  # 1f1b, 2 stages: stage 0 runs one warm-up forward, then sends each next forward's
            # output while it receives the previous one's gradient (one NCCL group, as Megatron's
            # send_forward_recv_backward); stage 1 alternates F, B and sends each gradient while
            # it receives the next activation. Every transfer goes through batch_isend_irecv.
            assert S == 2, "the 1f1b workload is written for 2 stages"
            new = lambda: torch.empty(T, D, device=dev, dtype=bf16)
            if first:
                fwd(0, acts, send=False)
                p2p([("send", acts[0][1].detach(), 1)])
                for m in range(M - 1):
                    fwd(m + 1, acts, send=False)
                    g = new()
                    p2p([("send", acts[m + 1][1].detach(), 1), ("recv", g, 1)])
                    bwd(m, acts, g)
                g = new()
                p2p([("recv", g, 1)])
                bwd(M - 1, acts, g)
            else:
                x = new()
                p2p([("recv", x, 0)])
                for m in range(M):
                    fwd(m, acts, inp=x)
                    gi = bwd(m, acts, send=False)
                    x = new() if m + 1 < M else None
                    p2p([("send", gi, 0)] + ([("recv", x, 0)] if x is not None else []))
        with Range("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)


def timed(i):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    dist.barrier()
    torch.cuda.synchronize()
    with Range(f"step{i}"):
        e0.record()
        step(i)
        e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1)


for i in range(3):  # warm-up: communicators, cuBLAS handles, DDP buckets
    timed(i)
times = [timed(i) for i in range(a.steps)]
tag = f"rank {rank} world {world} mode {a.mode}" + (f" schedule {a.schedule}" if a.mode == "pp" else "")
print(f"{tag} steps_ms {' '.join(f'{t:.4f}' for t in times)}", flush=True)
print(f"{tag} median_step_ms {statistics.median(times):.4f}", flush=True)
if a.kineto:
    os.makedirs(a.kineto, exist_ok=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                record_shapes=True) as prof:
        ptimes = [timed(i) for i in range(a.prof_steps)]
    prof.export_chrome_trace(os.path.join(a.kineto, f"rank{rank}.json"))
    print(f"{tag} profiled_steps_ms {' '.join(f'{t:.4f}' for t in ptimes)}", flush=True)
    print(f"{tag} profiled_median_step_ms {statistics.median(ptimes):.4f}", flush=True)
dist.destroy_process_group()
