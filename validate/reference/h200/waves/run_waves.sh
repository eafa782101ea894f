#!/usr/bin/env bash
# Partial waves of one H200 (waves_sweep.py): waves.csv, the Kineto traces and env.txt in OUTDIR.
# Usage: bash validate/reference/h200/waves/run_waves.sh OUTDIR
set -u
outdir=${1:?usage: run_waves.sh OUTDIR}
mkdir -p "$outdir"
python3 "$(dirname "$0")/waves_sweep.py" "$outdir" > "$outdir/waves.csv" 2> "$outdir/waves.err"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"; } > "$outdir/env.txt" 2>&1
(cd "$outdir" && tar cJf traces.tar.xz ./*.json && rm -f ./*.json)
wc -l "$outdir/waves.csv"; tail -5 "$outdir/waves.err"
