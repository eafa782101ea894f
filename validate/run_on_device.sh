#!/usr/bin/env bash
# The end-to-end check, in one command on a GPU machine (an H200: one device call): the
# validate target's steps (validate/validate.sh: microbenchmarks, calibration, held-out report;
# `cmake --build build --target validate` runs the same on a machine that builds bneck), then capture real
# workloads with Nsight Systems and compare bneck's replay and model-mode spans with their
# measured ones. bneck itself is built here beforehand as a portable binary and carried:
#   cmake --preset portable && cmake --build build-portable --target bneck
#   then, on the GPU machine, with build-portable/tools/bneck and Nsight Systems' helper folder in .nsys/: validate/run_on_device.sh OUTDIR
# Writes into OUTDIR: measurements.json, h200-sxm-calibrated.json, report.json/.svg/.txt,
# the captured traces (*.sqlite) and e2e.txt (replay and model-mode spans vs measured).
set -euo pipefail
out=${1:?usage: validate/run_on_device.sh OUTDIR [BNECK]}
bneck=${2:-build-portable/tools/bneck}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
cupti_dirs="-L/usr/local/cuda/lib64 -L/usr/local/cuda/extras/CUPTI/lib64"
export LD_LIBRARY_PATH="/usr/local/cuda/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}"
nvcc -O3 -arch=sm_90 -o /tmp/bneck_validate "$here/validate/bench/bneck_validate.cu" -lcublas -lcublasLt $cupti_dirs -lcupti
# The validate target's steps (measure, calibrate, report; validate/validate.sh), not installed.
bash "$here/validate/validate.sh" --out "$out" --bneck "$bneck" --bench /tmp/bneck_validate --no-install
# Real workloads.
if [ -f "$here/.nsys/env.sh" ]; then
  export NSYS_ENV="$here/.nsys/env.sh"
  nvcc -O3 -arch=sm_90 -o /tmp/demo_pipeline "$here/tools/capture/demo_pipeline.cu"
  "$here/tools/capture/capture.sh" "$out/demo" /tmp/demo_pipeline 6 > /dev/null 2>&1 || echo "capture demo failed"
  for p in fp32 bf16; do
    "$here/tools/capture/capture.sh" "$out/mlp_$p" python3 "$here/validate/workloads/mlp.py" $p > /dev/null 2>&1 || echo "capture mlp $p failed"
  done
  rm -f "$out"/*.nsys-rep
  {
    for t in demo:iter.* mlp_fp32:step.* mlp_bf16:step.*; do
      f="$out/${t%%:*}.sqlite"; r="${t#*:}"
      [ -f "$f" ] || continue
      echo "== $f ($r)"
      "$bneck" replay "$f" --range "$r" | sed -n '/^Ranges/,/median/p'
      "$bneck" replay "$f" --range "$r" --durations model --hw "$out/h200-sxm-calibrated.json" | sed -n '/^Ranges/,/median/p;/^Roofline/,/^  (/p'
    done
  } | tee "$out/e2e.txt"
fi
