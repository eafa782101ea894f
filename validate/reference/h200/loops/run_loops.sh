#!/usr/bin/env bash
# Captures on one GPU, in one run: (1) the core reference set the end-to-end tests stand on
# (validate/workloads/core: 3-stream pipeline, elementwise chains, copies, a transformer block in
# fp32 and bf16, eager and graph decoding; Nsight Systems, CUDA + NVTX, node-level graph trace);
# (2) loops with one bottleneck each (validate/workloads/loops.py: pageable vs pinned copies,
# copies in series vs prefetched, host-bound layers in fp32 / TF32 / autocast) timed unprofiled in
# three processes each, one Kineto trace of each; (3) Hugging Face workloads at host-bound and
# GPU-bound sizes (BERT-base 1x128: fp32, CUDA graph, TF32, autocast; GPT-2 medium 4x512: fp32,
# TF32, autocast) timed unprofiled, one Kineto fp32 trace of each.
# Every command runs under `timeout`, capped by one deadline (LOOPS_DEADLINE_S, default 540 s); the
# results are packed after each part, so a run cut short keeps what finished.
# Needs Nsight Systems' environment folder .nsys/ in the repository root.
# Usage: bash validate/reference/h200/loops/run_loops.sh OUTDIR
# OUTDIR gets: core.tar.xz (*.sqlite, *.log of the core set), loops.tar.xz (logs, Kineto traces), env.txt.
set -u
outdir=${1:?usage: run_loops.sh OUTDIR}
root=$(cd "$(dirname "$0")/../../../.." && pwd)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p "$outdir"
deadline=$((SECONDS + ${LOOPS_DEADLINE_S:-540}))
C=/tmp/core_work L=/tmp/loops_work
rm -rf "$C" "$L"; mkdir -p "$C" "$L/k"
left() { local l=$((deadline - SECONDS)); [ "$l" -gt "$1" ] && echo "$1" || echo "$((l > 5 ? l : 5))"; }
run() {  # run NAME SECONDS CMD...: stdout+stderr to $L/NAME.log
  local name=$1 t; t=$(left "$2"); shift 2
  [ $((deadline - SECONDS)) -gt 10 ] || { echo "skipped $name (deadline)"; return; }
  timeout "$t" "$@" > "$L/$name.log" 2>&1; echo "$name rc $? at ${SECONDS}s"
}
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  nproc; uname -r
} > "$outdir/env.txt" 2>&1
cat "$outdir/env.txt"

# (2) loops, unprofiled in three processes, then one Kineto trace each.
lp="python3 $root/validate/workloads/loops.py"
for r in 1 2 3; do
  run copy.plain$r 40 $lp --loop copy --mode pageable,pinned
  run stage.plain$r 40 $lp --loop stage --mode serial,prefetch
  run host.plain$r 40 $lp --loop host --mode fp32,tf32,autocast --steps 50 $([ $r = 1 ] && echo --count)
done
run copy.kineto 40 $lp --loop copy --mode pageable,pinned --kineto "$L/k/copy.json"
run stage.kineto 40 $lp --loop stage --mode serial,prefetch --kineto "$L/k/stage.json"
run host.kineto 40 $lp --loop host --mode fp32,autocast --kineto "$L/k/host.json"
gzip -f "$L"/k/*.json
tar cJf "$outdir/loops.tar.xz" -C "$L" .

# (3) Hugging Face workloads.
hf="python3 $root/validate/workloads/hf_models.py"
run bert_base.plain 70 $hf --workload bert_base-inf-1x128 --mode fp32,graph,tf32,autocast-bf16 --kineto "$L/k" --logdir "$L" --steps 30
run gpt2_medium.plain 70 $hf --workload gpt2_medium-inf-4x512 --mode fp32,tf32,autocast-bf16 --kineto "$L/k" --logdir "$L"
rm -f "$L"/k/*graph*.kineto.json.gz
tar cJf "$outdir/loops.tar.xz" -C "$L" .

# (1) the core set under Nsight Systems.
source "$root/.nsys/env.sh"
cp "$root"/validate/workloads/core/* "$C/"
(cd "$C" && for p in streams chain memcpy; do nvcc -O3 -arch=sm_90 -o $p $p.cu || echo "nvcc $p failed"; done)
prof() {
  local name=$1; shift
  [ $((deadline - SECONDS)) -gt 30 ] || { echo "skipped $name (deadline)"; return; }
  (cd "$C" && timeout "$(left 90)" nsys profile -o "$C/$name" --force-overwrite true -t cuda,nvtx --cuda-graph-trace=node \
     --sample=none --cpuctxsw=none "$@" > "$C/$name.log" 2>&1 &&
   timeout "$(left 60)" nsys export --type sqlite --force-overwrite true -o "$C/$name.sqlite" "$C/$name.nsys-rep" > /dev/null 2>&1)
  echo "== $name $(stat -c %s "$C/$name.sqlite" 2>&1) at ${SECONDS}s"
}
prof decode_eager python3 decode.py eager
prof decode_graph python3 decode.py graph
prof chain ./chain
prof memcpy ./memcpy
prof streams_base ./streams 1
prof streams_fast ./streams 2
prof block_fp32 python3 block.py fp32
prof block_bf16 python3 block.py bf16
(cd "$C" && tar cJf "$outdir/core.tar.xz" *.sqlite *.log)
ls -la "$outdir"
