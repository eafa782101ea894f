set -u
OUTDIR=${1:?usage: validate/reference/h200/serving/run_serving2.sh OUTDIR}  # where the results go (created)
mkdir -p "$OUTDIR"
export PYTHONUNBUFFERED=1
W=validate/workloads/serving.py; O=$OUTDIR
L="--prompt-len 32,512 --output-len 16,128 --warmup 8"
timeout 150 python3 $W $L --rate 0 --num 100 --seed 4 --log $O/offline2.jsonl --steplog $O/offline2_steps.jsonl > $O/offline2.out 2>&1; grep "^policy" $O/offline2.out || tail -3 $O/offline2.out
timeout 150 python3 $W $L --rate 3 --num 100 --seed 2 --log $O/rate3b.jsonl --steplog $O/rate3b_steps.jsonl > $O/rate3b.out 2>&1; grep "^policy" $O/rate3b.out || tail -3 $O/rate3b.out
