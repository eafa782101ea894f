#!/usr/bin/env bash
# Run-to-run spread of the plain-serving ground truth: the unprofiled calibration requests and the
# held-out loads of run_serving_plain.sh again, same seeds, in one process each, one after another.
# Usage (on an H200 machine, from the repository root): run_repeats.sh DIR [REPEATS]
#   -> DIR/<name>.r<k>.{jsonl,out}
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run_repeats.sh DIR [REPEATS]}; N=${2:-2}; mkdir -p "$D"
W=validate/workloads/serving.py
L="--plain --prompt-len 32,512 --output-len 16,128 --warmup 8"
run() { name=$1; shift; timeout 200 python3 $W $L "$@" --log "$D/$name.jsonl" > "$D/$name.out" 2>&1; grep -h "^policy" "$D/$name.out" || tail -5 "$D/$name.out"; }
for k in $(seq 1 "$N"); do
  run cal_plain_unprof.r$k --rate 6 --num 40 --seed 11
  run rate4.r$k --rate 4 --num 60 --seed 12
  run rate8.r$k --rate 8 --num 100 --seed 13
done
run graph6.r1 --rate 6 --num 100 --seed 14 --cuda-graph
