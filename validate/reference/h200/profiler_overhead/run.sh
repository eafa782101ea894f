#!/usr/bin/env bash
# Host cost of profilers per recorded event, on one GPU (validate/workloads/profiler_overhead.py).
# For each program (mlp, gpt2_inf, gpt2_train), one process per run, in this order:
#   plain, kineto (trace exported), kineto_noshapes (trace exported), kineto_stack,
#   nsys_ranges       nsys profile -t cuda,nvtx      ... --mode plain_nvtx_ranges   (sqlite exported)
#   nsys_emit_nvtx    nsys profile -t cuda,nvtx      ... --mode nvtx                (sqlite exported)
#   nsys_ranges_osrt  nsys profile -t cuda,nvtx,osrt ... --mode plain_nvtx_ranges
# (nsys always with --sample=none --cpuctxsw=none), then, time allowing, a second plain run of each
# program (plain_rerun). The sqlite exports run after all timed runs, in parallel, so no export
# competes with a timed run for the CPU. Then summary.txt: every run's median; per step of each
# trace the events inside the step's range (by start timestamp); and the derived host cost per event,
# (median_mode - median_plain) / events per step.
# Every command runs under `timeout`, capped by one deadline: the whole run ends within 420 s.
# Needs Nsight Systems' environment folder .nsys/ in the repository root.
# Usage (on the GPU machine): bash validate/reference/h200/profiler_overhead/run.sh OUTDIR
# OUTDIR gets: summary.txt, logs.tar.xz (env.txt, run.log, every run's log, summary.txt),
# traces.tar.xz (traces/: Kineto chrome traces *.json.gz and gzipped sqlite exports *.sqlite.gz;
# members over the 9.5 MB budget are replaced by copies cut to steps 10..14, named *.steps10-14.*).
set -u
outdir=${1:?usage: run.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
py="$root/validate/workloads/profiler_overhead.py"
export PYTHONUNBUFFERED=1
mkdir -p "$outdir"
W=/tmp/profiler_overhead_work
rm -rf "$W"; mkdir -p "$W/logs" "$W/traces" "$W/rep"
L=$W/logs
T0=$SECONDS
T_MEAS=320     # timed runs end by this (s since start)
T_EXPORT=362   # sqlite exports end by then
T_SUMMARY=406  # summary (and trace cutting) ends by then
T_TOTAL=420    # packing ends by then

# run_to UNTIL CAP LOG cmd...: run under timeout min(CAP, UNTIL - elapsed), output to LOG
run_to() {
  local until=$1 cap=$2 log=$3; shift 3
  local left=$((until - (SECONDS - T0)))
  [ $left -lt $cap ] && cap=$left
  if [ $cap -lt 8 ]; then echo "SKIPPED (deadline) :: $*" | tee -a "$L/run.log"; return 99; fi
  local t0=$SECONDS
  timeout -k 3 $cap "$@" >> "$log" 2>&1
  local rc=$?
  echo "rc $rc wall_s $((SECONDS - t0)) cap_s $cap at_s $((t0 - T0)) :: $*" | tee -a "$L/run.log"
  return $rc
}

packed=0
pack() {
  [ $packed = 1 ] && return; packed=1
  wait
  [ -s "$outdir/summary.txt" ] && cp "$outdir/summary.txt" "$L/summary.txt"
  echo "pack start elapsed_s $((SECONDS - T0))" >> "$L/run.log"
  local left=$((T_TOTAL + 15 - (SECONDS - T0))); [ $left -lt 10 ] && left=10
  ls -la "$W/traces" >> "$L/run.log" 2>&1
  if [ -s "$W/pack.list" ]; then
    (cd "$W" && timeout $left tar -cf - -T pack.list | xz -T0 -6 > "$outdir/traces.tar.xz")
  fi
  echo "pack done elapsed_s $((SECONDS - T0))" >> "$L/run.log"
  ls -la "$outdir" >> "$L/run.log"
  tar -C "$W" -cf - logs | xz -T0 -6 > "$outdir/logs.tar.xz"
  ls -la "$outdir"
  [ -s "$outdir/summary.txt" ] && cat "$outdir/summary.txt"
}
trap pack EXIT

source "$root/.nsys/env.sh"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,clocks.max.sm,power.limit,persistence_mode --format=csv
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
  python3 --version
  nsys --version
  uname -r; nproc
  grep -m1 "model name" /proc/cpuinfo
} > "$L/env.txt" 2>&1
cat "$L/env.txt"

