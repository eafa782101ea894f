#!/usr/bin/env bash
# Serving ground truth for `bneck serve` on one H200: transformers' continuous-batching
# engine serving a 1.1 B Llama-style model (validate/workloads/serving.py). One calibration run under
# Nsight Systems (trace + request log; its engine serves the warm-up batch twice, so that the trace
# shows steps on shapes already met), its requests again unprofiled, and held-out runs: Poisson
# rates 3 and 10 requests/s, an offline batch, CUDA graphs on, and static batching (model.generate,
# batches of 32) on the offline batch's requests. Prompts 32-512 tokens, outputs 16-128 (uniform).
# Usage: validate/reference/h200/serving/run_serving.sh OUTDIR -> OUTDIR/serving.tgz (logs, step logs, trimmed trace)
set -u
OUTDIR=${1:?usage: validate/reference/h200/serving/run_serving.sh OUTDIR}  # where the results go (created)
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
W=validate/workloads/serving.py; O=/tmp/serving; mkdir -p $O
L="--prompt-len 32,512 --output-len 16,128 --warmup 8"
# Results go to $OUTDIR after every run (a run cut short by a time limit keeps the others).
save() { tar cf $OUTDIR/serving.tar --exclude cal.sqlite -C /tmp serving; }
run() { name=$1; shift; timeout 200 python3 $W $L "$@" --log $O/$name.jsonl --warmup-log $O/${name}_warmup.jsonl > $O/$name.out 2>&1; grep -h "^policy" $O/$name.out || tail -5 $O/$name.out; save; }
source .nsys/env.sh
timeout 300 nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -o $O/cal --force-overwrite true \
  python3 $W $L --warmup-repeat 2 --rate 6 --num 40 --log $O/cal.jsonl --steplog $O/cal_steps.jsonl --warmup-log $O/cal_warmup.jsonl --config-out $O/config.json > $O/cal.out 2>&1
grep -h "^policy" $O/cal.out || tail -5 $O/cal.out
timeout 200 nsys export --type sqlite -o $O/cal.sqlite $O/cal.nsys-rep > /dev/null 2>&1
rm -f $O/cal.nsys-rep
# Trim the export to what a calibration reads: runtime calls that launched work, kernels, copies, NVTX.
python3 validate/reference/h200/serving/trim_export.py $O/cal.sqlite
ls -la $O/cal.sqlite
# (xz hung past the device's 10-minute limit once: gzip -1 it is, split to fit the 16 MiB per file.)
gzip -1 -c $O/cal.sqlite | split -b 15M - $OUTDIR/cal.sqlite.gz.part-
# The held-out runs ($RUNS picks some; all by default).
RUNS=${RUNS:-"cal_unprof offline rate10 graph6 static rate3"}
for r in $RUNS; do
  case $r in
    cal_unprof) run cal_unprof --rate 6 --num 40 --steplog $O/cal_unprof_steps.jsonl ;;
    offline) run offline --rate 0 --num 100 --seed 4 --steplog $O/offline_steps.jsonl ;;
    rate10) run rate10 --rate 10 --num 100 --seed 3 --steplog $O/rate10_steps.jsonl ;;
    graph6) run graph6 --rate 6 --num 100 --seed 5 --cuda-graph --steplog $O/graph6_steps.jsonl ;;
    static) run static --policy static --rate 0 --num 100 --seed 4 --static-batch 32 ;;
    rate3) run rate3 --rate 3 --num ${RATE3_NUM:-100} --seed 2 --steplog $O/rate3_steps.jsonl ;;
  esac
done
ls -la $OUTDIR
