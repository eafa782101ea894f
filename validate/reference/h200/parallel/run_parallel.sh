#!/usr/bin/env bash
# Ground truth for the parallelism what-ifs, on a machine with 2+ GPUs (nvidia-h200-x2):
# validate/workloads/parallel.py in data-, tensor- and pipeline-parallel mode at 1 GPU and at 2,
# unprofiled steps timed by CUDA events (the ground truth) and profiled steps (Kineto, one trace per
# rank, gzipped); with --nsys, the same under Nsight Systems (SQLite exports) instead of Kineto.
# Usage: validate/reference/h200/parallel/run_parallel.sh OUTDIR [--nsys]
set -uo pipefail
out=${1:?usage: validate/reference/h200/parallel/run_parallel.sh OUTDIR [--nsys]}
here=$(cd "$(dirname "$0")/../../../.." && pwd)
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 NCCL_CUMEM_ENABLE=0 PYTHONUNBUFFERED=1
wl="$here/validate/workloads/parallel.py"
for spec in dp:1 dp:2 tp:1 tp:2 pp:1 pp:2:gpipe pp:2:1f1b; do
  IFS=: read -r mode n sched <<<"$spec"
  name="${mode}${sched:+_$sched}_${n}gpu"
  args=(--mode "$mode" ${sched:+--schedule "$sched"})
  if [ "${2:-}" = "--nsys" ]; then
    [ "$sched" = "1f1b" ] && continue
    source "$here/.nsys/env.sh"
    timeout 240 nsys profile -o "$out/$name" --force-overwrite true -t cuda,nvtx --sample=none \
      torchrun --standalone --nproc_per_node "$n" "$wl" "${args[@]}" --steps 6 --prof-steps 0 > "$out/${name}_nsys.log" 2>&1
    timeout 120 nsys export --type sqlite --force-overwrite true -o "$out/$name.sqlite" "$out/$name.nsys-rep" >/dev/null 2>&1
    rm -f "$out/$name.nsys-rep"
  else
    timeout 200 torchrun --standalone --nproc_per_node "$n" "$wl" "${args[@]}" --kineto "$out/${name}_kineto" > "$out/$name.log" 2>&1
    gzip -f "$out/${name}_kineto"/*.json 2>/dev/null
  fi
  grep -h median_step_ms "$out/$name"*.log
  [ -d "$out/${name}_kineto" ] && for f in "$out/${name}_kineto"/*.json.gz; do mv "$f" "$out/${name}_$(basename "$f")"; done; rmdir "$out/${name}_kineto" 2>/dev/null
done
