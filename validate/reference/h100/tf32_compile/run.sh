#!/usr/bin/env bash
# TF32 and torch.compile together on Hugging Face models (one H100 or H200 machine): per model, one
# process in fp32 (timed unprofiled, then traced by the PyTorch profiler with shapes), another in
# TF32 and in TF32 compiled (`--mode tf32,compile-tf32`: each timed unprofiled, then traced).
# Usage, from the repository root: validate/reference/h100/tf32_compile/run.sh DIR WORKLOAD...
#   -> DIR/k (traces), DIR/logs (timings), DIR/env.txt
# PAIR (default tf32,compile-tf32) and TAG (default tf32c, the log's name) set the second process's
# modes: ../autocast_compile/run.sh runs autocast-bf16,compile-autocast.
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run.sh DIR WORKLOAD...}; shift
mkdir -p "$D/k" "$D/logs"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  date -u; } > "$D/env.txt"
H=validate/workloads/hf_models.py
for w in "$@"; do
  timeout 120 python3 $H --workload "$w" --mode fp32 --kineto "$D/k" --logdir "$D/logs" > "$D/logs/$w.fp32.out" 2>&1
  timeout 240 python3 $H --workload "$w" --mode "${PAIR:-tf32,compile-tf32}" --compile-limit-s 180 --kineto "$D/k" --logdir "$D/logs" \
    > "$D/logs/$w.${TAG:-tf32c}.out" 2>&1
  echo "== $w"; grep -h "median_ms\|compile_s" "$D/logs/$w".*.out
done
date -u >> "$D/env.txt"
