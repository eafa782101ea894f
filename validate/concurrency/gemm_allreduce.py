# A bf16 GEMM beside a 256 MiB NCCL all-reduce on two GPUs: each alone, then together (the
# all-reduce on its own stream), 5 rounds each in record_function ranges; one Kineto trace per rank.
# Usage: python3 gemm_allreduce.py OUTDIR       (NCCL_NVLS_ENABLE=0 and the other multicast switches off)
import os, sys, json, time
import torch, torch.distributed as dist, torch.multiprocessing as mp

def run(rank, world, outdir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    dev = torch.device("cuda", rank)
    D = 8192
    x, y, z = (torch.randn(D, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
    buf = torch.ones(128 * 1024 * 1024, device=dev, dtype=torch.bfloat16)  # 256 MiB
    comm = torch.cuda.Stream()
    def gemm():
        for _ in range(4): torch.mm(x, y, out=z)
    def ar():
        with torch.cuda.stream(comm): dist.all_reduce(buf)
    cases = {"gemm_alone": [gemm], "ar_alone": [ar], "gemm_ar": [ar, gemm]}
    for _ in range(3):
        for work in cases.values():
            for f in work: f()
        torch.cuda.synchronize(); dist.barrier()
    times = {}
    from torch.profiler import profile, ProfilerActivity, record_function
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for name, work in cases.items():
            ts = []
            for r in range(5):
                torch.cuda.synchronize(); dist.barrier()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                comm.wait_stream(torch.cuda.current_stream())
                with record_function(name):
                    for f in work: f()
                    torch.cuda.current_stream().wait_stream(comm)
                e1.record()
                torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1))
            ts.sort()
            times[name] = ts[2]
    prof.export_chrome_trace(os.path.join(outdir, f"gemm_ar_rank{rank}.json"))
    print(json.dumps({"rank": rank, "event_ms_median": times}), flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    mp.spawn(run, args=(2, out), nprocs=2)
