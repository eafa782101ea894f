# A data-parallel training step for multi-GPU ground truth.
# 12 Linear(4096, 4096) + GELU layers: 201 M fp32 parameters, 805 MB of gradients, so DDP's bucketed
# all-reduces (25 MB buckets) overlap the backward pass. Per-GPU batch 64 (weak scaling: the work per
# GPU stays the same at any GPU count). Each step is an NVTX range "stepN" (for nsys) and a
# record_function "stepN" (a Kineto user_annotation); CUDA events time each step on every rank.
# Usage: torchrun --nproc_per_node N ddp.py [--steps S] [--kineto DIR]
#   --kineto DIR: profile the timed steps with the PyTorch profiler, one trace per rank:
#                 DIR/rank{R}.json (plain Chrome-trace JSON).
# Prints per rank: "rank R step I ms T" and "rank R median_step_ms T".
import argparse, os, statistics, torch, torch.distributed as dist

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast stays off (NCCL_NVLS_ENABLE=0)
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
p.add_argument("--kineto", default="")
p.add_argument("--layers", type=int, default=12)
a = p.parse_args()
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
local = int(os.environ.get("LOCAL_RANK", rank))
torch.cuda.set_device(local)
torch.backends.cuda.matmul.allow_tf32 = False
torch.manual_seed(0)
D, B = 4096, 64
layers = []
for _ in range(a.layers):
    layers += [torch.nn.Linear(D, D), torch.nn.GELU()]
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers).cuda(), device_ids=[local])
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
x = torch.randn(B, D, device="cuda")

def step():
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)

for _ in range(3):  # warm-up: NCCL communicators, cuBLAS handles, DDP buckets
    step()
torch.cuda.synchronize()
dist.barrier()
times = []
prof = None
if a.kineto:
    os.makedirs(a.kineto, exist_ok=True)
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                  record_shapes=True)
    prof.__enter__()
for i in range(a.steps):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.nvtx.range_push(f"step{i}")
    with torch.profiler.record_function(f"step{i}"):
        e0.record()
        step()
        e1.record()
        torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    times.append(e0.elapsed_time(e1))
    print(f"rank {rank} step {i} ms {times[-1]:.4f}", flush=True)
if prof is not None:
    prof.__exit__(None, None, None)
    prof.export_chrome_trace(os.path.join(a.kineto, f"rank{rank}.json"))
print(f"rank {rank} world {world} median_step_ms {statistics.median(times):.4f}", flush=True)
dist.destroy_process_group()
