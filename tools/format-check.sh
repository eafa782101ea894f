#!/usr/bin/env bash
# CI's formatting check: every tracked C++ and CUDA source is formatted by clang-format 14 with the
# repository's .clang-format; an unformatted file fails with its name (fix: clang-format-14 -i FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format-14 >/dev/null || tools/install-deps.sh --format
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h')
clang-format-14 --dry-run --Werror "${files[@]}"
echo "format-check: ${#files[@]} files formatted"
