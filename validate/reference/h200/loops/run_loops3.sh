#!/usr/bin/env bash
# The third capture on one GPU: more loops for structure recognition (validate/workloads/loops.py:
# BERT-base inference, a DiT-like denoising loop with no sync between its steps, GPT-2 generate()),
# each under Nsight Systems with NVTX step ranges (the ground truth a test strips).
# Needs Nsight Systems' environment folder .nsys/ in the repository root.
# Usage: bash validate/reference/h200/loops/run_loops3.sh OUTDIR   (OUTDIR gets structure2.tar.xz)
set -u
outdir=${1:?usage: run_loops3.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1
S=/tmp/st2; rm -rf "$S"; mkdir -p "$S" "$outdir"
source "$root/.nsys/env.sh"
lp="python3 $root/validate/workloads/loops.py"
prof() {  # prof NAME CMD...
  local name=$1; shift
  timeout 100 nsys profile -o "$S/$name" --force-overwrite true -t cuda,nvtx --cuda-graph-trace=node \
    --sample=none --cpuctxsw=none "$@" > "$S/$name.log" 2>&1 &&
    timeout 60 nsys export --type sqlite --force-overwrite true -o "$S/$name.sqlite" "$S/$name.nsys-rep" > /dev/null 2>&1
  rm -f "$S/$name.nsys-rep"; echo "== $name $(stat -c %s "$S/$name.sqlite" 2>&1) at ${SECONDS}s"
}
prof bert $lp --loop bert --mode plain --nvtx --steps 12 --warmup 3
prof dit $lp --loop dit --mode plain --nvtx --steps 2 --warmup 1
prof generate $lp --loop generate --mode plain --nvtx --steps 8 --warmup 2
(cd "$S" && tar cJf "$outdir/structure2.tar.xz" *.sqlite *.log)
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$outdir/env3.txt" 2>&1
ls -la "$outdir"
