#!/usr/bin/env bash
# Ground truth for the contention model, on the GPU machine (one call):
#   pairs.py under nsys (one H200) -> pairs.sqlite, and unprofiled (CUDA-event times) -> pairs.log;
#   gemm_allreduce.py on 2 GPUs when there are 2 (Kineto per rank) -> gemm_ar_rank{0,1}.json.gz.
#   pairs.cu (copy kernels at full and half occupancy, cuBLAS GEMMs, D2D copies) the same way ->
#   pairs_k.log, pairs_k.sqlite.xz.
# Usage: validate/reference/h200/concurrency/run.sh OUTDIR   (Nsight Systems' tools folder in .nsys/)
set -u
out=${1:?usage: run.sh OUTDIR}
here=$(cd "$(dirname "$0")/../../../concurrency" && pwd)  # the measurement programs
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$out"
nvcc -O3 -arch=sm_90 -o /tmp/pairs_k "$here/pairs.cu" -lcublas || exit 1
/tmp/pairs_k > "$out/pairs_k.log" 2>&1
python3 "$here/pairs.py" > "$out/pairs.log" 2>&1
if [ -f .nsys/env.sh ]; then
  source .nsys/env.sh
  timeout 300 nsys profile -o /tmp/pairs_k --force-overwrite true -t cuda,nvtx /tmp/pairs_k > "$out/pairs_k_nsys.log" 2>&1
  timeout 200 nsys export --type sqlite --force-overwrite true -o /tmp/pairs_k.sqlite /tmp/pairs_k.nsys-rep > /dev/null 2>&1
  xz -T4 -c /tmp/pairs_k.sqlite > "$out/pairs_k.sqlite.xz"
  timeout 300 nsys profile -o /tmp/pairs --force-overwrite true -t cuda,nvtx --cuda-graph-trace=node python3 "$here/pairs.py" > "$out/pairs_nsys.log" 2>&1
  timeout 200 nsys export --type sqlite --force-overwrite true -o /tmp/pairs.sqlite /tmp/pairs.nsys-rep > /dev/null 2>&1
  xz -T4 -c /tmp/pairs.sqlite > "$out/pairs.sqlite.xz"
fi
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  python3 "$here/gemm_allreduce.py" /tmp/gar > "$out/gemm_ar.log" 2>&1
  for f in /tmp/gar/*.json; do gzip -9 -c "$f" > "$out/$(basename "$f").gz"; done
fi
ls -la "$out"
