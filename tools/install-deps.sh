#!/usr/bin/env bash
# Installs bneck's build dependencies from Debian packages (skips what is already installed).
# --fuzz: also clang and its sanitizer/libFuzzer runtimes (the `fuzz` preset, tools/fuzz-smoke.sh);
# --format: clang-format 14 (tools/format-check.sh);
# --python: accepted for compatibility (python3-dev and python3-venv, for `pip install .`, are always installed).
# git: the commit `bneck --version` names; dpkg-dev: `cpack -G DEB` (dpkg-shlibdeps); Open MPI: the
# distributed sweep (`mpirun -np N bneck sweep`, optional at build time); chromium: the HTML report's
# test in a real browser (tests/report_check.sh).
set -euo pipefail
pkgs=(cmake ninja-build g++ libboost-graph-dev nlohmann-json3-dev libsimdjson-dev libcli11-dev libeigen3-dev catch2
      libsqlite3-dev zlib1g-dev libisal-dev sqlite3 libre2-dev pkg-config git dpkg-dev libopenmpi-dev openmpi-bin chromium python3 python3-venv python3-dev python3-pip)
for a in "$@"; do
  case "$a" in
    --fuzz) pkgs+=(clang-14 libclang-rt-14-dev) ;;
    --format) pkgs+=(clang-format-14) ;;
    --python) ;;  # (the Python headers and venv are in the default list now)
  esac
done
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
