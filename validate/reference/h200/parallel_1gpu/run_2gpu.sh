#!/usr/bin/env bash
# Two-GPU measurements of the workloads whose one-GPU ground truth run.sh (beside this file)
# records: validate/workloads/fsdp_gpt.py (FSDP2), context_parallel.py (ring attention, P2P) and
# moe.py (expert parallel, all_to_all_single), sizes small and large, each under
# `torchrun --standalone --nproc_per_node 2`, NVLink multicast off (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1).
# 1. context_parallel and moe small with --check (distributed path against the one-GPU path).
# 2. For each workload x size, one torchrun job: unprofiled timing (5 warm-up steps, 20 timed
#    steps; median_ms is the median over steps of the slower rank's step, every rank's own median
#    prints as "rank R median_ms_local"), then 2 more warm-up steps and a Kineto capture on rank 0
#    (CPU + CUDA, record_shapes, schedule wait 1 warmup 2 active 3, record_function("step{i}"),
#    gzipped chrome trace kineto/<wl>.<size>.ws2.r0.kineto.json.gz).
# 3. If time is left: the one-GPU program of each workload x size on GPU 0 of the same machine
#    (unprofiled timing only), for a same-host comparison with run.sh's numbers.
# Every command runs under `timeout`, capped by one deadline for the whole script (the second
# argument, default 480 s), so the packing at the end always runs.
# Usage (on a machine with 2 GPUs): bash validate/reference/h200/parallel_1gpu/run_2gpu.sh OUTDIR [DEADLINE_S]
# OUTDIR gets: summary.txt, logs.tar.xz (logs/: every log, env.txt, run.log, summary.txt),
# kineto.tar.xz (kineto/*.ws2.r0.kineto.json.gz).
set -u
outdir=${1:?usage: run_2gpu.sh OUTDIR [DEADLINE_S]}
limit=${2:-480}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
wd="$root/validate/workloads"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
mkdir -p "$outdir"
W=/tmp/parallel_2gpu_work
rm -rf "$W"; mkdir -p "$W/logs" "$W/kineto"
L=$W/logs
deadline=$((SECONDS + limit))

summary() {
  {
    printf "%-17s %-6s %-10s %10s %19s %16s %16s %13s %4s  %s\n" workload size run median_ms profiled_median_ms \
      r0_median_local r1_median_local peak_mem_gib rc check
    for f in "$L"/*.log; do
      b=$(basename "$f" .log)
      case "$b" in run|env|*.stdout) continue ;; esac
      wl=${b%%.*}; rest=${b#"$wl".}; size=${rest%%.*}; run=${rest#"$size".}
      med=$(awk '$1=="median_ms"{print $2}' "$f" | tail -1)
      pmed=$(awk '$1=="profiled_median_ms"{print $2}' "$f" | tail -1)
      r0=$(awk '$1=="rank" && $2=="0" && $3=="median_ms_local"{print $4}' "$f" | tail -1)
      r1=$(awk '$1=="rank" && $2=="1" && $3=="median_ms_local"{print $4}' "$f" | tail -1)
      mem=$(awk '$1=="peak_mem_gib"{print $2}' "$f" | tail -1)
      rc=$(grep -F ":: $b " "$L/run.log" 2>/dev/null | tail -1 | awk '{print $2}')
      chk=$(grep -h -o -E 'rank [0-9]+ check (max_abs_err|loss_ep) .*' "$f" | sed 's/ check / /' | tr '\n' ';')
      printf "%-17s %-6s %-10s %10s %19s %16s %16s %13s %4s  %s\n" "$wl" "$size" "$run" "${med:--}" "${pmed:--}" \
        "${r0:--}" "${r1:--}" "${mem:--}" "${rc:--}" "${chk:--}"
    done
  } > "$outdir/summary.txt"
}

packed=0
pack() {
  [ $packed = 1 ] && return; packed=1
  wait
  summary
  cp "$outdir/summary.txt" "$L/summary.txt"
  echo "pack start $(date -u +%H:%M:%S) elapsed_s $SECONDS" >> "$L/run.log"
  if ls "$W/kineto"/* >/dev/null 2>&1; then tar -C "$W" -cf - kineto | xz -T0 -6 > "$outdir/kineto.tar.xz"; fi
  echo "pack done $(date -u +%H:%M:%S) elapsed_s $SECONDS" >> "$L/run.log"
  ls -la "$outdir" "$W/kineto" >> "$L/run.log" 2>&1
  tar -C "$W" -cf - logs | xz -T0 -6 > "$outdir/logs.tar.xz"
  ls -la "$outdir"
  cat "$outdir/summary.txt"
}
trap pack EXIT

# run_to CAP NAME cmd...: run under timeout min(CAP, time left), stdout+stderr to logs/NAME.log
run_to() {
  local cap=$1 name=$2; shift 2
  local left=$((deadline - SECONDS))
  [ $left -lt $cap ] && cap=$left
  if [ $cap -lt 15 ]; then echo "SKIPPED (deadline) :: $name $*" | tee -a "$L/run.log"; return 99; fi
  local t0=$SECONDS
  timeout -k 5 $cap "$@" > "$L/$name.log" 2>&1
  local rc=$?
  echo "rc $rc wall_s $((SECONDS - t0)) cap_s $cap :: $name $*" | tee -a "$L/run.log"
  grep -E '^(median_ms|profiled_median_ms|rank [0-9]+ (check|median_ms_local))' "$L/$name.log" | tr '\n' ' '; echo
  [ $rc != 0 ] && tail -5 "$L/$name.log"
  return $rc
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,persistence_mode --format=csv
  nvidia-smi topo -m
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())), "devices", torch.cuda.device_count())'
  python3 --version; uname -r; nproc
  env | grep -E '^(NCCL_|TORCH_SYMM|NVSHMEM_)' | sort
} > "$L/env.txt" 2>&1
cat "$L/env.txt"
TR="torchrun --standalone --nproc_per_node 2"

# 1. correctness of the distributed paths
for wl in context_parallel moe; do
  run_to 90 "$wl.small.check2" $TR "$wd/$wl.py" --size small --check --steps 0
done
# 2. two-GPU timings + rank-0 Kineto
for wl in fsdp_gpt context_parallel moe; do
  for size in small large; do
    run_to 120 "$wl.$size.2gpu" $TR "$wd/$wl.py" --size "$size" --warmup 5 --steps 20 --kineto "$W/kineto"
  done
done
# 3. same-host one-GPU timings (no profiler)
for wl in fsdp_gpt context_parallel moe; do
  for size in small large; do
    run_to 60 "$wl.$size.1gpu" env CUDA_VISIBLE_DEVICES=0 python3 "$wd/$wl.py" --size "$size" --warmup 5 --steps 20
  done
done
echo "work done elapsed_s $SECONDS" | tee -a "$L/run.log"