# r PROG LABEL CAP args...: one plain-python run; n PROG LABEL CAP TRACE_KINDS MODE: one run under nsys
r() {
  local prog=$1 label=$2 cap=$3; shift 3
  run_to $T_MEAS $cap "$L/$prog.$label.log" python3 "$py" --program "$prog" "$@"
  echo "$prog $label $(grep -h -E '^median_ms' "$L/$prog.$label.log" | tail -1)"
}
n() {
  local prog=$1 label=$2 cap=$3 kinds=$4 mode=$5
  run_to $T_MEAS $cap "$L/$prog.$label.log" nsys profile -t "$kinds" --sample=none --cpuctxsw=none \
    --force-overwrite true -o "$W/rep/$prog.$label" python3 "$py" --program "$prog" --mode "$mode"
  echo "$prog $label $(grep -h -E '^median_ms' "$L/$prog.$label.log" | tail -1)"
}

for prog in mlp gpt2_inf gpt2_train; do
  cap=60; [ $prog = mlp ] && cap=45
  r $prog plain $cap --mode plain
  r $prog kineto $cap --mode kineto --trace "$W/traces/$prog.kineto.json.gz"
  r $prog kineto_noshapes $cap --mode kineto_noshapes --trace "$W/traces/$prog.kineto_noshapes.json.gz"
  r $prog kineto_stack $cap --mode kineto_stack
  n $prog nsys_ranges $((cap + 30)) cuda,nvtx plain_nvtx_ranges
  n $prog nsys_emit_nvtx $((cap + 30)) cuda,nvtx nvtx
  n $prog nsys_ranges_osrt $((cap + 30)) cuda,nvtx,osrt plain_nvtx_ranges
done
for prog in mlp gpt2_inf gpt2_train; do
  if [ $((T_MEAS - (SECONDS - T0))) -ge 40 ]; then r $prog plain_rerun 30 --mode plain
  else echo "SKIPPED (time) $prog plain_rerun" | tee -a "$L/run.log"; fi
done
echo "timed runs done elapsed_s $((SECONDS - T0))" | tee -a "$L/run.log"

# sqlite exports, all at once (CPU only; no timed run is left)
for prog in mlp gpt2_inf gpt2_train; do
  for label in nsys_ranges nsys_emit_nvtx; do
    [ -s "$W/rep/$prog.$label.nsys-rep" ] || { echo "no report $prog.$label" | tee -a "$L/run.log"; continue; }
    ( run_to $T_EXPORT 90 "$L/$prog.$label.export.log" nsys export --type sqlite --force-overwrite true \
        -o "$W/traces/$prog.$label.sqlite" "$W/rep/$prog.$label.nsys-rep"
      echo "export $prog.$label sqlite_bytes $(stat -c %s "$W/traces/$prog.$label.sqlite" 2>&1)" >> "$L/run.log" ) &
  done
