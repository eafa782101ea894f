#!/usr/bin/env bash
# GEMM efficiency of one H200 by shape and precision (gemm_sweep.py): gemm.csv and env.txt in OUTDIR.
# Usage: bash validate/reference/h200/gemm/run_gemm.sh OUTDIR
set -u
outdir=${1:?usage: run_gemm.sh OUTDIR}
mkdir -p "$outdir"
python3 "$(dirname "$0")/gemm_sweep.py" > "$outdir/gemm.csv" 2> "$outdir/gemm.err"
python3 "$(dirname "$0")/gemm_align.py" > "$outdir/gemm_align.csv" 2>> "$outdir/gemm.err"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__, 'cuBLAS', torch.backends.cuda.preferred_blas_library() if hasattr(torch.backends.cuda, 'preferred_blas_library') else '')"; } > "$outdir/env.txt" 2>&1
wc -l "$outdir/gemm.csv"; tail -3 "$outdir/gemm.csv"; tail -3 "$outdir/gemm.err"
