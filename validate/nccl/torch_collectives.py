# The same collective microbenchmarks as bneck_nccl_bench, through PyTorch's own NCCL (the one the
# traces users bring were made with): torch.distributed all_reduce, all_gather_into_tensor,
# reduce_scatter_tensor, broadcast, and point-to-point send/recv in one direction (rank 2i -> 2i+1).
# Timing as the bench: each iteration of `iters` calls starts behind a 2 ms sleep kernel on the
# current stream (the host has queued every call before the first runs), CUDA events; the slowest
# rank's iteration, the median of `reps`, / iters. float32, 8 B .. --max-bytes in x4 steps.
# Output (rank 0): bneck's measurements format, family "collective" (as the bench's, with
# "library": "torch" in the device record).
# Usage: torchrun --nproc_per_node N torch_collectives.py [--max-bytes B] > torch_collectives.json
import argparse, json, os, statistics, sys, torch, torch.distributed as dist

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
p = argparse.ArgumentParser()
p.add_argument("--max-bytes", type=int, default=1 << 30)
p.add_argument("--reps", type=int, default=11)
p.add_argument("--iters", type=int, default=20)
a = p.parse_args()
dist.init_process_group("nccl")
rank, n = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n, "broadcast": 1, "send_recv": 1}
cycles = 4_000_000  # torch.cuda._sleep: about 2 ms at the H200's ~2 GHz
out = []
for kind in ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "send_recv"]:
    size = 8
    while size <= a.max_bytes:
        cnt = max(1, size // 4)
        x = torch.ones(cnt, device="cuda")
        big = torch.empty(cnt * n, device="cuda")

        def call():
            if kind == "all_reduce":
                dist.all_reduce(x)
            elif kind == "all_gather":
                dist.all_gather_into_tensor(big, x)
            elif kind == "reduce_scatter":
                dist.reduce_scatter_tensor(x[: max(1, cnt // n)], x[: max(1, cnt // n) * n])
            elif kind == "broadcast":
                dist.broadcast(x, 0)
            elif rank % 2 == 0 and rank + 1 < n:
                dist.send(x, rank + 1)
            elif rank % 2 == 1:
                dist.recv(x, rank - 1)

        for _ in range(5):
            call()
        torch.cuda.synchronize()
        times = []
        for _ in range(a.reps):
            dist.barrier()
            torch.cuda.synchronize()
            torch.cuda._sleep(cycles)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(a.iters):
                call()
            e1.record()
            torch.cuda.synchronize()
            t = torch.tensor([e0.elapsed_time(e1) * 1e6 / a.iters], device="cuda")
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            times.append(t.item())
        ns = statistics.median(times)
        algbw = size / (ns * 1e-9) / 1e9
        out.append({"family": "collective", "name": kind, "kind": kind, "ranks": n, "size": size, "bytes": size, "flops": 0,
                    "time_ns": round(ns, 1), "algbw_gbps": round(algbw, 3), "busbw_gbps": round(algbw * factor[kind], 3),
                    "repeats": a.reps})
        size *= 4
if rank == 0:
    prop = torch.cuda.get_device_properties(0)
    json.dump({"format": "bneck-measurements", "version": 1,
               "device": {"name": prop.name, "cc": f"{prop.major}.{prop.minor}", "sm_count": prop.multi_processor_count, "gpus": n,
                          "nccl": (lambda v: v[0] * 10000 + v[1] * 100 + v[2])(torch.cuda.nccl.version()),
                          "library": "torch " + torch.__version__},
               "measurements": out}, sys.stdout, indent=1)
    print()
dist.destroy_process_group()
