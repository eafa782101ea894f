#!/usr/bin/env bash
# The second capture on one GPU: (1) BERT-base 1x128 (SDPA attention) timed unprofiled in fp32, as a
# CUDA graph, in TF32 and under autocast, with a Kineto and an Nsight Systems trace of fp32; (2)
# NeuSight's whole-model workloads (GPT-3 XL and OPT-1.3B, inference 2x2048 and training 1x2048,
# fp32, TF32 off), one Kineto trace each; (3) loops for structure recognition
# (validate/workloads/loops.py: training with AdamW, 2-way gradient accumulation, lengths cycling,
# ResNet-18 training, a DataLoader pipeline, GPT-2 decoding with a KV cache, a CUDA graph with an
# eager tail), each under Nsight Systems with NVTX step ranges (the ground truth a test strips).
# Every command runs under `timeout`, capped by one deadline (LOOPS_DEADLINE_S, default 540 s).
# Needs Nsight Systems' environment folder .nsys/ in the repository root.
# Usage: bash validate/reference/h200/loops/run_loops2.sh OUTDIR
# OUTDIR gets: bert_base.tar.xz, neusight.tar.xz, structure.tar.xz (logs and traces), env.txt.
set -u
outdir=${1:?usage: run_loops2.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p "$outdir"
deadline=$((SECONDS + ${LOOPS_DEADLINE_S:-540}))
B=/tmp/bb N=/tmp/ns S=/tmp/st
rm -rf "$B" "$N" "$S"; mkdir -p "$B/k" "$N/k" "$S"
left() { local l=$((deadline - SECONDS)); [ "$l" -gt "$1" ] && echo "$1" || echo "$((l > 5 ? l : 5))"; }
run() {  # run LOG SECONDS CMD...
  local log=$1 t; t=$(left "$2"); shift 2
  [ $((deadline - SECONDS)) -gt 10 ] || { echo "skipped $log (deadline)"; return; }
  timeout "$t" "$@" > "$log" 2>&1; echo "$(basename "$log") rc $? at ${SECONDS}s"
}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
} > "$outdir/env.txt" 2>&1
source "$root/.nsys/env.sh"
nsys --version >> "$outdir/env.txt" 2>&1
cat "$outdir/env.txt"
hf="python3 $root/validate/workloads/hf_models.py"
lp="python3 $root/validate/workloads/loops.py"
prof() {  # prof DIR NAME CMD...: nsys (CUDA + NVTX) then the sqlite export
  local d=$1 name=$2; shift 2
  [ $((deadline - SECONDS)) -gt 30 ] || { echo "skipped $name (deadline)"; return; }
  timeout "$(left 90)" nsys profile -o "$d/$name" --force-overwrite true -t cuda,nvtx --cuda-graph-trace=node \
    --sample=none --cpuctxsw=none "$@" > "$d/$name.log" 2>&1 &&
    timeout "$(left 60)" nsys export --type sqlite --force-overwrite true -o "$d/$name.sqlite" "$d/$name.nsys-rep" > /dev/null 2>&1
  rm -f "$d/$name.nsys-rep"
  echo "== $name $(stat -c %s "$d/$name.sqlite" 2>&1) at ${SECONDS}s"
}

# (1) BERT-base.
run "$B/bert_base.log" 80 $hf --workload bert_base-inf-1x128 --mode fp32,graph,tf32,autocast-bf16 --kineto "$B/k" --logdir "$B" --steps 30
rm -f "$B"/k/*graph*.kineto.json.gz
prof "$B" bert_base.fp32.nsys $hf --workload bert_base-inf-1x128 --mode fp32 --nvtx --steps 20
tar cJf "$outdir/bert_base.tar.xz" -C "$B" .

# (2) NeuSight's workloads, Kineto traces of fp32 only (the H200 timings are NeuSight's released ones).
for w in gpt3_xl-inf-2x2048 opt_13-inf-2x2048 gpt3_xl-train-1x2048 opt_13-train-1x2048; do
  run "$N/$w.log" 70 $hf --workload $w --mode fp32 --kineto "$N/k" --kineto-only --warmup 2 --logdir "$N"
done
tar cJf "$outdir/neusight.tar.xz" -C "$N" .

# (3) Loops for structure recognition.
prof "$S" train_plain $lp --loop train --mode plain --nvtx --steps 12 --warmup 3
prof "$S" train_accum2 $lp --loop train --mode accum2 --nvtx --steps 8 --warmup 3
prof "$S" cycle $lp --loop cycle --mode plain --nvtx --steps 12 --warmup 3
prof "$S" vision $lp --loop vision --mode fp32 --nvtx --steps 10 --warmup 3
prof "$S" dataload $lp --loop dataload --mode plain --nvtx --steps 20 --warmup 3
prof "$S" decode $lp --loop decode --mode eager --nvtx --steps 82 --warmup 41
prof "$S" mixed $lp --loop mixed --mode plain --nvtx --steps 20 --warmup 3
prof "$S" stage_prefetch $lp --loop stage --mode prefetch --nvtx --steps 20 --warmup 3
prof "$S" copy_pageable $lp --loop copy --mode pageable --nvtx --steps 12 --warmup 3
(cd "$S" && tar cJf "$outdir/structure.tar.xz" *.sqlite *.log)
ls -la "$outdir"
