#!/usr/bin/env bash
# Serving ground truth from a plain profile (no annotation): transformers' continuous-batching
# engine as shipped (validate/workloads/serving.py --plain: no NVTX ranges, no hooks), one
# calibration run under Nsight Systems (CUDA tracing only) with its request log, the same requests
# again unprofiled, and held-out runs at other loads: Poisson 4 and 8 requests/s, CUDA graphs at 6/s.
# Usage (on an H200 machine, from the repository root): validate/reference/h200/serving/plain/run_serving_plain.sh DIR
#   -> DIR/{cal_plain.sqlite.gz.part-*, *.jsonl, *.out, config.json}
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run_serving_plain.sh DIR}; mkdir -p "$D"
W=validate/workloads/serving.py; T=/tmp/serving_plain; mkdir -p $T
L="--plain --prompt-len 32,512 --output-len 16,128 --warmup 8"
run() { name=$1; shift; timeout 200 python3 $W $L "$@" --log "$D/$name.jsonl" --warmup-log "$D/${name}_warmup.jsonl" > "$D/$name.out" 2>&1; grep -h "^policy" "$D/$name.out" || tail -5 "$D/$name.out"; }
source .nsys/env.sh
timeout 300 nsys profile -t cuda --sample=none --cpuctxsw=none -o $T/cal --force-overwrite true \
  python3 $W $L --warmup-repeat 2 --rate 6 --num 40 --seed 11 --log "$D/cal_plain.jsonl" --warmup-log "$D/cal_plain_warmup.jsonl" --config-out "$D/config.json" > "$D/cal_plain.out" 2>&1
grep -h "^policy" "$D/cal_plain.out" || tail -5 "$D/cal_plain.out"
timeout 200 nsys export --type sqlite -o $T/cal.sqlite $T/cal.nsys-rep > /dev/null 2>&1
# Trimmed to what a calibration reads: runtime calls that launched work, kernels, copies.
python3 validate/reference/h200/serving/trim_export.py $T/cal.sqlite
gzip -1 -c $T/cal.sqlite | split -b 15M - "$D/cal_plain.sqlite.gz.part-"
run cal_plain_unprof --rate 6 --num 40 --seed 11
run rate4 --rate 4 --num 60 --seed 12
run rate8 --rate 8 --num 100 --seed 13
run graph6 --rate 6 --num 100 --seed 14 --cuda-graph
ls -la "$D"
