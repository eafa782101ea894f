#!/usr/bin/env bash
# The HTML report in a real browser: bneck report on the bundled demo trace (with a
# what-if), opened by headless Chromium: the page's script ran to its end without a console message,
# every section is there, each timeline has one rectangle per device op of the trace (counted
# independently in the SQLite export), and a screenshot is saved beside the report.
# Usage: report_check.sh BNECK OUTDIR   (exit 77: no Chromium here, the test is skipped)
set -euo pipefail
bneck=$1 out=$2 here=$(cd "$(dirname "$0")/.." && pwd)
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "report_check: no chromium: skipped"; exit 77; }
mkdir -p "$out"
trace="$here/traces/data/demo_pipeline.sqlite"
"$bneck" report "$trace" --range 'iter.*' -o "$out/report_demo.html" --scale 2:kind=kernel
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$out/chromium-profile")
timeout 120 "$browser" "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "file://$out/report_demo.html" >"$out/report_dom.html" 2>"$out/chromium.log"
timeout 120 "$browser" "${flags[@]}" --window-size=1300,2200 --screenshot="$out/report_demo.png" "file://$out/report_demo.html" >/dev/null 2>&1
fail() { echo "report_check: $*" >&2; exit 1; }
grep -q '<title>bneck report: ok</title>' "$out/report_dom.html" || fail "the page's script did not finish"
# The page writes nothing to the console: any console line (an error, an uncaught exception) fails.
if grep -qE 'CONSOLE|Uncaught' "$out/chromium.log"; then grep -E 'CONSOLE|Uncaught' "$out/chromium.log" >&2; fail "console messages"; fi
for id in summary advice timelines critical-path overlap ranges roofline whatif; do
  grep -q "id=\"$id\"" "$out/report_dom.html" || fail "section $id missing"
done
want=$(sqlite3 -readonly "$trace" "select (select count(*) from CUPTI_ACTIVITY_KIND_KERNEL)+(select count(*) from CUPTI_ACTIVITY_KIND_MEMCPY)+(select count(*) from CUPTI_ACTIVITY_KIND_MEMSET)")
m=$(grep -o 'class="op m[ "]' "$out/report_dom.html" | wc -l)
s=$(grep -o 'class="op s[ "]' "$out/report_dom.html" | wc -l)
[ "$m" -eq "$want" ] && [ "$s" -eq "$want" ] || fail "timeline rectangles: measured $m, simulated $s, device ops $want"
[ -s "$out/report_demo.png" ] || fail "no screenshot"
echo "report_check: ok ($want device ops on each timeline; screenshot $out/report_demo.png)"
