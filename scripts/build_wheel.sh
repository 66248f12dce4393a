#!/usr/bin/env bash
# Builds the allocsim wheel into OUT_DIR (default dist/): the command statically linked to
# everything but glibc, inside the Python package. Offline: it uses the setuptools and wheel of
# the test environment (scripts/setup.sh) and the build tools installed, never downloads.
# ALLOCSIM_CMAKE: the cmake to configure with (default: the one on the PATH).
# usage: scripts/build_wheel.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh
allocsim_require_venv
out=${1:-dist}
"$allocsim_python" -m pip wheel --no-build-isolation --no-deps --no-index --wheel-dir "$out" . >&2
ls "$out"/allocsim-*.whl
