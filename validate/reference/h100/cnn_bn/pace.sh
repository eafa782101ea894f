#!/usr/bin/env bash
# The host terms of autocast against the host's launch pace: three processes each of conv_fp32,
# bn_mixed and layernorm_bf16 (validate/workloads/autocast_host.py --pace), one machine a run.
# Usage (on the GPU machine, from the repository root): validate/reference/h100/cnn_bn/pace.sh OUT
set -u
O=${1:?usage: pace.sh OUTFILE}
export PYTHONUNBUFFERED=1
for r in 1 2 3; do for p in conv_fp32 bn_mixed layernorm_bf16; do
  timeout 90 python3 validate/workloads/autocast_host.py --program $p --pace >> "$O" 2>&1
done; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$O"; date -u >> "$O"
