#!/usr/bin/env bash
# Where the host time of loads3's held-out runs goes as the batch grows: the 64-at-once run and the
# calibration's 2/s requests again, with the engine's steps marked and logged (serving.py without
# --plain) and --diag (each step's engine-thread CPU time beside its wall time, cProfile of the
# forward at steps 5-6 and 45-46, the caching allocator's device allocations and frees over them),
# and the 64-at-once run once more unmarked (its run-to-run spread).
# Usage (on a machine of the kind loads3 was captured on, from the repository root): .../loads3/run_loads3_diag.sh DIR
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run_loads3_diag.sh DIR}; mkdir -p "$D"
W=validate/workloads/serving.py
L="--prompt-len 512,512 --output-len 64,64 --warmup 8"
run() { name=$1; shift; timeout 110 python3 $W $L "$@" --log "$D/$name.jsonl" --warmup-log "$D/${name}_warmup.jsonl" > "$D/$name.out" 2>&1; grep -h "^policy" "$D/$name.out" || tail -5 "$D/$name.out"; }
run burst64_diag --rate 0 --num 64 --seed 53 --diag --diag-steps 5,6,45,46 --steplog "$D/burst64_diag_steps.jsonl"
run rate2_diag --rate 2 --num 16 --seed 51 --diag --diag-steps 5,6,45,46 --steplog "$D/rate2_diag_steps.jsonl"
run burst64_rep --plain --rate 0 --num 64 --seed 53
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"; date -u >> "$D/env.txt"
tar -C "$D" -cf - . | xz -6 -T16 > "$D.tar.xz" && rm -rf "$D"
