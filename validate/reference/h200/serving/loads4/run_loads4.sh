#!/usr/bin/env bash
# loads3's serving rows again on another machine, each run with the host's pace beside it: the
# calibration's plain Nsight Systems profile (CUDA only) of 16 requests at Poisson 2/s (512 -> 64
# tokens, the warm-up served once) as in loads3; the same requests unprofiled and the held-out runs
# (Poisson 8/s, 32 requests; 64 at once; 64 at once with CUDA graphs) with the engine's steps logged
# and an interpreter-speed probe before each step (serving.py --diag; steps marked with NVTX ranges,
# no profiler attached; the forward is never profiled: --diag-steps beyond the run); model.generate
# in static batches of 16 (64 requests) as in loads3.
# Usage (on an H100 or H200 machine, from the repository root): validate/reference/h200/serving/loads4/run_loads4.sh DIR
#   -> DIR.tar.xz: cal.sqlite (trimmed), *.jsonl, *_steps.jsonl, *.out, config.json, env.txt
set -u
export PYTHONUNBUFFERED=1
D=${1:?usage: run_loads4.sh DIR}; mkdir -p "$D"
W=validate/workloads/serving.py; T=/tmp/serving_loads4; mkdir -p $T
L="--prompt-len 512,512 --output-len 64,64 --warmup 8"
G="--diag --diag-steps 99990,99991,99995,99996"
run() { name=$1; shift; timeout 110 python3 $W $L $G "$@" --log "$D/$name.jsonl" --warmup-log "$D/${name}_warmup.jsonl" --steplog "$D/${name}_steps.jsonl" > "$D/$name.out" 2>&1; grep -h "^policy" "$D/$name.out" || tail -5 "$D/$name.out"; }
source .nsys/env.sh
timeout 150 nsys profile -t cuda --sample=none --cpuctxsw=none -o $T/cal --force-overwrite true \
  python3 $W --plain $L --rate 2 --num 16 --seed 51 --log "$D/cal.jsonl" --warmup-log "$D/cal_warmup.jsonl" --config-out "$D/config.json" > "$D/cal.out" 2>&1
grep -h "^policy" "$D/cal.out" || tail -5 "$D/cal.out"
timeout 100 nsys export --type sqlite -o $T/cal.sqlite $T/cal.nsys-rep > /dev/null 2>&1
python3 validate/reference/h200/serving/trim_export.py $T/cal.sqlite
cp $T/cal.sqlite "$D/cal.sqlite"
run cal_unprof --rate 2 --num 16 --seed 51
run rate8 --rate 8 --num 32 --seed 52
run burst64 --rate 0 --num 64 --seed 53
run burst64_graph --rate 0 --num 64 --seed 53 --cuda-graph
timeout 110 python3 $W --plain --policy static --rate 0 --prompt-len 512,512 --output-len 64,64 --num 64 --seed 54 --static-batch 16 \
  --log "$D/static16.jsonl" > "$D/static16.out" 2>&1
grep -h "^policy" "$D/static16.out" || tail -5 "$D/static16.out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$D/env.txt"; date -u >> "$D/env.txt"
ls -la "$D"
tar -C "$D" -cf - . | xz -6 -T16 > "$D.tar.xz" && rm -rf "$D"
