#!/usr/bin/env bash
# Batch norm's host cost under autocast (eager loops) and held-out convolutional networks' traces.
# Usage (on the GPU machine, from the repository root): validate/reference/h100/cnn_bn/run.sh OUTDIR
#  1. validate/workloads/autocast_host.py, three processes each of conv_fp32, conv_bn_fp32,
#     conv_bn_tf32 and bn_mixed (autocast_host.txt);
#  2. validate/workloads/hf_models.py --mode fp32,tf32,autocast-bf16 --kineto of MobileNetV2 and
#     RegNetY at 16 images and ResNet-50 at 8 (k/, logs/).
set -u
D=${1:?usage: run.sh OUTDIR}; mkdir -p "$D/logs" "$D/k"
export PYTHONUNBUFFERED=1
for r in 1 2 3; do for p in conv_fp32 conv_bn_fp32 conv_bn_tf32 bn_mixed; do
  timeout 60 python3 validate/workloads/autocast_host.py --program $p >> "$D/autocast_host.txt" 2>&1
done; done
py=validate/workloads/hf_models.py
for w in mobilenet_v2-inf-16x224 regnet_y-inf-16x224 "resnet50-inf-16x224 --batch 8"; do
  n=${w%% *}; [ "$n" = "$w" ] || n=resnet50-inf-8x224
  timeout "${HF_TIMEOUT:-120}" python3 $py --workload $w --mode fp32,tf32,autocast-bf16 --kineto "$D/k" --logdir "$D/logs" > "$D/logs/$n.eager.out" 2>&1
  echo "$w rc $?"; grep -h "median_ms\|Error" "$D/logs/$n.eager.out" | head -6
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$D/env.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$D/env.txt"; date -u >> "$D/env.txt"
