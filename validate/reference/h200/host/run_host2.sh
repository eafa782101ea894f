#!/usr/bin/env bash
# Held-out check of the profiler's host cost (--unprofile): six programs, three processes each, every
# process timing its modes unprofiled and then tracing its first mode under a profiler schedule
# (wait 1, warmup 2, active 3; record_shapes); and two host-bound processes side by side against
# one alone, three times each (validate/workloads/host_spread.py), on one GPU.
# Usage: bash validate/reference/h200/host/run_host2.sh OUTDIR   (OUTDIR gets host2.tar.xz)
set -u
outdir=${1:?usage: run_host2.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
S=/tmp/host2; rm -rf "$S"; mkdir -p "$S/k" "$outdir"
hs="python3 $root/validate/workloads/host_spread.py"
{ date -u; nproc; grep -m1 'model name' /proc/cpuinfo; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'; } > "$S/env.txt" 2>&1
for i in 1 2 3; do
  for w in "gpt2_medium fp32,tf32,autocast" "bert_base fp32,tf32,autocast" "host48 fp32,tf32,autocast" "gpt2_train fp32" "ddp_fp32 fp32" "bert_large fp32,tf32,autocast"; do
    set -- $w
    timeout 100 $hs --workload $1 --modes $2 --steps 20 --tag p$i --kineto "$S/k/$1.p$i.json" --schedule 2>&1 | grep spread
  done
  echo "== round $i done at ${SECONDS}s"
done
for r in 1 2 3; do
  timeout 60 $hs --workload host48 --modes fp32 --tag one$r --barrier "$S/o$r" --n 1 --seconds 3 2>&1 | grep -o "tag.*steps [0-9]*\|median_issue_ms [0-9.]*"
  for j in 1 2; do timeout 60 $hs --workload host48 --modes fp32 --tag two$r --barrier "$S/t$r" --n 2 --seconds 3 > "$S/two$r.$j.log" 2>&1 & done
  wait; grep -ho "tag.*steps [0-9]*\|median_issue_ms [0-9.]*" "$S"/two$r.*.log
done
echo "== side by side done at ${SECONDS}s"
(cd "$S" && gzip -9 k/*.json && tar cJf "$outdir/host2.tar.xz" env.txt k)
ls -la "$outdir"
