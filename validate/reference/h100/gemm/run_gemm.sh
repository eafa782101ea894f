#!/usr/bin/env bash
# GEMM efficiency of one H100 by shape, precision and layout (../../h200/gemm/gemm_sweep.py):
# gemm.csv (a @ w, cuBLAS's nn kernels: fp32, TF32), gemm_tn.csv (nn.Linear's a @ w.T, its tn
# kernels: fp32, TF32, bf16) and env.txt in OUTDIR.
# Usage: bash validate/reference/h100/gemm/run_gemm.sh OUTDIR
set -u
outdir=${1:?usage: run_gemm.sh OUTDIR}
sweep="$(dirname "$0")/../../h200/gemm/gemm_sweep.py"
mkdir -p "$outdir"
start=$(date +%s)
python3 "$sweep" fp32,tf32,bf16 tn > "$outdir/gemm_tn.csv" 2> "$outdir/gemm.err"
echo "tn $(( $(date +%s) - start )) s" >> "$outdir/gemm.err"
python3 "$sweep" fp32,tf32 nn > "$outdir/gemm.csv" 2>> "$outdir/gemm.err"
echo "all $(( $(date +%s) - start )) s" >> "$outdir/gemm.err"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; python3 -c "import torch; print('torch', torch.__version__)"; } > "$outdir/env.txt" 2>&1
wc -l "$outdir"/gemm*.csv; tail -3 "$outdir/gemm.err"
