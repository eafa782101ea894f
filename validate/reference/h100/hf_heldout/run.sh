#!/usr/bin/env bash
# Held-out Hugging Face families never used while the precision what-ifs were written or tuned:
# Phi-3-mini's shape (fused qkv and gate/up projections) and Gemma-2B's (multi-query attention,
# head 256, GeGLU, a 256,000-word vocabulary): fp32 Kineto traces with shapes (the forecasts'
# input), the autocast runs' traces (the measured side), unprofiled fp32 / TF32 / autocast medians.
# Usage (on the GPU machine, from the repository root): validate/reference/h100/hf_heldout/run.sh OUTDIR
set -u
D=${1:?usage: run.sh OUTDIR}; mkdir -p "$D/logs" "$D/k"
export PYTHONUNBUFFERED=1
py=validate/workloads/hf_models.py
for w in phi3_mini-inf-2x1024 gemma_2b-inf-4x1024; do
  timeout 200 python3 $py --workload $w --mode fp32,tf32,autocast-bf16 --kineto "$D/k" --logdir "$D/logs" > "$D/logs/$w.eager.out" 2>&1
  echo "$w rc $?"; grep -h "median_ms\|Error\|error" "$D/logs/$w.eager.out" | head -8
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$D/env.txt"; date -u >> "$D/env.txt"
