#!/usr/bin/env bash
# The validate target's steps (cmake --build build --target validate): measure this machine's GPU,
# calibrate bneck's model for it, report the held-out accuracy, install the overlay.
#   1. refuse (exit 2, one line) without a GPU, with a driver too old (the benchmark says), or with
#      a GPU busy with other work;
#   2. run the microbenchmarks (validate/bench) -> OUT/measurements.json, and the NCCL collectives
#      when 2+ GPUs are visible -> OUT/collectives.json;
#   3. the base spec: the matching preset, else one made from the device's properties
#      (`bneck hw from-device`, installed so that the overlay can extend it);
#   4. calibrate -> OUT/<base>-calibrated.json; report -> OUT/report.txt/.json/.svg; a one-screen
#      summary; install the overlay (`bneck hw install`) unless --no-install.
# Usage: validate.sh --out DIR --bneck BNECK [--bench BENCH] [--nccl NCCL] [--measurements FILE...]
#                    [--device N] [--quick] [--no-install]
# --measurements skips steps 1-2 (calibration and report only: what runs without a GPU).
# The GPU: --device N, else $BNECK_VALIDATE_DEVICE, else $CUDA_VISIBLE_DEVICES as set, else GPU 0.
set -euo pipefail
die() { echo "bneck validate: $*" >&2; exit 2; }
out="" bneck="" bench="" nccl="" device="${BNECK_VALIDATE_DEVICE:-}" quick="" install=1
meas=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --bneck) bneck=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    --nccl) nccl=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --quick) quick=--quick; shift ;;
    --no-install) install=0; shift ;;
    --measurements) shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do meas+=("$1"); shift; done ;;
    *) die "unknown argument $1" ;;
  esac
done
[ -n "$out" ] && [ -n "$bneck" ] || die "usage: validate.sh --out DIR --bneck BNECK [--bench BENCH] [--measurements FILE...]"
[ -x "$bneck" ] || die "$bneck: not an executable (build the bneck target first)"
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
if [ ${#meas[@]} -eq 0 ]; then
  [ -n "$bench" ] && [ -x "$bench" ] || die "the microbenchmarks were not built (no CUDA compiler when configured)"
  command -v nvidia-smi > /dev/null 2>&1 || die "no NVIDIA driver here (nvidia-smi not found)"
  nvidia-smi -L 2> /dev/null | grep -q '^GPU' || die "no NVIDIA GPU found (nvidia-smi -L lists none)"
  [ -n "$device" ] && export CUDA_VISIBLE_DEVICES="$device"
  idx=${CUDA_VISIBLE_DEVICES:-0}; idx=${idx%%,*}
  # Busy: other processes computing on it, or utilization while nothing of ours runs.
  apps=$(nvidia-smi -i "$idx" --query-compute-apps=pid --format=csv,noheader 2> /dev/null | grep -c '[0-9]' || true)
  util=$(nvidia-smi -i "$idx" --query-gpu=utilization.gpu --format=csv,noheader,nounits 2> /dev/null | tr -dc '0-9' || true)
  [ "${apps:-0}" -eq 0 ] || die "GPU $idx is busy with other work ($apps compute processes): its figures would not hold"
  [ -z "$util" ] || [ "$util" -le 10 ] || die "GPU $idx is busy with other work ($util % utilization): its figures would not hold"
  commit=$(git -C "$here" rev-parse --verify -q HEAD 2> /dev/null | tr -cd '0-9a-f' || true)
  echo "bneck validate: measuring $(nvidia-smi -i "$idx" --query-gpu=name --format=csv,noheader 2> /dev/null || echo "GPU $idx") (GPU $idx)..."
  rc=0
  "$bench" $quick --commit "${commit:-unknown}" > "$out/measurements.json.part" || rc=$?
  [ $rc -eq 0 ] || { rm -f "$out/measurements.json.part"; [ $rc -eq 2 ] && exit 2; die "the microbenchmarks failed (exit $rc)"; }
  mv "$out/measurements.json.part" "$out/measurements.json"
  meas=("$out/measurements.json")
  visible=$(nvidia-smi -L | grep -c '^GPU')
  [ -n "${CUDA_VISIBLE_DEVICES:-}" ] && visible=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
  if [ "$visible" -ge 2 ] && [ -n "$nccl" ] && [ -x "$nccl" ]; then
    echo "bneck validate: NCCL collectives on $visible GPUs..."
    NCCL_NVLS_ENABLE=0 "$nccl" --gpus "$visible" > "$out/collectives.json" && meas+=("$out/collectives.json")
  fi
fi
# The base spec.
read -r kind base path < <("$bneck" hw from-device "${meas[0]}" -o "$out/base-spec.json")
if [ "$kind" = spec ]; then
  echo "bneck validate: no preset matches this GPU; base spec $base from its device properties ($path; peaks guessed by architecture)"
  [ $install -eq 1 ] && "$bneck" hw install "$path" > /dev/null
  [ $install -eq 1 ] || base="$path"
fi
name="$(basename "$base" .json)-calibrated"
overlay="$out/$name.json"
"$bneck" calibrate "${meas[@]}" --base "$base" --name "$name" -o "$overlay" > "$out/calibrate.log"
"$bneck" validate-report "${meas[@]}" --hw "$overlay" --json "$out/report.json" --svg "$out/report.svg" > "$out/report.txt"
where="$overlay (not installed)"
if [ $install -eq 1 ]; then where=$("$bneck" hw install "$overlay" | sed 's/^installed //'); fi
{
  echo "== bneck validate: $(head -1 "$out/report.txt")"
  sed -n '2,$p' "$out/report.txt"
  echo "overlay: $where"
  echo "report: $out/report.txt, report.json, report.svg; measurements: ${meas[*]}"
} | tee "$out/summary.txt"
