#!/usr/bin/env bash
# Configures and builds allocsim. usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
# The tests' Python is the test environment's (scripts/python_env.sh) where setup.sh made it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh
dir=${1:-build}
shift || true
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
python=()
[ -x "$allocsim_python" ] && python=(-DPython3_EXECUTABLE="$allocsim_python")
cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "${python[@]}" "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
