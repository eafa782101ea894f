#!/usr/bin/env bash
# Ground truth for public Hugging Face workloads (validate/workloads/hf_models.py) on one GPU:
# unprofiled timings of every workload x mode (fp32, tf32, autocast-bf16, compile), PyTorch
# profiler (Kineto) traces with shapes for fp32, autocast-bf16, tf32 and compile, Kineto without
# shapes for fp32 (profiler overhead), and Nsight Systems captures (CUDA + NVTX) of
# bert_large-inf-8x512 and gpt2_large-train-1x1024 in fp32.
# Order: eager modes of each workload (plain timings, then its Kineto runs, in one process per
# workload), then compile of all four workloads (compiled in parallel, timed one at a time), then
# the two nsys captures (sqlite export in the background). Every command runs under `timeout`, capped by one deadline for the whole script
# (HF_DEADLINE_S, default 460 s), so the packing at the end always runs.
# Needs Nsight Systems' environment folder .nsys/ in the repository root (carried).
# Usage (on the GPU machine): bash validate/reference/h200/hf_models/run.sh OUTDIR
# OUTDIR gets: summary.txt, logs.tar.xz (every log, env.txt, summary.txt), kineto_fp32.tar.xz,
# kineto_bf16.tar.xz, kineto_tf32.tar.xz, kineto_noshapes.tar.xz, kineto_compile.tar.xz,
# nsys.tar.xz (gzipped sqlite exports).
set -u
outdir=${1:?usage: run.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
py="$root/validate/workloads/hf_models.py"
export PYTHONUNBUFFERED=1
mkdir -p "$outdir"
W=/tmp/hf_models_work
rm -rf "$W"; mkdir -p "$W/logs" "$W/k_fp32" "$W/k_bf16" "$W/k_tf32" "$W/k_noshapes" "$W/k_compile" "$W/nsys"
deadline=$((SECONDS + ${HF_DEADLINE_S:-460}))
L=$W/logs

summary() {
  {
    printf "%-26s %-14s %-15s %12s %20s %10s\n" workload mode kind median_ms profiled_median_ms compile_s
    for f in "$L"/*.plain.log "$L"/*.kineto.log "$L"/*.nsys.log; do
      [ -e "$f" ] || continue
      b=$(basename "$f" .log)
      wl=${b%%.*}; wl=$(echo "$b" | sed -E 's/\.(fp32|tf32|autocast-bf16|compile)\..*//')
      rest=${b#"$wl".}; mode=${rest%%.*}; kind=${rest#"$mode".}
      med=$(awk '$1=="median_ms"{print $2}' "$f" | tail -1)
      pmed=$(awk '$1=="profiled_median_ms"{print $2}' "$f" | tail -1)
      cs=$(awk '$1=="compile_s"{print $2}' "$f" | tail -1)
      ab=$(grep -c '^compile_aborted' "$f")
      [ "$ab" != 0 ] && cs=aborted
      printf "%-26s %-14s %-15s %12s %20s %10s\n" "$wl" "$mode" "$kind" "${med:--}" "${pmed:--}" "${cs:--}"
    done | LC_ALL=C sort -k1,1 -k2,2 -k3,3
  } > "$outdir/summary.txt"
}

packed=0
pack() {
  [ $packed = 1 ] && return; packed=1
  wait
  summary
  cp "$outdir/summary.txt" "$L/summary.txt"
  echo "pack start $(date -u +%H:%M:%S) elapsed_s $SECONDS" >> "$L/run.log"
  for k in fp32 bf16 tf32 noshapes compile; do
    if ls "$W/k_$k"/* >/dev/null 2>&1; then
      tar -C "$W" -cf - "k_$k" | xz -T0 -3 > "$outdir/kineto_$k.tar.xz"
    fi
  done
  if ls "$W/nsys"/* >/dev/null 2>&1; then tar -C "$W" -cf - nsys | xz -T0 -3 > "$outdir/nsys.tar.xz"; fi
  echo "pack done $(date -u +%H:%M:%S) elapsed_s $SECONDS" >> "$L/run.log"
  ls -la "$outdir" >> "$L/run.log"
  tar -C "$W" -cf - logs | xz -T0 -6 > "$outdir/logs.tar.xz"
  ls -la "$outdir"
  cat "$outdir/summary.txt"
}
trap pack EXIT

# run_to CAP LOG cmd...: run under timeout min(CAP, time left), output appended to LOG
run_to() {
  local cap=$1 log=$2; shift 2
  local left=$((deadline - SECONDS))
  [ $left -lt $cap ] && cap=$left
  if [ $cap -lt 15 ]; then echo "SKIPPED (deadline) $*" | tee -a "$L/run.log"; return 99; fi
  local t0=$SECONDS
  timeout -k 5 $cap "$@" >> "$log" 2>&1
  local rc=$?
  echo "rc $rc wall_s $((SECONDS - t0)) cap_s $cap :: $*" | tee -a "$L/run.log"
  return $rc
}

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,persistence_mode --format=csv
  nvidia-smi -q -d CLOCK | grep -A4 -E "Applications Clocks|Default Applications" | head -12
  python3 -c 'import torch, transformers, triton; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "transformers", transformers.__version__, "triton", triton.__version__)'
  python3 --version; uname -r; nproc
} > "$L/env.txt" 2>&1
cat "$L/env.txt"

WLS="bert_large-inf-8x512 gpt2_large-inf-4x1024 gpt2_large-train-1x1024 opt_1.3b-inf-2x2048"
# 1. eager modes: plain fp32, tf32, autocast-bf16; then Kineto fp32 (shapes), fp32 (no shapes), bf16, tf32
for wl in $WLS; do
  run_to 150 "$L/$wl.eager.stdout.log" python3 "$py" --workload "$wl" --mode fp32,autocast-bf16,tf32 \
    --kineto "$W/kin" --also-noshapes fp32 --logdir "$L"
  grep -h -E "^(median_ms|profiled_median_ms)" "$L/$wl".*.log 2>/dev/null | tr '\n' ' '; echo
  mv "$W/kin/$wl.fp32.kineto.json.gz" "$W/k_fp32/" 2>/dev/null
  mv "$W/kin/$wl.fp32.noshapes.kineto.json.gz" "$W/k_noshapes/" 2>/dev/null
  mv "$W/kin/$wl.autocast-bf16.kineto.json.gz" "$W/k_bf16/" 2>/dev/null
  mv "$W/kin/$wl.tf32.kineto.json.gz" "$W/k_tf32/" 2>/dev/null
done
# 2. compile, all four workloads at once: the processes compile in parallel (CPU), then wait for
#    each other (barrier) and time / profile one at a time under a lock (hf_models.py --sync-dir).
#    compile_s is therefore the first call's wall time with the other compilations running beside it.
#    The training workload aborts if its first (compiling) call takes over 150 s.
sync=$W/sync; mkdir -p "$sync"
for wl in $WLS; do
  lim=""; [ "$wl" = gpt2_large-train-1x1024 ] && lim="--compile-limit-s 150"
  ( run_to 280 "$L/$wl.compile.stdout.log" python3 "$py" --workload "$wl" --mode compile --kineto "$W/k_compile" \
      --logdir "$L" --sync-dir "$sync" --sync-n 4 --sync-wait-s 240 $lim
    touch "$sync/$wl.done" ) &
done
wait
for wl in $WLS; do
  echo "$wl compile: $(grep -h -E "^(compile_s|compile_aborted|median_ms|profiled_median_ms)" "$L/$wl".compile.*.log 2>/dev/null | tr '\n' ' ')"
done
# 3. Nsight Systems, fp32, NVTX step ranges
source "$root/.nsys/env.sh"
nsys --version >> "$L/env.txt" 2>&1
for wl in bert_large-inf-8x512 gpt2_large-train-1x1024; do
  run_to 120 "$L/$wl.fp32.nsys.stdout.log" nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite true \
    -o "$W/nsys/$wl.fp32" python3 "$py" --workload "$wl" --mode fp32 --nvtx --logdir "$L"
  grep -h -E "^profiled_median_ms" "$L/$wl.fp32.nsys.log" 2>/dev/null
  # export in the background (CPU only) while the next GPU job runs
  ( timeout 90 nsys export --type sqlite --force-overwrite true -o "$W/nsys/$wl.fp32.sqlite" "$W/nsys/$wl.fp32.nsys-rep" \
      >> "$L/$wl.fp32.nsys.stdout.log" 2>&1
    echo "export rc $? sqlite_bytes $(stat -c %s "$W/nsys/$wl.fp32.sqlite" 2>&1)" >> "$L/run.log"
    gzip -6 "$W/nsys/$wl.fp32.sqlite"
    rm -f "$W/nsys/$wl.fp32.nsys-rep" ) &
done
echo "work done elapsed_s $SECONDS" | tee -a "$L/run.log"
