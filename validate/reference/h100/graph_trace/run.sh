#!/usr/bin/env bash
# The decode-like loop of the shared H200 exports on an H100 (validate/workloads/graph_decode.py):
# Nsight Systems traces of its CUDA graph captured as the shared exports were (`nsys profile -t
# cuda,nvtx --cuda-graph-trace=node`), one with --cuda-graph-trace=graph (the graph launch one
# record, its nodes untraced), the same steps unprofiled, and a PyTorch profiler trace of the
# torch.compile'd steps. Needs Nsight Systems: source the shared tools' env.sh (copied to .nsys/).
# Usage, from the repository root: validate/reference/h100/graph_trace/run.sh DIR
set -u
D=${1:?usage: run.sh DIR}; mkdir -p "$D"
source .nsys/env.sh
W=/tmp/graph_trace; mkdir -p $W
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__)"; nsys --version; date -u; } > "$D/env.txt" 2>&1
P=validate/workloads/graph_decode.py
prof() {  # NAME ARGS...: an nsys trace, exported and kept as NAME.sqlite.xz
  local name=$1 level=node; shift
  case $name in graphlevel*) level=graph ;; esac
  timeout 100 nsys profile -o $W/$name --force-overwrite true -t cuda,nvtx --cuda-graph-trace=$level python3 $P "$@" > "$D/$name.log" 2>&1
  timeout 60 nsys export --type sqlite --force-overwrite true -o $W/$name.sqlite $W/$name.nsys-rep > /dev/null 2>&1
  xz -6 -c $W/$name.sqlite > "$D/$name.sqlite.xz"; echo "== $name $(stat -c %s $W/$name.sqlite 2>&1)"
}
plain() {  # NAME ARGS...: unprofiled, 50 steps
  local name=$1; shift
  timeout 90 python3 $P "$@" --steps 50 > "$D/unprof_$name.log" 2>&1; echo "== unprof $name $(grep -c ' tok ' "$D/unprof_$name.log")"
}
kin() {  # NAME ARGS...: a PyTorch profiler trace, 20 steps
  local name=$1; shift
  timeout 120 python3 $P "$@" --kineto $W/$name.kineto.json > "$D/$name.kineto.log" 2>&1
  gzip -9 -c $W/$name.kineto.json > "$D/$name.kineto.json.gz"; echo "== kineto $name"
}
prof graph_p1 graph
plain graph graph
prof graphlevel_p1 graph
prof graph_l24_w1024 graph --layers 24 --width 1024
plain graph_l24_w1024 graph --layers 24 --width 1024
plain graph_l6_w4096 graph --layers 6 --width 4096
plain eager eager
kin compile compile
plain compile compile
date -u >> "$D/env.txt"
