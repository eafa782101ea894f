#!/usr/bin/env bash
# The host's speed between processes and beside other processes (validate/workloads/host_spread.py),
# and a host-bound DDP step on one GPU (parallel.py --mode dp at 96 tokens), on one GPU.
# Usage: bash validate/reference/h200/host/run_host.sh OUTDIR   (OUTDIR gets host.tar.xz and host.log)
set -u
outdir=${1:?usage: run_host.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
S=/tmp/host; rm -rf "$S"; mkdir -p "$S/k" "$outdir"
hs="python3 $root/validate/workloads/host_spread.py"
{
  date -u; nproc; cat /sys/fs/cgroup/cpu.max 2>&1; grep -m1 'model name' /proc/cpuinfo; cat /proc/loadavg
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} > "$S/env.txt" 2>&1
# 1. one process after another (the spread between processes), each with a Kineto trace of fp32
for i in 1 2 3 4 5; do
  timeout 90 $hs --workload bert_large --modes fp32,autocast,tf32 --tag seq$i --kineto "$S/k/bert_large.p$i.json" 2>&1 | grep spread
done
for i in 1 2 3 4; do
  timeout 60 $hs --workload bert_base --modes fp32,autocast --steps 30 --tag seq$i --kineto "$S/k/bert_base.p$i.json" 2>&1 | grep spread
  timeout 60 $hs --workload host48 --modes fp32,autocast --steps 50 --tag seq$i --kineto "$S/k/host48.p$i.json" 2>&1 | grep spread
done
echo "== sequential done at ${SECONDS}s"
# 2. K processes side by side (each times 4 s after all K have warmed up), and one beside CPU spinners
for K in 2 4 8; do
  rm -rf "$S/b$K"
  for j in $(seq $K); do timeout 90 $hs --workload host48 --modes fp32 --tag conc$K --barrier "$S/b$K" --n $K --seconds 4 2>&1 | grep spread & done
  wait
done
for P in 4 12; do
  pids=""; for j in $(seq $P); do python3 -c 'while True: pass' & pids="$pids $!"; done
  timeout 60 $hs --workload host48 --modes fp32 --steps 300 --tag spin$P 2>&1 | grep spread
  kill $pids 2>/dev/null; wait 2>/dev/null
done
timeout 60 $hs --workload host48 --modes fp32 --steps 300 --tag alone 2>&1 | grep spread
echo "== concurrency done at ${SECONDS}s"
# 3. the host-bound DDP step on one GPU (DDP world 1), unprofiled and traced
for T in 96 1024; do
  timeout 120 torchrun --nproc_per_node 1 "$root/validate/workloads/parallel.py" --mode dp --tokens $T --kineto "$S/k/dp$T" 2>&1 | grep -v Warning | grep rank
  mv "$S/k/dp$T/rank0.json" "$S/k/dp$T.rank0.json" 2>/dev/null; rmdir "$S/k/dp$T" 2>/dev/null
done
echo "== ddp done at ${SECONDS}s"
(cd "$S" && gzip -9 k/*.json && tar cJf "$outdir/host.tar.xz" env.txt k)
ls -la "$outdir"
