#!/usr/bin/env bash
# Held-out Hugging Face pair of a model family not used while the precision and fusion what-ifs were
# written nor tuned on: Qwen2-1.5B's shape (validate/workloads/hf_models.py qwen2_1.5b-inf-4x1024),
# an fp32 eager Kineto trace with shapes and unprofiled fp32 / tf32 / autocast-bf16 / compile timings.
# Usage (on the GPU machine, from the repository root): validate/reference/h200/hf_models/run_qwen2.sh OUTDIR
set -u
D=${1:?usage: run_qwen2.sh OUTDIR}; mkdir -p "$D/logs" "$D/k"
export PYTHONUNBUFFERED=1
py=validate/workloads/hf_models.py
w=qwen2_1.5b-inf-4x1024
timeout 200 python3 $py --workload $w --mode fp32,tf32,autocast-bf16 --kineto "$D/k" --logdir "$D/logs" > "$D/logs/$w.eager.out" 2>&1
grep -h "median_ms" "$D/logs/$w.eager.out" | head -8
timeout 170 python3 $py --workload $w --mode compile --compile-limit-s 140 --logdir "$D/logs" > "$D/logs/$w.compile.out" 2>&1
grep -h "median_ms\|compile_s\|abort" "$D/logs/$w.compile.out" | head -4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$D/env.txt"; date -u >> "$D/env.txt"
