#!/usr/bin/env bash
# The fixed part of a compiled call against the tensors it takes: chains of BatchNorm1d modules (5
# tensors each, one fused kernel) and of Linear+ReLU modules, three processes each, unprofiled; then
# BERT-large 8x512 eager fp32 and compiled, traced (a held-out --fuse auto case).
# Usage (on the GPU machine, from the repository root): validate/reference/h100/compiled_call/run2.sh OUTDIR
set -u
O=${1:?usage: run2.sh OUTDIR}
mkdir -p "$O/hf_logs" "$O/hf"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/env.txt"
date -u >> "$O/env.txt"
for r in 1 2 3; do
  timeout 100 python3 validate/workloads/compiled_call.py --modules bn --ns 1,16,64,256 --calls 200 --blocks 4 > "$O/bn.$r.log" 2>&1
  timeout 100 python3 validate/workloads/compiled_call.py --modules linear --ns 1,16,64 --calls 200 --blocks 4 > "$O/linear.$r.log" 2>&1
done
date -u >> "$O/env.txt"
timeout 280 python3 validate/workloads/hf_models.py --workload bert_large-inf-8x512 --mode fp32,compile --compile-limit-s 200 \
  --kineto "$O/hf" --logdir "$O/hf_logs" > "$O/bert_large.out" 2>&1
date -u >> "$O/env.txt"
