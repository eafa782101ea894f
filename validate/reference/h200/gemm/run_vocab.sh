#!/usr/bin/env bash
# GPT-2 medium 4x512 inference (validate/workloads/hf_models.py) with its vocabulary of 50257 and
# padded to 50304, fp32 / TF32 / bf16 autocast, unprofiled, in three processes of each, alternating:
# the measured side of `whatif --align-gemms`. Usage: bash validate/reference/h200/gemm/run_vocab.sh OUTDIR
set -u
outdir=${1:?usage: run_vocab.sh OUTDIR}
mkdir -p "$outdir"
hf="python3 $(dirname "$0")/../../../workloads/hf_models.py --workload gpt2_medium-inf-4x512 --mode fp32,tf32,autocast-bf16 --steps 20"
for r in 1 2 3; do
  for v in 50257 50304; do
    $hf --vocab $v 2>&1 | grep -E "median_ms|config" | sed "s/^/process $r vocab $v /" | tee -a "$outdir/vocab.txt"
  done
done
