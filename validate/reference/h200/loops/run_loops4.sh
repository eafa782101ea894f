#!/usr/bin/env bash
# The fourth capture on one GPU: more loops for structure recognition (validate/workloads/loops.py:
# torch.compile'd encoder inference, a DDP step on one rank, generate() with lengths cycling, ResNet-50 inference),
# each under Nsight Systems with NVTX step ranges (the ground truth a test strips).
# Needs Nsight Systems' environment folder .nsys/ in the repository root.
# Usage: bash validate/reference/h200/loops/run_loops4.sh OUTDIR   (OUTDIR gets structure3.tar.xz)
set -u
outdir=${1:?usage: run_loops4.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1
S=/tmp/st3; rm -rf "$S"; mkdir -p "$S" "$outdir"
source "$root/.nsys/env.sh"
lp="python3 $root/validate/workloads/loops.py"
prof() {  # prof NAME CMD...
  local name=$1; shift
  timeout 200 nsys profile -o "$S/$name" --force-overwrite true -t cuda,nvtx --cuda-graph-trace=node \
    --sample=none --cpuctxsw=none "$@" > "$S/$name.log" 2>&1 &&
    timeout 60 nsys export --type sqlite --force-overwrite true -o "$S/$name.sqlite" "$S/$name.nsys-rep" > /dev/null 2>&1
  rm -f "$S/$name.nsys-rep"; echo "== $name $(stat -c %s "$S/$name.sqlite" 2>&1) at ${SECONDS}s"
}
prof compiled $lp --loop compiled --mode plain --nvtx --steps 15 --warmup 3
prof ddp $lp --loop ddp --mode plain --nvtx --steps 12 --warmup 3
prof genvar $lp --loop genvar --mode plain --nvtx --steps 12 --warmup 4
prof vision_inf $lp --loop vision_inf --mode plain --nvtx --steps 15 --warmup 3
(cd "$S" && tar cJf "$outdir/structure3.tar.xz" *.sqlite *.log)
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$outdir/env4.txt" 2>&1
ls -la "$outdir"
