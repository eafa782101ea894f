#!/usr/bin/env bash
# bf16 autocast and torch.compile together on Hugging Face models: per model, one process in fp32
# (timed unprofiled, then traced with shapes), another in bf16 autocast and compiled under it
# (`--mode autocast-bf16,compile-autocast`: each timed unprofiled, then traced).
# Usage, from the repository root: validate/reference/h100/autocast_compile/run.sh DIR WORKLOAD...
PAIR=autocast-bf16,compile-autocast TAG=acc exec "$(dirname "$0")/../tf32_compile/run.sh" "$@"
