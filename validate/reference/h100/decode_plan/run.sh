#!/usr/bin/env bash
# The decode-like loop of the H200 exports in the forms `advise` chains (validate/workloads/decode_plan.py),
# two processes on one GPU machine.
# Usage, from the repository root: validate/reference/h100/decode_plan/run.sh DIR
set -u
D=${1:?usage: run.sh DIR}; mkdir -p "$D"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__)"; date -u; } > "$D/env.txt"
for i in 1 2; do
  timeout 250 python3 validate/workloads/decode_plan.py --out "$D" --tag p$i > "$D/p$i.out" 2>&1
  grep median "$D/p$i.out" || tail -5 "$D/p$i.out"
done
date -u >> "$D/env.txt"
