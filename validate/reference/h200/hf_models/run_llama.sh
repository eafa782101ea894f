#!/usr/bin/env bash
# Held-out Hugging Face pairs of a model family not used while the precision and fusion what-ifs
# were written: Llama-style 1B (validate/workloads/hf_models.py llama_1b-*), fp32 eager Kineto
# traces with shapes, unprofiled fp32 / tf32 / autocast-bf16 / compile timings.
# Usage (on the GPU machine, from the repository root): validate/reference/h200/hf_models/run_llama.sh OUTDIR
set -u
D=${1:?usage: run_llama.sh OUTDIR}; mkdir -p "$D/logs" "$D/k"
export PYTHONUNBUFFERED=1
py=validate/workloads/hf_models.py
for w in llama_1b-inf-4x1024 llama_1b-train-1x1024; do
  timeout 200 python3 $py --workload $w --mode fp32,tf32,autocast-bf16 --kineto "$D/k" --logdir "$D/logs" > "$D/logs/$w.eager.out" 2>&1
  grep -h "median_ms" "$D/logs/$w.eager.out" | head -8
  timeout 170 python3 $py --workload $w --mode compile --compile-limit-s 140 --logdir "$D/logs" > "$D/logs/$w.compile.out" 2>&1
  grep -h "median_ms\|compile_s\|abort" "$D/logs/$w.compile.out" | head -4
done
