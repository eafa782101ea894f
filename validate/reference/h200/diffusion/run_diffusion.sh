#!/usr/bin/env bash
# Diffusion ground truth for `bneck pipeline` and the --steps/--cfg/--resolution what-ifs
# on one H200: unprofiled medians of each configuration, then the baseline under the PyTorch
# profiler (shapes recorded). Usage: validate/reference/h200/diffusion/run_diffusion.sh OUTDIR -> OUTDIR/diffusion.log,
# $OUTDIR/diffusion_base.json.gz
set -u
OUTDIR=${1:?usage: validate/reference/h200/diffusion/run_diffusion.sh OUTDIR}  # where the results go (created)
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
timeout 280 python3 validate/workloads/diffusion.py --kineto /tmp/diffusion_base.json > $OUTDIR/diffusion.log 2>&1
grep -E "^config|^profiled" $OUTDIR/diffusion.log || tail -20 $OUTDIR/diffusion.log
gzip -c /tmp/diffusion_base.json > $OUTDIR/diffusion_base.json.gz 2>/dev/null; ls -la $OUTDIR
