#!/usr/bin/env bash
# Held-out fusion captures (run after run_fusion_host.sh fixed the wrapper's cost): Llama-style 1B
# and OPT-1.3B at batch 1 x 64 tokens, eager fp32 against torch.compile, three processes each,
# each timing both modes unprofiled and then tracing both (Kineto) like run_fusion_host.sh.
# Usage: bash validate/reference/h200/fusion_host/run_fusion_host2.sh OUTDIR
# OUTDIR gets: fusion_host2.tar.xz (logs, Kineto traces), env2.txt.
set -u
outdir=${1:?usage: run_fusion_host2.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1
mkdir -p "$outdir"
deadline=$((SECONDS + ${FUSION_DEADLINE_S:-540}))
W=/tmp/fusion_work2
rm -rf "$W"; mkdir -p "$W"
left() { local l=$((deadline - SECONDS)); [ "$l" -gt "$1" ] && echo "$1" || echo "$((l > 5 ? l : 5))"; }
run() {
  local name=$1 t; t=$(left "$2"); shift 2
  [ $((deadline - SECONDS)) -gt 10 ] || { echo "skipped $name (deadline)"; return; }
  timeout "$t" "$@" > "$W/$name.log" 2>&1; echo "$name rc $? at ${SECONDS}s"
}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  nproc; uname -r
} > "$outdir/env2.txt" 2>&1
cat "$outdir/env2.txt"
hf="python3 $root/validate/workloads/hf_models.py"
for r in 1 2 3; do
  mkdir -p "$W/k$r" "$W/p$r"
  run llama_1b.$r 120 $hf --workload llama_1b-inf-1x64 --mode fp32,compile --kineto "$W/k$r" --logdir "$W/p$r" --steps 30
  run opt_1.3b.$r 120 $hf --workload opt_1.3b-inf-1x64 --mode fp32,compile --kineto "$W/k$r" --logdir "$W/p$r" --steps 30
  tar cJf "$outdir/fusion_host2.tar.xz" -C "$W" .
done
ls -la "$outdir"
