#!/usr/bin/env bash
# The PyTorch profiler's host cost with Python stacks (with_stack=True, record_shapes): host-bound
# Hugging Face workloads in fp32, each process timing its steps unprofiled and then tracing them
# (validate/workloads/hf_models.py --with-stack), two processes of each.
# Usage (on the GPU machine, from the repository root): validate/reference/h100/profiler_stack/run.sh OUTDIR
set -u
O=${1:?usage: run.sh OUTDIR}
mkdir -p "$O"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/env.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$O/env.txt"
date -u >> "$O/env.txt"
for r in 1 2; do
  for w in bert_base-inf-1x128 gpt2_medium-inf-1x64 resnet50-inf-16x224; do
    mkdir -p "$O/logs$r"
    timeout 150 python3 validate/workloads/hf_models.py --workload $w --mode fp32 --with-stack --kineto "$O/k$r" --logdir "$O/logs$r" > "$O/logs$r/$w.out" 2>&1
    echo "$w $r rc $?"
  done
done
date -u >> "$O/env.txt"
