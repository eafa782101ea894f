#!/usr/bin/env bash
# The host cost of a torch.compile'd call, fixed and per kernel (validate/workloads/compiled_call.py):
# three processes unprofiled, the third also traced (chains of 16 and 64 blocks, eager and compiled).
# Usage (on the GPU machine, from the repository root): validate/reference/h100/compiled_call/run.sh OUTDIR
set -u
O=${1:?usage: run.sh OUTDIR}
mkdir -p "$O"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/env.txt"
python3 -c "import torch; print('torch', torch.__version__)" >> "$O/env.txt" 2>&1
date -u >> "$O/env.txt"
for r in 1 2; do
  timeout 170 python3 validate/workloads/compiled_call.py > "$O/call.$r.log" 2>&1
done
timeout 200 python3 validate/workloads/compiled_call.py --trace "$O/k" > "$O/call.3.log" 2>&1
date -u >> "$O/env.txt"
# A transformer held out for --fuse auto (GPU-bound at this size): eager fp32 and compiled, traced.
timeout 280 python3 validate/workloads/hf_models.py --workload bert_large-inf-8x512 --mode fp32,compile --compile-limit-s 200 \
  --kineto "$O/hf" --logdir "$O/hf_logs" > "$O/bert_large.out" 2>&1
date -u >> "$O/env.txt"
