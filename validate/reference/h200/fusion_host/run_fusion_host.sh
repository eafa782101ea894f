#!/usr/bin/env bash
# Fusion on host-bound programs, one H200: eager fp32 against torch.compile (default mode: Inductor's
# fused Triton kernels, no CUDA graphs), each timed unprofiled in three processes, with a Kineto
# trace of both from each process (validate/workloads/hf_models.py: unprofiled timings first, then
# the profiled runs) for BERT-base 1x128 and GPT-2 medium 1x64; the 48-layer host loop of
# validate/workloads/loops.py (fp32, compile) in three unprofiled processes and one profiled.
# Usage: bash validate/reference/h200/fusion_host/run_fusion_host.sh OUTDIR
# OUTDIR gets: fusion_host.tar.xz (logs, Kineto traces), env.txt.
set -u
outdir=${1:?usage: run_fusion_host.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1
mkdir -p "$outdir"
deadline=$((SECONDS + ${FUSION_DEADLINE_S:-540}))
W=/tmp/fusion_work
rm -rf "$W"; mkdir -p "$W/k"
left() { local l=$((deadline - SECONDS)); [ "$l" -gt "$1" ] && echo "$1" || echo "$((l > 5 ? l : 5))"; }
run() {  # run NAME SECONDS CMD...: stdout+stderr to $W/NAME.log
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
lp="python3 $root/validate/workloads/loops.py"
for r in 1 2 3; do
  mkdir -p "$W/k$r" "$W/p$r"
  run bert_base.$r 110 $hf --workload bert_base-inf-1x128 --mode fp32,compile --kineto "$W/k$r" --logdir "$W/p$r" --steps 30
  run gpt2_medium.$r 110 $hf --workload gpt2_medium-inf-1x64 --mode fp32,compile --kineto "$W/k$r" --logdir "$W/p$r" --steps 30
  run host.plain$r 60 $lp --loop host --mode fp32,compile --steps 50
  tar cJf "$outdir/fusion_host.tar.xz" -C "$W" .
done
run host.kineto 60 $lp --loop host --mode fp32,compile --kineto "$W/k/host.json"
gzip -f "$W"/k/*.json 2>/dev/null
tar cJf "$outdir/fusion_host.tar.xz" -C "$W" .
ls -la "$outdir"
