#!/usr/bin/env bash
# The diffusion baseline under Nsight Systems (NVTX from emit_nvtx, shapes in the range names).
# Usage: validate/reference/h200/diffusion/run_diffusion_nsys.sh OUTDIR -> OUTDIR/diffusion_base.sqlite.gz
set -u
OUTDIR=${1:?usage: validate/reference/h200/diffusion/run_diffusion_nsys.sh OUTDIR}  # where the results go (created)
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
source .nsys/env.sh
timeout 150 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -o /tmp/dn --force-overwrite true \
  python3 validate/workloads/diffusion.py --nvtx > $OUTDIR/nsys.log 2>&1
grep -E "^nvtx" $OUTDIR/nsys.log || tail -5 $OUTDIR/nsys.log
timeout 60 nsys export --type sqlite -o /tmp/dn.sqlite /tmp/dn.nsys-rep > /dev/null 2>&1
gzip -1 -c /tmp/dn.sqlite > $OUTDIR/diffusion_base.sqlite.gz; ls -la $OUTDIR
