#!/usr/bin/env bash
# Static-batching ground truth from a plain profile: transformers' model.generate (sdpa, dynamic KV
# cache) serving batches of requests (validate/workloads/serving.py --policy static: batches in
# arrival order, left-padded to the longest prompt, each batch generating its longest output).
# One calibration run under Nsight Systems (CUDA tracing only; 64 requests, batches of 32) with its
# request log, the same requests unprofiled, and held-out runs: 100 other requests in batches of
# 32 (twice), 64 in batches of 16, 128 in batches of 64.
# Usage (on an H200 machine, from the repository root): validate/reference/h200/serving/static/run_static.sh DIR
#   -> DIR/{cal_static.sqlite.gz.part-*, *.jsonl, *.out, config.json}
# Kept here: the logs, and cal_trace.tar.xz (the trimmed export as cal.sqlite, xz -9). Run on
# 2026-12-02 under a 260 s limit, it stopped inside static32; static16 and static64 then ran alone,
# with the same serving.py arguments, one after the other.
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run_static.sh DIR}; mkdir -p "$D"
W=validate/workloads/serving.py; T=/tmp/serving_static; mkdir -p $T
L="--plain --policy static --rate 0 --prompt-len 32,512 --output-len 16,128"
run() { name=$1; shift; timeout 200 python3 $W $L "$@" --log "$D/$name.jsonl" > "$D/$name.out" 2>&1; grep -h "^policy" "$D/$name.out" || tail -5 "$D/$name.out"; }
source .nsys/env.sh
timeout 300 nsys profile -t cuda --sample=none --cpuctxsw=none -o $T/cal --force-overwrite true \
  python3 $W $L --num 64 --seed 31 --static-batch 32 --log "$D/cal_static.jsonl" --config-out "$D/config.json" > "$D/cal_static.out" 2>&1
grep -h "^policy" "$D/cal_static.out" || tail -5 "$D/cal_static.out"
timeout 200 nsys export --type sqlite -o $T/cal.sqlite $T/cal.nsys-rep > /dev/null 2>&1
python3 validate/reference/h200/serving/trim_export.py $T/cal.sqlite
gzip -1 -c $T/cal.sqlite | split -b 15M - "$D/cal_static.sqlite.gz.part-"
run cal_static_unprof --num 64 --seed 31 --static-batch 32
run static32 --num 100 --seed 32 --static-batch 32
run static32b --num 100 --seed 32 --static-batch 32
run static16 --num 64 --seed 33 --static-batch 16
run static64 --num 128 --seed 34 --static-batch 64
ls -la "$D"
