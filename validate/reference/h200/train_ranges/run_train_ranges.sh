#!/usr/bin/env bash
# Ground truth for ranges around loss.backward() (kernels launched by PyTorch's autograd thread):
# validate/workloads/train_ranges.py on one GPU, four ways:
#   plain.log                    unprofiled steps timed by CUDA events (the ground truth)
#   kineto.log, train_kineto.json.gz   the PyTorch profiler (CPU + CUDA, wait 2 warmup 2 active 4)
#   nsys_nvtx.log, nsys_nvtx.sqlite.gz         Nsight Systems, NVTX ranges step{i} > fw / bw / opt
#   nsys_noranges.log, nsys_noranges.sqlite.gz Nsight Systems, CUDA only, no range at all
#   env.txt                      date, GPU, driver, torch, nsys versions
# Needs Nsight Systems' environment script folder in .nsys/ (a copy of the nsys tools folder).
# Usage: validate/reference/h200/train_ranges/run_train_ranges.sh OUTDIR
set -u
OUTDIR=${1:?usage: validate/reference/h200/train_ranges/run_train_ranges.sh OUTDIR}  # where the results go (created)
mkdir -p "$OUTDIR"
out=$OUTDIR
here=$(cd "$(dirname "$0")/../../../.." && pwd)
wl="$here/validate/workloads/train_ranges.py"
export PYTHONUNBUFFERED=1
mkdir -p "$out"
W=$(mktemp -d /tmp/train_ranges.XXXX)
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())'
  uname -r
} > "$out/env.txt" 2>&1

timeout 150 python3 "$wl" --plain --steps 20 > "$out/plain.log" 2>&1
echo "plain rc $?"; grep -E "^(config|median|final_loss)" "$out/plain.log" || tail -5 "$out/plain.log"

timeout 150 python3 "$wl" --kineto "$out" > "$out/kineto.log" 2>&1
echo "kineto rc $?"; grep -E "^(kineto|profiled_median|final_loss)" "$out/kineto.log" || tail -5 "$out/kineto.log"

source "$here/.nsys/env.sh"
nsys --version >> "$out/env.txt" 2>&1
cap() {  # name, nsys trace list, workload arguments...
  local name=$1 trace=$2; shift 2
  timeout 200 nsys profile -o "$W/$name" --force-overwrite true -t "$trace" --cuda-graph-trace=node \
    --sample=none --cpuctxsw=none python3 "$wl" "$@" > "$out/$name.log" 2>&1
  echo "$name profile rc $?"
  timeout 150 nsys export --type sqlite --force-overwrite true -o "$W/$name.sqlite" "$W/$name.nsys-rep" >> "$out/$name.log" 2>&1
  echo "$name export rc $? sqlite bytes $(stat -c %s "$W/$name.sqlite" 2>&1)"
  gzip -6 -c "$W/$name.sqlite" > "$out/$name.sqlite.gz"
  grep -E "^median" "$out/$name.log"
}
cap nsys_nvtx cuda,nvtx --nvtx
cap nsys_noranges cuda --plain --no-ranges --steps 8
rm -rf "$W"
ls -la "$out"
