#!/usr/bin/env bash
# The host-bound DDP pair the host model's forecasts are held to, on one machine with two H200s:
# validate/workloads/parallel.py --mode dp (DDP, bf16 10 x Linear(6144), SGD) at 96 and 256 tokens a
# GPU, where the host issues the step slower than the GPU runs it. Each size: on one GPU three
# processes one after another, and on two GPUs three runs; every process times 12 steps unprofiled
# (CUDA events: the ground truth) and then traces 6 under the PyTorch profiler (Kineto, one trace a
# rank). What it is for: `whatif --data-parallel 2` from each one-GPU trace against the two-GPU
# runs' median steps (the slowest host of two ranks, docs/whatif.md), and the ranks' host paces
# side by side against one process alone (the traces' per-layer autograd time).
# Usage (repository root, two GPUs): validate/reference/h200/ddp_host/run_ddp_host.sh DIR
#   -> DIR.tar.xz: *.log (every timing line), k/*.json.gz (traces), env.txt. About 6 minutes.
set -u
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 PYTHONUNBUFFERED=1
D=${1:?usage: run_ddp_host.sh DIR}; mkdir -p "$D/k"
W=validate/workloads/parallel.py
run() {  # name, GPUs, tokens
  local name=$1 n=$2 tokens=$3
  timeout 100 torchrun --standalone --nproc_per_node "$n" "$W" --mode dp --tokens "$tokens" --kineto "$D/k/$name" > "$D/$name.log" 2>&1
  gzip -f "$D/k/$name"/*.json 2>/dev/null
  grep -h "median_step_ms" "$D/$name.log" | tr '\n' ' '; echo
}
for tokens in 96 256; do
  for p in 1 2 3; do run "dp${tokens}_1gpu_p$p" 1 "$tokens"; done
  for p in 1 2 3; do run "dp${tokens}_2gpu_p$p" 2 "$tokens"; done
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"
python3 -c "import torch; print('torch', torch.__version__)" >> "$D/env.txt"; nproc >> "$D/env.txt"; date -u >> "$D/env.txt"
tar cJf "$D.tar.xz" -C "$(dirname "$D")" "$(basename "$D")"
