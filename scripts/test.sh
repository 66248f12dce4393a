#!/usr/bin/env bash
# The whole test suite: a gcc build with warnings as errors and a clang ASan+UBSan build with the
# libFuzzer targets, both running every test (unit, property, workload fidelity, fuzz corpus
# replays, brief fuzzing, the ClusterFuzzLite build), and a clang-format check.
# usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# The CUDA Toolkit, where installed, adds the CUDA backend to the gcc build (its tests skip with no GPU).
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=$PATH:/usr/local/cuda/bin; fi

echo "== clang-format"
files=$(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find core backends sim -name '*.[ch]pp')
clang-format --dry-run --Werror $files

echo "== gcc, warnings as errors"
CC=gcc CXX=g++ scripts/build.sh build-gcc -DALLOCSIM_WERROR=ON
(cd build-gcc && ctest --output-on-failure -j "$(nproc)")

echo "== clang, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer targets fuzzed briefly"
CC=clang CXX=clang++ scripts/build.sh build-asan -DALLOCSIM_WERROR=ON -DALLOCSIM_SANITIZE=ON \
  -DALLOCSIM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j "$(nproc)")

shared=../shared
if [ -x "$shared/tools/check_fidelity.py" ] && [ -d "$shared/workloads" ]; then
  echo "== fidelity against the shared workloads"
  python3 "$shared/tools/check_fidelity.py" build-gcc/allocsim "$shared/workloads" || true
fi
echo "all tests passed"