done
wait
echo "exports done elapsed_s $((SECONDS - T0))" | tee -a "$L/run.log"
for f in "$W"/traces/*.sqlite; do [ -e "$f" ] && gzip -6 -k "$f" & done
wait

cat > "$W/summary.py" <<'EOF'
# summary.txt from the logs, the Kineto traces and the sqlite exports; then picks the members of
# traces.tar.xz (budget 9.5 MB of gzipped files; a member over it is replaced by a copy cut to
# steps 10..14), written to pack.list.
import gzip, json, os, re, sqlite3, statistics, sys
from bisect import bisect_left, bisect_right
W, out = sys.argv[1], sys.argv[2]
L, T = os.path.join(W, "logs"), os.path.join(W, "traces")
PROGS = ["mlp", "gpt2_inf", "gpt2_train"]
LABELS = ["plain", "kineto", "kineto_noshapes", "kineto_stack", "nsys_ranges", "nsys_emit_nvtx",
          "nsys_ranges_osrt", "plain_rerun"]
STEP = re.compile(r"step\d+$")
lines = []
P = lines.append


def log_vals(prog, label):
    f = os.path.join(L, f"{prog}.{label}.log")
    v = {}
    if not os.path.exists(f):
        return v
    for ln in open(f, errors="replace"):
        w = ln.split()
        if len(w) >= 2 and w[0] in ("median_ms", "mean_ms"):
            for k, x in zip(w[0::2], w[1::2]):
                try:
                    v[k] = float(x)
                except ValueError:
                    pass
        if w and w[0] == "steps_ms":
            v["n"] = len(w) - 1
    return v


def count_in(sorted_ts, lo, hi):
    return bisect_right(sorted_ts, hi) - bisect_left(sorted_ts, lo)


_loaded = {}


def load_kineto(path):
    if path not in _loaded:
        _loaded[path] = json.load(gzip.open(path, "rt"))
    return _loaded[path]


def kineto_counts(path):
    d = load_kineto(path)
    ev = [e for e in d["traceEvents"] if e.get("ph") == "X" and "ts" in e]
    steps = sorted((e for e in ev if e.get("cat") == "user_annotation" and STEP.match(e.get("name", ""))),
                   key=lambda e: e["ts"])
    by = {}
    busy = []
    for e in ev:
        by.setdefault(e.get("cat"), []).append(e["ts"])
    for k in by:
        by[k].sort()
    gpu = sorted((e["ts"], e.get("dur", 0)) for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    gts = [g[0] for g in gpu]
    cats = ["cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "kernel", "gpu_memset", "gpu_memcpy",
            "python_function"]
    per = {c: [] for c in cats}
    durs = []
    for s in steps:
        lo, hi = s["ts"], s["ts"] + s["dur"]
        durs.append(s["dur"] / 1e3)
        for c in cats:
            k = count_in(by.get(c, []), lo, hi)
            if c == "user_annotation":
                k -= 1  # the step's own range
            per[c].append(k)
        i, j = bisect_left(gts, lo), bisect_right(gts, hi)
        busy.append(sum(g[1] for g in gpu[i:j]) / 1e3)
    n = len(steps)
    r = {"steps": n, "names": f"{steps[0]['name']}..{steps[-1]['name']}" if n else "-",
         "step_ms_median": statistics.median(durs) if n else float("nan"),
         "gpu_busy_ms_median": statistics.median(busy) if n else float("nan")}
    for c in cats:
        r[c] = sum(per[c]) / n if n else float("nan")
        r[c + "_min"] = min(per[c]) if n else 0
        r[c + "_max"] = max(per[c]) if n else 0
    return r, steps


def sqlite_counts(path):
    c = sqlite3.connect(path)
    tabs = {x[0] for x in c.execute("select name from sqlite_master where type='table'")}
    nv = c.execute("select n.start, n.end, coalesce(n.text, s.value) from NVTX_EVENTS n "
                   "left join StringIds s on s.id = n.textId").fetchall() if "NVTX_EVENTS" in tabs else []
    steps = sorted(((a, b, t) for a, b, t in nv if t and STEP.match(t) and b is not None), key=lambda x: x[0])
    nvs = sorted(x[0] for x in nv)
    rt = c.execute("select r.start, s.value from CUPTI_ACTIVITY_KIND_RUNTIME r left join StringIds s "
                   "on s.id = r.nameId").fetchall() if "CUPTI_ACTIVITY_KIND_RUNTIME" in tabs else []
    rts = sorted(x[0] for x in rt)
    drv = sorted(x[0] for x in rt if x[1] and x[1].startswith("cu") and not x[1].startswith("cuda"))
    kn = sorted(x[0] for x in c.execute("select start from CUPTI_ACTIVITY_KIND_KERNEL")) \
        if "CUPTI_ACTIVITY_KIND_KERNEL" in tabs else []
    po = sorted(x[0] for x in c.execute("select start from PROFILER_OVERHEAD")) if "PROFILER_OVERHEAD" in tabs else []
    per = {"runtime": [], "runtime_driver": [], "nvtx": [], "kernel": [], "profiler_overhead": []}
    durs = []
    for a, b, _ in steps:
        durs.append((b - a) / 1e6)
        per["runtime"].append(count_in(rts, a, b))
        per["runtime_driver"].append(count_in(drv, a, b))
        per["nvtx"].append(count_in(nvs, a, b) - 1)  # minus the step's own range
        per["kernel"].append(count_in(kn, a, b))
        per["profiler_overhead"].append(count_in(po, a, b))
    n = len(steps)
    r = {"steps": n, "names": f"{steps[0][2]}..{steps[-1][2]}" if n else "-",
         "step_ms_median": statistics.median(durs) if n else float("nan")}
    for k, v in per.items():
        r[k] = sum(v) / n if n else float("nan")
        r[k + "_min"] = min(v) if n else 0
        r[k + "_max"] = max(v) if n else 0
    c.close()
    return r, steps


vals = {(p, l): log_vals(p, l) for p in PROGS for l in LABELS}
P("# Host step times (ms): median / mean / min / max / stdev of the timed steps, time.perf_counter()")
P("# around step + torch.cuda.synchronize(); n = timed steps")
P(f"{'program':<11} {'run':<17} {'n':>3} {'median_ms':>10} {'mean_ms':>10} {'min_ms':>10} {'max_ms':>10} "
  f"{'stdev_ms':>9} {'x_plain':>8}")
for p in PROGS:
    base = vals[(p, "plain")].get("median_ms")
    for l in LABELS:
        v = vals[(p, l)]
        if "median_ms" not in v:
            P(f"{p:<11} {l:<17} {'-':>3} {'missing':>10}")
            continue
        x = f"{v['median_ms'] / base:.3f}" if base else "-"
        P(f"{p:<11} {l:<17} {v.get('n', 0):>3} {v['median_ms']:>10.4f} {v.get('mean_ms', 0):>10.4f} "
          f"{v.get('min_ms', 0):>10.4f} {v.get('max_ms', 0):>10.4f} {v.get('stdev_ms', 0):>9.4f} {x:>8}")
P("")

kin, sq, stepinfo = {}, {}, {}
for p in PROGS:
    for l in ("kineto", "kineto_noshapes"):
        f = os.path.join(T, f"{p}.{l}.json.gz")
        if os.path.exists(f):
            try:
                kin[(p, l)], stepinfo[f] = kineto_counts(f)
            except Exception as e:
                P(f"# {p} {l}: trace unreadable: {type(e).__name__}: {e}")
    for l in ("nsys_ranges", "nsys_emit_nvtx"):
        f = os.path.join(T, f"{p}.{l}.sqlite")
        if os.path.exists(f):
            try:
                sq[(p, l)], stepinfo[f] = sqlite_counts(f)
            except Exception as e:
                P(f"# {p} {l}: sqlite unreadable: {type(e).__name__}: {e}")

P("# Kineto traces: events per step (mean over the traced steps; [min-max]), counted by start timestamp")
P("# inside the step's record_function range; user_annotation excludes the step's own range;")
P("# step_ms = median step range length in the trace; gpu_busy_ms = median per step of the summed")
P("# kernel + memcpy + memset durations")
P(f"{'program':<11} {'trace':<16} {'steps':<12} {'cpu_op':>16} {'cuda_runtime':>16} {'cuda_driver':>14} "
  f"{'user_annot':>12} {'kernel':>14} {'memset':>8} {'memcpy':>8} {'step_ms':>8} {'gpu_busy_ms':>11}")


def mm(r, k, w):
    s = f"{r[k]:.1f}[{r[k + '_min']}-{r[k + '_max']}]"
    return f"{s:>{w}}"


for (p, l), r in kin.items():
    P(f"{p:<11} {l:<16} {r['names']:<12} {mm(r, 'cpu_op', 16)} {mm(r, 'cuda_runtime', 16)} {mm(r, 'cuda_driver', 14)} "
      f"{mm(r, 'user_annotation', 12)} {mm(r, 'kernel', 14)} {r['gpu_memset']:>8.1f} {r['gpu_memcpy']:>8.1f} "
      f"{r['step_ms_median']:>8.3f} {r['gpu_busy_ms_median']:>11.3f}")
P("")
P("# Nsight Systems sqlite exports: rows per step (mean; [min-max]) with start inside the step's NVTX")
P("# range: CUPTI_ACTIVITY_KIND_RUNTIME (runtime; driver = those of them named cu* but not cuda*),")
P("# NVTX_EVENTS (excluding the step's own range), CUPTI_ACTIVITY_KIND_KERNEL, PROFILER_OVERHEAD")
P(f"{'program':<11} {'export':<16} {'steps':<12} {'runtime':>16} {'driver':>14} {'nvtx':>16} {'kernel':>14} "
  f"{'prof_ovh':>10} {'step_ms':>8}")
for (p, l), r in sq.items():
    P(f"{p:<11} {l:<16} {r['names']:<12} {mm(r, 'runtime', 16)} {mm(r, 'runtime_driver', 14)} {mm(r, 'nvtx', 16)} "
      f"{mm(r, 'kernel', 14)} {r['profiler_overhead']:>10.1f} {r['step_ms_median']:>8.3f}")
P("")
P("# Derived host cost per recorded event: (median_run - median_plain) / events per step, in us.")
P("# Kineto runs: events = cpu_op + cuda_runtime per step (kineto_stack: those of the kineto trace).")
P("# nsys runs: events = runtime rows + NVTX rows per step (nsys_ranges_osrt: those of nsys_ranges).")
P(f"{'program':<11} {'run':<17} {'plain_ms':>9} {'run_ms':>9} {'extra_ms':>9} {'events':>9} {'from':<16} {'us_per_event':>12}")
src = {"kineto": ("k", "kineto"), "kineto_noshapes": ("k", "kineto_noshapes"), "kineto_stack": ("k", "kineto"),
       "nsys_ranges": ("s", "nsys_ranges"), "nsys_emit_nvtx": ("s", "nsys_emit_nvtx"),
       "nsys_ranges_osrt": ("s", "nsys_ranges")}
for p in PROGS:
    base = vals[(p, "plain")].get("median_ms")
    for l, (kind, fromk) in src.items():
        m = vals[(p, l)].get("median_ms")
        if kind == "k":
            r = kin.get((p, fromk))
            ev = r["cpu_op"] + r["cuda_runtime"] if r else None
        else:
            r = sq.get((p, fromk))
            ev = r["runtime"] + r["nvtx"] if r else None
        if base is None or m is None or not ev:
            P(f"{p:<11} {l:<17} {'-':>9} {'-':>9} {'-':>9} {'-':>9} {fromk:<16} {'-':>12}")
            continue
        P(f"{p:<11} {l:<17} {base:>9.4f} {m:>9.4f} {m - base:>9.4f} {ev:>9.1f} {fromk:<16} {(m - base) * 1e3 / ev:>12.4f}")
open(os.path.join(out, "summary.txt"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines), flush=True)

# ---- members of traces.tar.xz
BUDGET = 9.5e6
items = []  # [gz path relative to W, size, raw path, kind]
for f in sorted(os.listdir(T)):
    full = os.path.join(T, f)
    if f.endswith(".json.gz") and ".steps" not in f:
        items.append([f"traces/{f}", os.path.getsize(full), full, "k"])
    elif f.endswith(".sqlite.gz") and ".steps" not in f:
        items.append([f"traces/{f}", os.path.getsize(full), full[:-3], "s"])


def cut(it):
    rel, size, raw, kind = it
    steps = stepinfo.get(raw)
    if not steps or len(steps) < 15:
        return None
    if kind == "k":
        lo, hi = steps[10]["ts"], steps[14]["ts"] + steps[14]["dur"]
        d = dict(load_kineto(raw))
        d["traceEvents"] = [e for e in d["traceEvents"] if "ts" not in e or e.get("ph") == "M"
                            or e.get("cat") == "Trace" or lo <= float(e["ts"]) <= hi]
        d["cut_to_steps"] = f"{steps[10]['name']}..{steps[14]['name']}"
        dst = raw[:-len(".json.gz")] + ".steps10-14.json.gz"
        with gzip.open(dst, "wt", compresslevel=6) as g:
            json.dump(d, g)
    else:
        lo, hi = steps[10][0], steps[14][1]
        dst_raw = raw[:-len(".sqlite")] + ".steps10-14.sqlite"
        if os.path.exists(dst_raw):
            os.remove(dst_raw)
        c = sqlite3.connect(raw)
        c.execute(f"vacuum into '{dst_raw}'")
        c.close()
        c = sqlite3.connect(dst_raw)
        tabs = [x[0] for x in c.execute("select name from sqlite_master where type='table'")]
        for t in tabs:
            cols = [x[1] for x in c.execute(f"pragma table_info({t})")]
            if "start" in cols and (t.startswith("CUPTI_") or t.startswith("NVTX") or t.startswith("OSRT")
                                    or t == "PROFILER_OVERHEAD"):
                c.execute(f"delete from {t} where start < ? or start > ?", (lo, hi))
        c.commit()
        c.execute("vacuum")
        c.close()
        dst = dst_raw + ".gz"
        with open(dst_raw, "rb") as fi, gzip.open(dst, "wb", compresslevel=6) as g:
            g.write(fi.read())
        os.remove(dst_raw)
    return [os.path.relpath(dst, W), os.path.getsize(dst), raw, kind + "cut"]


notes = []
while sum(i[1] for i in items) > BUDGET:
    full = [i for i in items if not i[3].endswith("cut")]
    if full:
        big = max(full, key=lambda i: i[1])
        try:
            new = cut(big)
        except Exception as e:
            new = None
            notes.append(f"cut failed {big[0]}: {type(e).__name__}: {e}")
        items.remove(big)
        if new:
            items.append(new)
            notes.append(f"replaced {big[0]} ({big[1]} bytes) by {new[0]} ({new[1]} bytes)")
        else:
            notes.append(f"left out {big[0]} ({big[1]} bytes)")
    else:
        big = max(items, key=lambda i: i[1])
        items.remove(big)
        notes.append(f"left out {big[0]} ({big[1]} bytes)")
with open(os.path.join(W, "pack.list"), "w") as f:
    for i in sorted(items):
        f.write(i[0] + "\n")
with open(os.path.join(L, "pack_notes.txt"), "w") as f:
    for i in sorted(items):
        f.write(f"kept {i[0]} {i[1]} bytes\n")
    for n in notes:
        f.write(n + "\n")
print("\n".join(notes), flush=True)
EOF
run_to $T_SUMMARY 60 "$L/summary.log" python3 "$W/summary.py" "$W" "$outdir"
tail -5 "$L/summary.log"
echo "summary done elapsed_s $((SECONDS - T0))" | tee -a "$L/run.log"
