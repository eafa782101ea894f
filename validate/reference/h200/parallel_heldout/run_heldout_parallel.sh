#!/usr/bin/env bash
# Held-out parallel cases (other sizes than validate/reference/h200/parallel/run_parallel.sh; the forecasts were not tuned on
# them): DP bf16 16 x Linear(4096), 4096 tokens; TP 2 layers d 5120 (40 heads), 4 x 1024 tokens; PP
# 12 x Linear(4096), 8 microbatches of 2048 tokens (gpipe and 1f1b). One-GPU runs profiled (Kineto),
# two-GPU runs unprofiled. Usage: validate/reference/h200/parallel_heldout/run_heldout_parallel.sh OUTDIR -> OUTDIR/ho.tgz
set -u
OUTDIR=${1:?usage: validate/reference/h200/parallel_heldout/run_heldout_parallel.sh OUTDIR}  # where the results go (created)
mkdir -p "$OUTDIR"
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 PYTHONUNBUFFERED=1
W=validate/workloads/parallel.py; O=/tmp/ho; mkdir -p $O
run() { name=$1; n=$2; shift 2; timeout 150 torchrun --standalone --nproc_per_node $n $W "$@" > $O/$name.log 2>&1; gzip -f $O/${name}_k/*.json 2>/dev/null; grep -h median_step_ms $O/$name.log; }
run dp_1gpu 1 --mode dp --dim 4096 --tokens 4096 --layers 16 --kineto $O/dp_1gpu_k
run dp_2gpu 2 --mode dp --dim 4096 --tokens 4096 --layers 16
run tp_1gpu 1 --mode tp --dim 5120 --tokens 4096 --layers 2 --kineto $O/tp_1gpu_k
run tp_2gpu 2 --mode tp --dim 5120 --tokens 4096 --layers 2
run pp_1gpu 1 --mode pp --dim 4096 --tokens 2048 --layers 12 --microbatches 8 --kineto $O/pp_1gpu_k
run pp_2gpu 2 --mode pp --dim 4096 --tokens 2048 --layers 12 --microbatches 8
run pp1f1b_2gpu 2 --mode pp --schedule 1f1b --dim 4096 --tokens 2048 --layers 12 --microbatches 8
tar czf $OUTDIR/ho.tgz -C /tmp ho
