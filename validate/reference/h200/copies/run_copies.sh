#!/usr/bin/env bash
# Batched transfers on one GPU (validate/workloads/loops.py): the feats loop (64 features copied one
# by one, or packed into one host tensor and copied once; pageable and pinned) and the metrics loop
# (32 .item() reads, or one .tolist() of the stacked metrics). Each program's modes timed unprofiled
# in three processes (the modes of one process share its host's pace), then the unbatched modes traced
# under the PyTorch profiler (record_shapes) and under Nsight Systems (CUDA + NVTX), and a bf16 GEMM
# sweep over M (waves) traced under the PyTorch profiler.
# Needs Nsight Systems' environment folder .nsys/ in the repository root.
# Usage: bash validate/reference/h200/copies/run_copies.sh OUTDIR   (OUTDIR gets copies.tar.xz and timings.txt)
set -u
outdir=${1:?usage: run_copies.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1
S=/tmp/copies; rm -rf "$S"; mkdir -p "$S" "$outdir"
lp="python3 $root/validate/workloads/loops.py"
for r in 1 2 3; do
  $lp --loop feats --mode split,packed,split_pinned,packed_pinned --steps 40 --warmup 5 2>&1 | sed "s/^/process $r /" | tee -a "$outdir/timings.txt"
  $lp --loop metrics --mode items,stacked --steps 40 --warmup 5 2>&1 | sed "s/^/process $r /" | tee -a "$outdir/timings.txt"
done
$lp --loop feats --mode split,split_pinned --steps 10 --warmup 5 --kineto "$S/feats.json" 2>&1 | sed "s/^/traced /" | tee -a "$outdir/timings.txt"
$lp --loop metrics --mode items --steps 10 --warmup 5 --kineto "$S/metrics.json" 2>&1 | sed "s/^/traced /" | tee -a "$outdir/timings.txt"
source "$root/.nsys/env.sh"
prof() {  # prof NAME CMD...
  local name=$1; shift
  timeout 120 nsys profile -o "$S/$name" --force-overwrite true -t cuda,nvtx --sample=none --cpuctxsw=none "$@" > "$S/$name.log" 2>&1 &&
    timeout 60 nsys export --type sqlite --force-overwrite true -o "$S/$name.sqlite" "$S/$name.nsys-rep" > /dev/null 2>&1
  rm -f "$S/$name.nsys-rep"; echo "== $name $(stat -c %s "$S/$name.sqlite" 2>&1) at ${SECONDS}s"
}
prof feats_split $lp --loop feats --mode split --nvtx --steps 10 --warmup 5
prof metrics_items $lp --loop metrics --mode items --nvtx --steps 10 --warmup 5
grep -h "^loop" "$S"/*.log | sed "s/^/nsys /" >> "$outdir/timings.txt"
python3 - "$S/waves.json" <<'PY' 2>&1 | tee -a "$outdir/timings.txt"
# bf16 GEMM M x 4096 x 4096 for M = 128 .. 33792 in steps of 128 (tiles of 128 rows: 1 .. 264 row
# tiles); CUDA-event medians of 20 runs each, then one run of each under the profiler.
import statistics, sys, torch
dev = torch.device("cuda")
b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
Ms = list(range(128, 33792 + 1, 128))
a = {m: torch.randn(m, 4096, device=dev, dtype=torch.bfloat16) for m in Ms}
for m in Ms:
    for _ in range(3): a[m] @ b
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a[m] @ b; e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    print(f"gemm M {m} N 4096 K 4096 median_ms {statistics.median(ts):.5f}")
from torch.profiler import ProfilerActivity, profile
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
    for m in Ms:
        a[m] @ b
    torch.cuda.synchronize()
prof.export_chrome_trace(sys.argv[1])
PY
(cd "$S" && tar cJf "$outdir/copies.tar.xz" *.json *.sqlite *.log)
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__)"; } > "$outdir/env.txt" 2>&1
ls -la "$outdir"
