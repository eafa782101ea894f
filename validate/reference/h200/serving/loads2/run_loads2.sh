#!/usr/bin/env bash
# Held-out serving loads for the plan build of steps with prompt tokens (docs/serving.md), captured
# after that mechanism was fixed: transformers' continuous-batching engine as shipped
# (validate/workloads/serving.py --plain), prompts of 512 and outputs of 64 tokens. A calibration
# run of 24 requests at 3 requests/s under Nsight Systems (CUDA only; the warm-up served twice, so
# the trace has repeated steps), the same requests unprofiled, then held-out runs: 5/s and 12/s
# (32 requests), 32 and 96 at once, 48 at once with CUDA graphs; and, for diagnosis, 64 at once with
# CUDA graphs, and 64 at once and Poisson 8/s without, their steps logged.
# Usage (on an H200 machine, from the repository root): validate/reference/h200/serving/loads2/run_loads2.sh DIR [PART]
#   -> DIR.tar.xz: cal.sqlite.xz, *.jsonl, *.out, config.json, env.txt
#   PART 1: the calibration (profiled and not) and 5/s; PART 2: the other runs; none: both.
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run_loads2.sh DIR [PART]}; P=${2:-all}; mkdir -p "$D"
W=validate/workloads/serving.py; T=/tmp/serving_loads2; mkdir -p $T
L="--plain --prompt-len 512,512 --output-len 64,64 --warmup 8"
run() { name=$1; shift; timeout 150 python3 $W $L "$@" --log "$D/$name.jsonl" --warmup-log "$D/${name}_warmup.jsonl" > "$D/$name.out" 2>&1; grep -h "^policy" "$D/$name.out" || tail -5 "$D/$name.out"; }
if [ "$P" != 2 ]; then
source .nsys/env.sh
timeout 200 nsys profile -t cuda --sample=none --cpuctxsw=none -o $T/cal --force-overwrite true \
  python3 $W $L --warmup-repeat 2 --rate 3 --num 24 --seed 31 --log "$D/cal.jsonl" --warmup-log "$D/cal_warmup.jsonl" --config-out "$D/config.json" > "$D/cal.out" 2>&1
grep -h "^policy" "$D/cal.out" || tail -5 "$D/cal.out"
timeout 150 nsys export --type sqlite -o $T/cal.sqlite $T/cal.nsys-rep > /dev/null 2>&1
python3 -c "import sqlite3; c = sqlite3.connect('$T/cal.sqlite'); print('export:', c.execute('SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0], 'kernels')"
python3 validate/reference/h200/serving/trim_export.py $T/cal.sqlite
xz -T16 -6 -c $T/cal.sqlite > "$D/cal.sqlite.xz"
run cal_unprof --rate 3 --num 24 --seed 31
run rate5 --rate 5 --num 32 --seed 32
fi
if [ "$P" != 1 ]; then
run burst32 --rate 0 --num 32 --seed 33
run burst96 --rate 0 --num 96 --seed 34
run rate12 --rate 12 --num 32 --seed 35
run burst48_graph --rate 0 --num 48 --seed 36 --cuda-graph
# The 64-at-once run with CUDA graphs again with its steps marked and logged (serving.py without
# --plain: each step's prepare/forward/update times and padded shape; not held out: where the
# forecast of CUDA graphs at 64 at once (+16 % TPOT in ../loads) puts its error, prompt steps or
# decode steps).
timeout 150 python3 $W --prompt-len 512,512 --output-len 64,64 --warmup 8 --rate 0 --num 64 --seed 37 --cuda-graph \
  --log "$D/burst64_graph_marked.jsonl" --warmup-log "$D/burst64_graph_marked_warmup.jsonl" --steplog "$D/burst64_graph_marked_steps.jsonl" \
  > "$D/burst64_graph_marked.out" 2>&1
grep -h "^policy" "$D/burst64_graph_marked.out" || tail -5 "$D/burst64_graph_marked.out"
# And 64 at once without CUDA graphs (../loads: its steps with a prompt took 104-116 ms, its decode
# steps 61-69 ms except the drain's first 13 at 102-111 ms).
timeout 150 python3 $W --prompt-len 512,512 --output-len 64,64 --warmup 8 --rate 0 --num 64 --seed 39 \
  --log "$D/burst64_marked.jsonl" --warmup-log "$D/burst64_marked_warmup.jsonl" --steplog "$D/burst64_marked_steps.jsonl" \
  > "$D/burst64_marked.out" 2>&1
grep -h "^policy" "$D/burst64_marked.out" || tail -5 "$D/burst64_marked.out"
# The same for Poisson 8/s without CUDA graphs (where TTFT is forecast +21..+37 % in ../plain's repeats).
timeout 150 python3 $W --prompt-len 512,512 --output-len 64,64 --warmup 8 --rate 8 --num 32 --seed 38 \
  --log "$D/rate8_marked.jsonl" --warmup-log "$D/rate8_marked_warmup.jsonl" --steplog "$D/rate8_marked_steps.jsonl" \
  > "$D/rate8_marked.out" 2>&1
grep -h "^policy" "$D/rate8_marked.out" || tail -5 "$D/rate8_marked.out"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$D/env.txt"; date -u >> "$D/env.txt"
ls -la "$D"
tar -C "$D" -cJf "$D.tar.xz" . && rm -rf "$D"
