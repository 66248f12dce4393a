#!/usr/bin/env bash
# Builds the allocsim wheel into OUT_DIR (default dist/): the command statically linked to
# everything but glibc, inside the Python package. Offline: it uses the setuptools, wheel and
# build tools installed (scripts/setup.sh), never downloads.
# usage: scripts/build_wheel.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" -m pip wheel --no-build-isolation --no-deps --no-index --wheel-dir "$out" . >&2
ls "$out"/allocsim-*.whl
