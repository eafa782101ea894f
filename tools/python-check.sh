#!/usr/bin/env bash
# CI's check of the Python package: `pip install .` into a fresh virtual environment
# (scikit-build-core and pybind11 come from PyPI into pip's isolated build; the C++ library builds
# into the module, the bneck command beside it; in build-ci when CI has built there), then the
# package's pytest suite (python/tests, with pandas for the DataFrames) and the README's one-liner.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh --python
d=$(mktemp -d)
trap '[ -f "$d/CMakeCache.txt" ] && cp "$d/CMakeCache.txt" build-ci/CMakeCache.txt; rm -rf "$d"' EXIT
python3 -m venv "$d/venv"
# After CI's build (the ci preset compiles position-independent code, as the module needs), pip
# builds in build-ci: only the module and the command are compiled again (1.7 min instead of 6).
# Its configuration (this venv's Python, the wheel's folders) is put back afterwards: the next
# `cmake --build build-ci` configures again as the ci preset did, not with a Python that is gone.
reuse=()
if [ -f build-ci/CMakeCache.txt ]; then
  reuse=(--config-settings=build-dir=build-ci)
  cp build-ci/CMakeCache.txt "$d/CMakeCache.txt"
fi
"$d/venv/bin/pip" install -q --disable-pip-version-check "${reuse[@]}" . pytest pandas
BNECK_EXE="$d/venv/bin/bneck" "$d/venv/bin/python" -m pytest -q python/tests
"$d/venv/bin/python" -c "import bneck; print(bneck.load('traces/data/demo_pipeline.sqlite').replay().makespan_ns)"
echo "python-check: the package installs and its tests pass"
