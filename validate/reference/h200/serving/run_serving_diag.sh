#!/usr/bin/env bash
# Why does the continuous-batching engine's forward run at 13 ms a step in an offline batch's first
# steps and 50-60 ms in every other step? Per-step engine-thread CPU time, an interpreter
# speed probe, and the CPU seconds of every thread of the process (validate/workloads/serving.py --diag),
# for an offline batch, a Poisson rate, and the offline batch with one intra-op thread.
# Usage: validate/reference/h200/serving/run_serving_diag.sh OUTDIR -> OUTDIR/*.out, *_steps.jsonl
set -u
OUTDIR=${1:?usage: validate/reference/h200/serving/run_serving_diag.sh OUTDIR}  # where the results go (created)
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
W=validate/workloads/serving.py
L="--prompt-len 32,512 --output-len 16,128 --warmup 8 --diag"
run() { name=$1; shift; timeout 150 "$@" > $OUTDIR/$name.out 2>&1; grep -h "^policy\|^diag" $OUTDIR/$name.out || tail -5 $OUTDIR/$name.out; }
run off python3 $W $L --rate 0 --num 100 --seed 4 --log $OUTDIR/off.jsonl --steplog $OUTDIR/off_steps.jsonl
