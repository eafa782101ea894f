#!/usr/bin/env bash
# Profile a command with Nsight Systems as bneck expects, export SQLite, print measured NVTX spans.
# Usage (on a GPU machine with nsys): tools/capture/capture.sh OUT_BASENAME COMMAND [ARGS...]
# Writes OUT_BASENAME.nsys-rep and OUT_BASENAME.sqlite. If NSYS_ENV is set, it is sourced first
# (e.g. NSYS_ENV=.nsys/env.sh on an H200).
set -euo pipefail
if [ $# -lt 2 ]; then echo "usage: $0 OUT_BASENAME COMMAND [ARGS...]" >&2; exit 2; fi
out=$1; shift
if [ -n "${NSYS_ENV:-}" ]; then source "$NSYS_ENV"; fi
command -v nsys >/dev/null || { echo "capture.sh: nsys not found on PATH" >&2; exit 2; }
nsys profile -o "$out" --force-overwrite true -t cuda,nvtx --cuda-graph-trace=node "$@"
nsys export --type sqlite --force-overwrite true -o "$out.sqlite" "$out.nsys-rep" >/dev/null
# Measured GPU span per NVTX range (definition: $BNECK_EXTRA_TRACES/traces/h200/README.md).
sqlite3 "$out.sqlite" "
WITH r AS (SELECT n.rowid AS rid, COALESCE(n.text, s.value) AS name, n.start, n.end, n.globalTid
           FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59),
     calls AS (SELECT r.rid, c.correlationId, c.globalTid FROM r JOIN CUPTI_ACTIVITY_KIND_RUNTIME c
               ON c.globalTid = r.globalTid AND c.start >= r.start AND c.start <= r.end),
     ops AS (SELECT start, end, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL
             UNION ALL SELECT start, end, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMCPY)
SELECT r.name, printf('%.4f ms', (MAX(o.end) - MIN(o.start)) / 1e6) FROM r JOIN calls c ON c.rid = r.rid
JOIN ops o ON o.correlationId = c.correlationId AND (o.globalPid >> 24) = (c.globalTid >> 24)
GROUP BY r.rid ORDER BY r.start;" 2>/dev/null || echo "capture.sh: no NVTX spans (table missing?)"
