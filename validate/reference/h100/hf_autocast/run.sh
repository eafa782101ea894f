#!/usr/bin/env bash
# Kineto traces with shapes of the Hugging Face workloads in fp32 and under bf16 autocast, with
# their unprofiled fp32 / TF32 / autocast-bf16 medians: the per-kernel side of the autocast what-if
# (which kernels a cast adds, which run in bf16, which take the casting path).
# Usage (on the GPU machine, from the repository root):
#   validate/reference/h100/hf_autocast/run.sh OUTDIR [WORKLOAD ...]
# (default: the five workloads this folder holds; HF_TIMEOUT: seconds a workload may take, 150)
set -u
D=${1:?usage: run.sh OUTDIR [WORKLOAD ...]}; shift; mkdir -p "$D/logs" "$D/k"
export PYTHONUNBUFFERED=1
py=validate/workloads/hf_models.py
[ $# -gt 0 ] || set -- gpt2_large-inf-4x1024 opt_1.3b-inf-2x2048 bert_large-inf-8x512 llama_1b-inf-4x1024 gpt2_large-train-1x1024
for w in "$@"; do
  timeout "${HF_TIMEOUT:-150}" python3 $py --workload $w --mode fp32,tf32,autocast-bf16 --kineto "$D/k" --logdir "$D/logs" > "$D/logs/$w.eager.out" 2>&1
  echo "$w rc $?"; grep -h "median_ms\|Error" "$D/logs/$w.eager.out" | head -6
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$D/env.txt"; date -u >> "$D/env.txt"
