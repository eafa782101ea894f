#!/usr/bin/env bash
# The PyTorch profiler's host cost by what it records (validate/workloads/profiler_cost.py: eager
# loops of one op kind each), then host-bound Hugging Face workloads traced (Kineto with shapes) and
# untraced on the same machine (validate/reference/h100/hf_autocast/run.sh).
# Usage (on the GPU machine, from the repository root):
#   validate/reference/h100/profiler_cost/run.sh OUTDIR [HF_WORKLOAD ...]
# OUTDIR gets: costs.jsonl (one line a loop), loops/ (each loop's last traced block), k/ and logs/
# (the workloads' traces and logs), env.txt. PC_REPS=2 runs the loops twice.
set -u
D=${1:?usage: run.sh OUTDIR [HF_WORKLOAD ...]}; shift; mkdir -p "$D/loops"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$D/env.txt"
date -u >> "$D/env.txt"
for rep in $(seq 1 "${PC_REPS:-1}"); do
  for p in relu add add_scalar view transpose cat8 sum_dim empty conv linear; do
    timeout 60 python3 validate/workloads/profiler_cost.py --program $p --trace "$D/loops/$p.$rep.json.gz" >> "$D/costs.jsonl" 2> "$D/loops/$p.$rep.err"
    echo "$p $rep rc $?"
  done
done
for w in "$@"; do
  HF_TIMEOUT=${HF_TIMEOUT:-120} validate/reference/h100/hf_autocast/run.sh "$D" "$w"
done
date -u >> "$D/env.txt"
