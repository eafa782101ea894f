#!/usr/bin/env bash
# The diffusion baseline under Nsight Systems (NVTX from emit_nvtx, shapes in the range names).
# Usage (device): validate/reference/h200/diffusion/run_diffusion_nsys.sh -> $OUT/diffusion_base.sqlite.gz
set -u
OUT=${1:?usage: validate/reference/h200/diffusion/run_diffusion_nsys.sh OUTDIR}  # where the results go (created)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
source .nsys/env.sh
timeout 150 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -o /tmp/dn --force-overwrite true \
  python3 validate/workloads/diffusion.py --nvtx > $OUT/nsys.log 2>&1
grep -E "^nvtx" $OUT/nsys.log || tail -5 $OUT/nsys.log
timeout 60 nsys export --type sqlite -o /tmp/dn.sqlite /tmp/dn.nsys-rep > /dev/null 2>&1
gzip -1 -c /tmp/dn.sqlite > $OUT/diffusion_base.sqlite.gz; ls -la $OUT
