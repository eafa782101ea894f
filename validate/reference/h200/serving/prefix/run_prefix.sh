#!/usr/bin/env bash
# Serving ground truth with prefix caching: transformers' continuous-batching engine with block
# sharing on (validate/workloads/serving.py --block-sharing: KV blocks of equal prompt prefixes are
# shared), requests whose prompts start with one of 4 shared 512-token prefixes (--shared-prefix
# 512:4; the log carries hash_ids, one per 64-token block). One plain calibration run under Nsight
# Systems (CUDA tracing only) with its log and the same requests unprofiled; held-out runs at 4 and
# 8 requests/s, with block sharing on and, as the control, off.
# Usage (on an H200 machine, from the repository root): validate/reference/h200/serving/prefix/run_prefix.sh DIR
#   -> DIR/{cal_prefix.sqlite.gz.part-*, *.jsonl, *.out, config.json}
# Then, calibrated from that trace (bneck serve --calibrate TRACE --trace-log cal_prefix.jsonl
# --calibrate-log cal_prefix_unprof.jsonl --max-batch-tokens 512 --max-seqs 64 --block-size 64
# --num-blocks 1024 --prefix-caching --prefix-hash-block 64), forecast rate4/rate8 (sharing on)
# and rate4_off/rate8_off (without --prefix-caching).
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run_prefix.sh DIR}; mkdir -p "$D"
W=validate/workloads/serving.py; T=/tmp/serving_prefix; mkdir -p $T
L="--plain --prompt-len 32,512 --output-len 16,128 --warmup 8 --shared-prefix 512:4 --hash-block 64"
run() { name=$1; shift; timeout 200 python3 $W $L "$@" --log "$D/$name.jsonl" --warmup-log "$D/${name}_warmup.jsonl" > "$D/$name.out" 2>&1; grep -h "^policy" "$D/$name.out" || tail -5 "$D/$name.out"; }
source .nsys/env.sh
timeout 300 nsys profile -t cuda --sample=none --cpuctxsw=none -o $T/cal --force-overwrite true \
  python3 $W $L --block-sharing --warmup-repeat 2 --rate 6 --num 40 --seed 21 --log "$D/cal_prefix.jsonl" \
  --warmup-log "$D/cal_prefix_warmup.jsonl" --config-out "$D/config.json" > "$D/cal_prefix.out" 2>&1
grep -h "^policy" "$D/cal_prefix.out" || tail -5 "$D/cal_prefix.out"
timeout 200 nsys export --type sqlite -o $T/cal.sqlite $T/cal.nsys-rep > /dev/null 2>&1
python3 validate/reference/h200/serving/trim_export.py $T/cal.sqlite
gzip -1 -c $T/cal.sqlite | split -b 15M - "$D/cal_prefix.sqlite.gz.part-"
run cal_prefix_unprof --block-sharing --rate 6 --num 40 --seed 21
run rate4 --block-sharing --rate 4 --num 60 --seed 22
run rate8 --block-sharing --rate 8 --num 100 --seed 23
run rate4_off --rate 4 --num 60 --seed 22
run rate8_off --rate 8 --num 100 --seed 23
ls -la "$D"
