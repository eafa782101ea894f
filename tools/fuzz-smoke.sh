#!/usr/bin/env bash
# CI's short fuzz run: builds the libFuzzer harnesses of tests/fuzz with clang, ASan and
# UBSan (the `fuzz` preset) and runs each for BNECK_FUZZ_SECONDS (default 8) on its seeds,
# tests/fuzz/regressions and $BNECK_EXTRA_TRACES/fuzz-findings, so every known reproducer runs first under the
# sanitizers. A crash, sanitizer report, leak, timeout (20 s an input) or an input taking more than
# 4 GiB fails the run (libFuzzer exits non-zero; the input is saved under build-fuzz/tests/fuzz).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh --fuzz
cmake --preset fuzz -DBNECK_FUZZ_SECONDS="${BNECK_FUZZ_SECONDS:-8}" >/dev/null
rc=0
cmake --build build-fuzz --target fuzz >build-fuzz/fuzz.log 2>&1 || rc=$?
grep -E "^Done [0-9]+ runs|ERROR|SUMMARY" build-fuzz/fuzz.log || true
if [ "$rc" -ne 0 ]; then tail -60 build-fuzz/fuzz.log; echo "fuzz-smoke: a harness failed (log: build-fuzz/fuzz.log)" >&2; exit 1; fi
echo "fuzz-smoke: every harness ran ${BNECK_FUZZ_SECONDS:-8} s clean"
