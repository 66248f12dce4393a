#!/usr/bin/env bash
# Confirms on a real GPU what the simulation says, in one call on the GPU machine.
#
# usage (repo root, on the GPU machine): tools/gpu/confirm_on_gpu.sh OUTDIR [BUILD_DIR]
#   1. builds allocsim with the CUDA backend into BUILD_DIR (default build-gpu), unless it already
#      holds one (a machine without the Debian -dev packages gets binaries built elsewhere);
#   2. runs the CUDA tests, then again under compute-sanitizer (memcheck);
#   3. replays every shipped workload with `allocsim replay --backend cuda`: under its recorded
#      settings and cap, and under a cap at 70% of its simulated allocated peak (an OOM the
#      simulation predicts), each run writing every block's bytes and checking them when freed;
#   4. writes OUTDIR/gpu_confirmation.md: one table, simulated against GPU, for every run.
set -u
out=$1
build=${2:-build-gpu}
mkdir -p "$out/runs"
export PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)" 2>/dev/null
  nvcc --version | tail -n 1
} > "$out/gpu.txt"
cat "$out/gpu.txt"

if [ ! -x "$build/allocsim" ]; then
  echo "== building into $build"
  scripts/build.sh "$build" -DALLOCSIM_CUDA=ON -DALLOCSIM_BENCH=OFF || exit 1
fi

export ALLOCSIM_WORKLOADS_DIR=$PWD/workloads
# The summaries go into the table; the whole logs stay beside it.
summary='^\[==========\]|^\[  PASSED  \]|^\[  FAILED  \]|Failure|ERROR SUMMARY|LEAK SUMMARY'
echo "== CUDA tests (the device, and the replay on it)"
: > "$out/cuda_tests.log"
: > "$out/sanitizer.log"
for t in cuda_device_tests gpu_tests; do
  (cd "$build" && ./$t >> "$out/cuda_tests.log" 2>&1; echo "$t exit $?" >> "$out/cuda_tests.log")
  # memcheck; the tests' deliberate OOMs are API errors
  (cd "$build" && timeout 300 compute-sanitizer --tool memcheck --leak-check full \
    --report-api-errors no --error-exitcode 9 ./$t >> "$out/sanitizer.log" 2>&1
   echo "compute-sanitizer $t exit $?" >> "$out/sanitizer.log")
done
grep -E "$summary|exit" "$out/cuda_tests.log" | tee "$out/cuda_tests.txt"
echo "== CUDA tests under compute-sanitizer"
grep -E "$summary|exit" "$out/sanitizer.log" | tee "$out/sanitizer.txt"

echo "== every shipped workload on the GPU"
for trace in workloads/*.pickle.gz; do
  name=$(basename "$trace" .pickle.gz)
  cap=$(python3 -c "import json; print(json.load(open('workloads/$name.json')).get('cap_bytes') or '')")
  args=()
  [ -n "$cap" ] && args=(--memory-limit "$cap")
  timeout 240 "$build/allocsim" replay "$trace" --backend cuda "${args[@]}" -q \
    --json "$out/runs/$name.recorded.json" 2> "$out/runs/$name.recorded.err"
  echo "$name recorded: exit $?"
  # A cap the simulation says OOMs: 70% of the simulated allocated peak, OOMs skipped and counted.
  peak=$(python3 -c "import json; print(int(json.load(open('$out/runs/$name.recorded.json'))['cuda']['simulated']['peak_allocated_bytes'] * 0.7))" 2>/dev/null)
  [ -z "$peak" ] && continue
  timeout 240 "$build/allocsim" replay "$trace" --backend cuda --memory-limit "$peak" \
    --on-oom continue -q --json "$out/runs/$name.capped.json" 2> "$out/runs/$name.capped.err"
  echo "$name capped at $peak: exit $?"
done
python3 tools/gpu/confirmation_table.py "$out" > "$out/gpu_confirmation.md"
cat "$out/gpu_confirmation.md"
