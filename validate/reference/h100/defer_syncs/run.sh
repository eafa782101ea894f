#!/usr/bin/env bash
# The measured side of `whatif --defer-syncs` (validate/workloads/sync_defer.py): a training loop
# reading its loss every step against once at the end, two processes, each timing both modes
# unprofiled and tracing both (Kineto, the run in a `run` range).
# Usage, from the repository root: validate/reference/h100/defer_syncs/run.sh DIR
set -u
D=${1:?usage: run.sh DIR}; mkdir -p "$D"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__)"; date -u; } > "$D/env.txt"
for i in 1 2; do
  timeout 150 python3 validate/workloads/sync_defer.py --mode every,end --kineto "$D/sync.p$i.json" > "$D/p$i.out" 2>&1
  grep median "$D/p$i.out" || tail -5 "$D/p$i.out"
done
gzip -9 "$D"/*.json
date -u >> "$D/env.txt"
