#!/usr/bin/env bash
# Serving at other loads and batch limits from one plain profile: transformers' continuous-batching
# engine as shipped (validate/workloads/serving.py --plain), prompts of 512 and outputs of 64 tokens.
# A calibration run of 16 requests at 2 requests/s under Nsight Systems (CUDA only) with its log, the
# same requests unprofiled, then held-out runs: 2/s and 8/s (32 requests), 64 at once, 64 at once
# with CUDA graphs, 8/s with CUDA graphs, 64 at once at 16 sequences a step.
# Usage (on an H200 machine, from the repository root): validate/reference/h200/serving/loads/run_loads.sh DIR [1|2]
#   (1: the calibration and the Poisson runs, 2: the bursts and CUDA graphs, 3: the Poisson runs and 2; all when absent)
#   -> DIR.tar.xz: cal.sqlite.gz.part-*, *.jsonl, *.out, config.json, env.txt
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run_loads.sh DIR [1|2]}; P=${2:-12}; mkdir -p "$D"
W=validate/workloads/serving.py; T=/tmp/serving_loads; mkdir -p $T
L="--plain --prompt-len 512,512 --output-len 64,64 --warmup 8"
run() { name=$1; shift; timeout 240 python3 $W $L "$@" --log "$D/$name.jsonl" --warmup-log "$D/${name}_warmup.jsonl" > "$D/$name.out" 2>&1; grep -h "^policy" "$D/$name.out" || tail -5 "$D/$name.out"; }
source .nsys/env.sh
if [[ $P == *1* ]]; then
timeout 300 nsys profile -t cuda --sample=none --cpuctxsw=none -o $T/cal --force-overwrite true \
  python3 $W $L --warmup-repeat 2 --rate 2 --num 16 --seed 21 --log "$D/cal.jsonl" --warmup-log "$D/cal_warmup.jsonl" --config-out "$D/config.json" > "$D/cal.out" 2>&1
grep -h "^policy" "$D/cal.out" || tail -5 "$D/cal.out"
timeout 200 nsys export --type sqlite -o $T/cal.sqlite $T/cal.nsys-rep > /dev/null 2>&1
python3 validate/reference/h200/serving/trim_export.py $T/cal.sqlite
gzip -1 -c $T/cal.sqlite | split -b 15M - "$D/cal.sqlite.gz.part-"
run cal_unprof --rate 2 --num 16 --seed 21
fi
if [[ $P == *1* || $P == *3* ]]; then
run rate2 --rate 2 --num 32 --seed 22
run rate8 --rate 8 --num 32 --seed 23
fi
if [[ $P == *2* || $P == *3* ]]; then
run burst64 --rate 0 --num 64 --seed 24
run burst64_graph --rate 0 --num 64 --seed 24 --cuda-graph
run rate8_graph --rate 8 --num 32 --seed 23 --cuda-graph
run burst64_seqs16 --rate 0 --num 64 --seed 24 --max-seqs 16
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$D/env.txt"; date -u >> "$D/env.txt"
ls -la "$D"
tar -C "$D" -cJf "$D.tar.xz" . && rm -rf "$D"
