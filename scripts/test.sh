#!/usr/bin/env bash
# The whole test suite: a gcc build with warnings as errors and a clang ASan+UBSan build with the
# libFuzzer targets, both running every test (unit, property, workload fidelity, fuzz corpus
# replays, brief fuzzing, the ClusterFuzzLite build), clang-tidy, a ThreadSanitizer build running
# the replay that overlaps the decoding, a clang-format check, and the fidelity check against
# PyTorch's recorded statistics, and the Python wheel built and installed in a fresh venv. The
# Python tests (allocsim.torch against PyTorch's CPU build, the fleet on Dask) run in the test
# environment of scripts/setup.sh; allocsim.trace's again in its second one (PyTorch's CUDA
# build without a GPU, with transformers, peft, Lightning, timm and torchvision).
# usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh  # every Python step runs in the test environment setup.sh made
allocsim_require_venv

# The CUDA Toolkit, where installed (nvcc on the PATH or in /usr/local/cuda), adds the CUDA backend
# to the gcc build and the wheel (its tests skip with no GPU).
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=$PATH:/usr/local/cuda/bin
fi

echo "== clang-format"
files=$(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find core backends sim -name '*.[ch]pp')
clang-format --dry-run --Werror $files

echo "== gcc, warnings as errors (and -Wconversion -Wsign-conversion in core/ and sim/)"
echo "$(cmake --version | head -n 1); nvcc: $(command -v nvcc || echo none); $("$allocsim_python" -c \
  'import sys, torch; print("Python", sys.version.split()[0], "torch", torch.__version__)')"
CC=gcc CXX=g++ scripts/build.sh build-gcc -DALLOCSIM_WERROR=ON
(cd build-gcc && ctest --output-on-failure -j "$(nproc)")

echo "== allocsim.trace under PyTorch's CUDA build on this machine without a GPU, with the libraries"
echo "   the user jobs use ($("$allocsim_trace_python" -c 'import torch; print("torch", torch.__version__)'))"
[ -x "$allocsim_trace_python" ] || { echo "$allocsim_trace_python: run scripts/setup.sh"; exit 1; }
"$allocsim_trace_python" python/tests/trace_test.py build-gcc/python workloads
"$allocsim_trace_python" python/tests/trace_scripts_test.py build-gcc/python workloads

echo "== clang-tidy (.clang-tidy's checks) over core/ and sim/"
# (Its count of the system headers' warnings it suppressed is left out of the log.)
git ls-files 'core/*.cpp' 'sim/*.cpp' | grep -v -e '/tests/' -e '^sim/gpu/' |
  xargs -P "$(nproc)" -n 4 clang-tidy -p build-gcc --quiet 2> >(grep -v 'warnings generated' >&2)

echo "== clang, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer targets fuzzed briefly"
CC=clang CXX=clang++ scripts/build.sh build-asan -DALLOCSIM_WERROR=ON -DALLOCSIM_SANITIZE=ON \
  -DALLOCSIM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j "$(nproc)")

echo "== gcc, ThreadSanitizer: the replay that runs alongside the decoding"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build-tsan "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOCSIM_CUDA=OFF \
  -DALLOCSIM_WERROR=ON -DPython3_EXECUTABLE="$allocsim_python" \
  -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
  >/dev/null
cmake --build build-tsan -j "$(nproc)" --target replay_tests allocsim
export TSAN_OPTIONS=halt_on_error=1
build-tsan/replay_tests --gtest_filter='*Streamed*' --gtest_brief=1
for w in gpt2gen_default llama-varlen-bf16_expandable_cap100 llama-varlen-bf16_default_stacks_window; do
  status=0
  build-tsan/allocsim replay "workloads/$w.pickle.gz" -q || status=$?
  [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || { echo "tsan: $w: exit status $status"; exit 1; }
done
unset TSAN_OPTIONS

# Every recording against PyTorch's own statistics: the shipped ones, and those kept outside the
# repository (ALLOCSIM_FIDELITY_DIR, with NAME.pickle.gz and NAME.json as in workloads/) where
# present. Each must replay exactly: the check fails the run otherwise.
echo "== fidelity against workloads/"
"$allocsim_python" tools/check_fidelity.py build-gcc/allocsim workloads
"$allocsim_python" tools/check_fidelity.py build-gcc/allocsim workloads/empty_cache
"$allocsim_python" tools/check_fidelity.py build-gcc/allocsim workloads/world_sizes
"$allocsim_python" tools/check_fidelity.py build-gcc/allocsim workloads/nested_pools
"$allocsim_python" tools/check_fidelity.py build-gcc/allocsim workloads/mempool_options
fidelity=${ALLOCSIM_FIDELITY_DIR:-../shared/workloads}
if [ -d "$fidelity" ]; then
  echo "== fidelity against $fidelity"
  "$allocsim_python" tools/check_fidelity.py build-gcc/allocsim "$fidelity"
fi
echo "== the wheel: built offline, installed into a fresh venv, run outside the build tree"
# (Built with Debian's CMake 3.25 where it is installed, the gcc build above with the one on the
# PATH, CMake 4 on the project's machines: both versions configure the CUDA backend.)
rm -rf build-wheel/dist
debian_cmake=()
[ -x /usr/bin/cmake ] && debian_cmake=(ALLOCSIM_CMAKE=/usr/bin/cmake)
env "${debian_cmake[@]}" scripts/build_wheel.sh build-wheel/dist >/dev/null
"$allocsim_python" python/tests/wheel_test.py build-wheel/dist/allocsim-*.whl workloads
echo "all tests passed"
