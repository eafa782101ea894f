#!/usr/bin/env bash
# CI's check of the Python package: `pip install .` into a fresh virtual environment
# (scikit-build-core and pybind11 come from PyPI into pip's isolated build; the C++ library builds
# into the module, the bneck command beside it), then the package's pytest suite (python/tests,
# with pandas for the DataFrames) and the README's one-liner.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh --python
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
python3 -m venv "$d/venv"
"$d/venv/bin/pip" install -q --disable-pip-version-check . pytest pandas
BNECK_EXE="$d/venv/bin/bneck" "$d/venv/bin/python" -m pytest -q python/tests
"$d/venv/bin/python" -c "import bneck; print(bneck.load('traces/data/demo_pipeline.sqlite').replay().makespan_ns)"
echo "python-check: the package installs and its tests pass"
