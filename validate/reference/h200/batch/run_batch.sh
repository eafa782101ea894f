#!/usr/bin/env bash
# Batch-size what-if pairs: Hugging Face models (hf_models.py, random weights, fp32, TF32 off) at
# several batches of one sequence length, each batch in its own process, two processes each:
# unprofiled timing, then (for the batches forecasts start from) a Kineto trace with shapes.
# Usage: bash validate/reference/h200/batch/run_batch.sh OUTDIR
# OUTDIR gets: batch.tar.xz (p<r>/*.log: the timings; k<r>/*.kineto.json.gz: the traces), env.txt.
set -u
outdir=${1:?usage: run_batch.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1
mkdir -p "$outdir"
deadline=$((SECONDS + ${BATCH_DEADLINE_S:-560}))
W=/tmp/batch_work
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
} > "$outdir/env.txt" 2>&1
cat "$outdir/env.txt"
hf="python3 $root/validate/workloads/hf_models.py"
for r in 1 2; do
  mkdir -p "$W/k$r" "$W/p$r"
  for b in 1 4 16 64; do
    k=(); [ "$b" -le 4 ] && k=(--kineto "$W/k$r")
    run bert_base.b$b.$r 90 $hf --workload bert_base-inf-1x128 --batch "$b" --mode fp32 "${k[@]}" --logdir "$W/p$r" --steps 20
  done
  for b in 1 4 16; do
    k=(); [ "$b" -le 4 ] && k=(--kineto "$W/k$r")
    run gpt2_medium.b$b.$r 90 $hf --workload gpt2_medium-inf-4x512 --batch "$b" --mode fp32 "${k[@]}" --logdir "$W/p$r" --steps 20
  done
  for b in 1 4 8; do
    k=(); [ "$b" -le 4 ] && k=(--kineto "$W/k$r")
    run llama_1b.b$b.$r 120 $hf --workload llama_1b-inf-4x1024 --batch "$b" --mode fp32 "${k[@]}" --logdir "$W/p$r" --steps 10
  done
  tar cJf "$outdir/batch.tar.xz" -C "$W" .
done
ls -la "$outdir"
