#!/usr/bin/env bash
# Multi-GPU ground truth, in one command on a machine with several GPUs (two to eight H200s):
#  1. NCCL collectives on all GPUs (validate/nccl/bneck_nccl_bench, NVLS off) -> collectives.json,
#     calibrated together with the single-GPU reference measurements into h200-sxm-calibrated.json;
#     the held-out accuracy of the collective model is in report.txt.
#  2. A data-parallel step (validate/workloads/ddp.py, 805 MB of gradients) on 2 GPUs and on all of
#     them, profiled with the PyTorch profiler (one Kineto trace per rank) and with Nsight Systems;
#     measured step times from CUDA events on every rank (ddp_N.log).
#  3. bneck: multi-rank replay of each (replay_N.txt, per-rank spans vs measured), and the forecast
#     from the 2-GPU trace to all GPUs (whatif --ranks N; forecast.txt) beside the measurement.
# Usage: validate/run_multi_gpu.sh OUTDIR [BNECK]      (bneck built as in run_on_device.sh)
set -euo pipefail
out=${1:?usage: validate/run_multi_gpu.sh OUTDIR [BNECK]}
bneck=${2:-build-portable/tools/bneck}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L | wc -l)
nvcc -O3 -arch=sm_90 -o /tmp/bneck_nccl_bench "$here/validate/nccl/bneck_nccl_bench.cu" -lnccl
/tmp/bneck_nccl_bench --gpus "$gpus" > "$out/collectives.json"
python3 - "$here/validate/reference/h200/measurements.json" "$out/collectives.json" "$out/measurements.json" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
a["measurements"] += b["measurements"]
json.dump(a, open(sys.argv[3], "w"), indent=1)
PY
"$bneck" calibrate "$out/measurements.json" -o "$out/h200-sxm-calibrated.json" --name h200-sxm-calibrated
"$bneck" validate-report "$out/measurements.json" --hw "$out/h200-sxm-calibrated.json" | tee "$out/report.txt"
counts="2"
[ "$gpus" -gt 2 ] && counts="2 $gpus"
[ "$gpus" -lt 2 ] && counts="$gpus"
for n in $counts; do
  torchrun --standalone --nproc_per_node "$n" "$here/validate/workloads/ddp.py" --kineto "$out/ddp_${n}_kineto" > "$out/ddp_${n}.log" 2>&1
  if [ -f "$here/.nsys/env.sh" ]; then
    NSYS_ENV="$here/.nsys/env.sh" "$here/tools/capture/capture.sh" "$out/ddp_${n}_nsys" \
      torchrun --standalone --nproc_per_node "$n" "$here/validate/workloads/ddp.py" > "$out/ddp_${n}_nsys.log" 2>&1 || echo "nsys capture $n failed"
    rm -f "$out/ddp_${n}_nsys.nsys-rep"
  fi
  "$bneck" replay "$out/ddp_${n}_kineto" --range 'step.*' > "$out/replay_${n}.txt" 2>&1 || true
  grep median_step_ms "$out/ddp_${n}.log" >> "$out/replay_${n}.txt" || true
done
if [ "$gpus" -gt 2 ]; then
  "$bneck" whatif "$out/ddp_2_kineto" --range 'step.*' --hw "$out/h200-sxm-calibrated.json" --ranks "$gpus" > "$out/forecast.txt" 2>&1 || true
  grep median_step_ms "$out/ddp_${gpus}.log" >> "$out/forecast.txt" || true
fi
ls -la "$out"
