#!/usr/bin/env bash
# FP8 what-if pairs on one H200 (validate/workloads/fp8_linear.py): bf16 baseline and fp8 modes,
# unprofiled medians and Kineto traces (record_shapes), inference and training, two sizes.
# Usage (from the repository root): validate/reference/h200/fp8/run_fp8.sh DIR
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run_fp8.sh DIR}; mkdir -p "$D/k"
W=validate/workloads/fp8_linear.py
python3 $W --mode bf16,fp8-tensor,fp8-row --layers 8 --dim 4096 --tokens 8192 --kineto "$D/k" 2>&1 | tee "$D/inf-8x4096x8192.log"
python3 $W --mode bf16,fp8-tensor --layers 8 --dim 4096 --tokens 8192 --train --kineto "$D/k" 2>&1 | tee "$D/train-8x4096x8192.log"
python3 $W --mode bf16,fp8-tensor,fp8-row --layers 4 --dim 8192 --tokens 4096 --kineto "$D/k" 2>&1 | tee "$D/inf-4x8192x4096.log"
python3 $W --mode bf16,fp8-tensor --layers 4 --dim 8192 --tokens 4096 --train --kineto "$D/k" 2>&1 | tee "$D/train-4x8192x4096.log"
gzip -f "$D"/k/*.json
