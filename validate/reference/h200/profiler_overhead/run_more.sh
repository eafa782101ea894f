#!/usr/bin/env bash
# The two profiler settings whose host cost bneck finds in a trace: the PyTorch profiler's
# profile_memory and Nsight Systems' OS runtime tracing. For each program
# (validate/workloads/profiler_overhead.py: mlp, gpt2_inf, gpt2_train), one process per run, in
# rounds (ROUNDS, default 2; the modes interleaved so that a slow spell of the host falls on all):
#   plain; kineto (record_shapes); kineto_memory (record_shapes + profile_memory); nsys_ranges
#   (-t cuda,nvtx) and nsys_ranges_osrt (-t cuda,nvtx,osrt). Round 1 keeps the traces: the
#   kineto_memory chrome traces and the nsys_ranges_osrt sqlite exports, so that the [memory]
#   events and the OS runtime calls per step (OSRT_API rows inside each step's NVTX range) can be
#   counted. Per-event cost = (median_mode - median_base) / extra events per step, with base kineto
#   (for [memory] events) and nsys_ranges (for OSRT calls).
# Usage (on the GPU machine, Nsight Systems' environment in .nsys/): bash run_more.sh OUTDIR
set -u
out=${1:?usage: run_more.sh OUTDIR}; mkdir -p "$out"
root=$(cd "$(dirname "$0")/../../../.." && pwd)
py="$root/validate/workloads/profiler_overhead.py"
export PYTHONUNBUFFERED=1
source "$root/.nsys/env.sh"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for prog in mlp gpt2_inf gpt2_train; do
    keep() { [ "$r" = 1 ] && echo "$@"; }
    timeout 60 python3 "$py" --program $prog --mode plain > "$out/$prog.plain.r$r.log" 2>&1
    timeout 90 python3 "$py" --program $prog --mode kineto > "$out/$prog.kineto.r$r.log" 2>&1
    timeout 90 python3 "$py" --program $prog --mode kineto_memory $(keep --trace "$out/$prog.kineto_memory.json.gz") \
      > "$out/$prog.kineto_memory.r$r.log" 2>&1
    for t in cuda,nvtx cuda,nvtx,osrt; do
      label=nsys_ranges; [ $t = cuda,nvtx,osrt ] && label=nsys_ranges_osrt
      timeout 90 nsys profile -t $t --sample=none --cpuctxsw=none --force-overwrite true -o "$out/$prog.$label.r$r" \
        python3 "$py" --program $prog --mode plain_nvtx_ranges > "$out/$prog.$label.r$r.log" 2>&1
      [ "$r" = 1 ] && [ $label = nsys_ranges_osrt ] || rm -f "$out/$prog.$label.r$r.nsys-rep"
    done
    grep -H median_ms "$out"/$prog.*.r$r.log
  done
done
for f in "$out"/*.nsys-rep; do timeout 90 nsys export --type sqlite --force-overwrite true -o "${f%.nsys-rep}.sqlite" "$f" > /dev/null 2>&1 & done
wait
for f in "$out"/*_osrt.r1.sqlite; do
  python3 - "$f" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
steps = c.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'step%'").fetchall()
n = [c.execute("SELECT COUNT(*) FROM OSRT_API WHERE start >= ? AND start < ?", s).fetchone()[0] for s in steps]
print(sys.argv[1], "OSRT calls per step: median", sorted(n)[len(n) // 2], "of", len(n), "steps; all:", n)
PY
done
rm -f "$out"/*.nsys-rep; gzip -6 "$out"/*.sqlite
ls -la "$out"
