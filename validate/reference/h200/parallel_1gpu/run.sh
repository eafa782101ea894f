#!/usr/bin/env bash
# One-GPU ground truth of the three parallel-scheme workloads (validate/workloads/fsdp_gpt.py,
# context_parallel.py, moe.py), sizes small and large, for forecasts of their multi-GPU runs
# (run_2gpu.sh beside this file measures those).
# 1. For each workload x size, one process (plain python3, world size 1, the one-GPU program):
#    unprofiled timing (5 warm-up steps, 20 timed steps, CUDA events), then 2 more warm-up steps
#    and a Kineto capture (CPU + CUDA, record_shapes, schedule wait 1 warmup 2 active 3, each step
#    in record_function("step{i}"), gzipped chrome trace).
# 2. Each script once under `torchrun --standalone --nproc_per_node 1 ... --dist` (size small,
#    2 warm-up + 5 timed steps): the launch through torchrun, init_process_group (NCCL) and the
#    distributed code path (FSDP2 wrapping; ring attention; expert-parallel all-to-alls) at world
#    size 1; context_parallel and moe with --check (the distributed path against the one-GPU path).
# 3. Optional, if the .nsys/ folder was carried and time is left: Nsight Systems capture
#    (CUDA + NVTX) of fsdp_gpt small (--nvtx, 3 warm-up + 10 steps), exported to sqlite, gzipped.
# Every command runs under `timeout`, capped by one deadline for the whole script (the second
# argument, default 300 s), so the packing at the end always runs.
# Usage (on the GPU machine, from anywhere): bash validate/reference/h200/parallel_1gpu/run.sh OUTDIR [DEADLINE_S]
# OUTDIR gets: summary.txt, logs.tar.xz (logs/: every log, env.txt, run.log, summary.txt),
# kineto.tar.xz (kineto/*.kineto.json.gz), nsys.tar.xz (if step 3 ran).
set -u
outdir=${1:?usage: run.sh OUTDIR [DEADLINE_S]}
limit=${2:-300}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
wd="$root/validate/workloads"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$outdir"
W=/tmp/parallel_1gpu_work
rm -rf "$W"; mkdir -p "$W/logs" "$W/kineto" "$W/nsys"
L=$W/logs
deadline=$((SECONDS + limit))

summary() {
  {
    printf "%-17s %-6s %-15s %10s %19s %13s %4s  %s\n" workload size run median_ms profiled_median_ms peak_mem_gib rc check
    for f in "$L"/*.log; do
      b=$(basename "$f" .log)
      case "$b" in run|env|*.stdout) continue ;; esac
      wl=${b%%.*}; rest=${b#"$wl".}; size=${rest%%.*}; run=${rest#"$size".}
      med=$(awk '$1=="median_ms"{print $2}' "$f" | tail -1)
      pmed=$(awk '$1=="profiled_median_ms"{print $2}' "$f" | tail -1)
      mem=$(awk '$1=="peak_mem_gib"{print $2}' "$f" | tail -1)
      rc=$(grep -F ":: $b " "$L/run.log" 2>/dev/null | tail -1 | awk '{print $2}')
      chk=$(grep -h -o -E 'check (max_abs_err|loss_ep) .*' "$f" | head -1 | sed 's/^check //')
      printf "%-17s %-6s %-15s %10s %19s %13s %4s  %s\n" "$wl" "$size" "$run" "${med:--}" "${pmed:--}" "${mem:--}" "${rc:--}" "${chk:--}"
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
  if ls "$W/nsys"/*.gz >/dev/null 2>&1; then tar -C "$W" -cf - --exclude='*.nsys-rep' --exclude='*.qdstrm' nsys | xz -T0 -6 > "$outdir/nsys.tar.xz"; fi
  echo "pack done $(date -u +%H:%M:%S) elapsed_s $SECONDS" >> "$L/run.log"
  ls -la "$outdir" "$W/kineto" "$W/nsys" >> "$L/run.log" 2>&1
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
  grep -E '^(median_ms|profiled_median_ms|check|rank 0 check)' "$L/$name.log" | tr '\n' ' '; echo
  [ $rc != 0 ] && tail -5 "$L/$name.log"
  return $rc
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,persistence_mode --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "nccl", ".".join(map(str, torch.cuda.nccl.version())))'
  python3 --version; uname -r; nproc
} > "$L/env.txt" 2>&1
cat "$L/env.txt"

# 1. one-GPU program: unprofiled timing + Kineto, per workload x size
for wl in fsdp_gpt context_parallel moe; do
  for size in small large; do
    run_to 90 "$wl.$size.1gpu" python3 "$wd/$wl.py" --size "$size" --warmup 5 --steps 20 --kineto "$W/kineto"
  done
done
# 2. torchrun with one process, distributed code path
for wl in fsdp_gpt context_parallel moe; do
  chk=""; [ "$wl" != fsdp_gpt ] && chk="--check"
  run_to 60 "$wl.small.torchrun1" torchrun --standalone --nproc_per_node 1 "$wd/$wl.py" --size small --dist $chk --warmup 2 --steps 5
done
# 3. optional Nsight Systems capture
if [ -f "$root/.nsys/env.sh" ] && [ $((deadline - SECONDS)) -ge 45 ]; then
  source "$root/.nsys/env.sh"
  nsys --version >> "$L/env.txt" 2>&1
  command -v nsys >/dev/null && run_to 40 "fsdp_gpt.small.nsys" nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite true \
    -o "$W/nsys/fsdp_gpt.small" python3 "$wd/fsdp_gpt.py" --size small --nvtx --warmup 3 --steps 10
  if [ -f "$W/nsys/fsdp_gpt.small.nsys-rep" ]; then
    run_to 40 "fsdp_gpt.small.nsys_export.stdout" nsys export --type sqlite --force-overwrite true \
      -o "$W/nsys/fsdp_gpt.small.sqlite" "$W/nsys/fsdp_gpt.small.nsys-rep"
    [ -f "$W/nsys/fsdp_gpt.small.sqlite" ] && gzip -6 "$W/nsys/fsdp_gpt.small.sqlite"
  fi
else
  echo "nsys skipped (no .nsys/env.sh or under 45 s left)" | tee -a "$L/run.log"
fi
echo "work done elapsed_s $SECONDS" | tee -a "$L/run.log"
