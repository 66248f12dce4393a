#!/usr/bin/env bash
# The performance figures in one go: a Release build, the Google Benchmark suite (JSON), and the
# end-to-end timings of docs/performance.md's table (allocsim replay against zcat and Python's unpickling
# of the same file, interleaved).
# usage: scripts/bench.sh OUTDIR [BUILD_DIR [CMAKE_ARGS...]]
#   OUTDIR gets bench.json (and its bench_summary.txt), end_to_end.txt and cpu.txt. On a machine
#   without libdeflate-dev, pass -DLIBDEFLATE_INCLUDE_DIR=DIR -DLIBDEFLATE_LIBRARY=DIR/libdeflate.a
#   (the inflate is zlib's otherwise). With ALLOCSIM_PREBUILT=1, BUILD_DIR's allocsim and
#   allocsim_bench are run as they are, for a machine without the build's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
dir=${2:-build-bench}
shift $(($# < 2 ? $# : 2))
mkdir -p "$out"
(lscpu 2>/dev/null || cat /proc/cpuinfo) > "$out/cpu.txt"
if [ "${ALLOCSIM_PREBUILT:-0}" != 1 ]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S . -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DALLOCSIM_CUDA=OFF \
    -DALLOCSIM_TESTS=OFF "$@" >/dev/null
  grep -q 'LIBDEFLATE_LIBRARY:FILEPATH=.*libdeflate' "$dir/CMakeCache.txt" ||
    echo "note: no libdeflate; gzip is inflated with zlib (slower)" >&2
  cmake --build "$dir" -j "$(nproc)" --target allocsim allocsim_bench >/dev/null
fi

ALLOCSIM_WORKLOADS_DIR=$PWD/workloads "$dir/allocsim_bench" --benchmark_format=json --benchmark_repetitions=5 \
  --benchmark_out="$out/bench.json" --benchmark_out_format=json >/dev/null
scripts/bench_summary.py "$out/bench.json" | tee "$out/bench_summary.txt"

trace=workloads/gpt2gen_default.pickle.gz
seconds() {  # wall seconds of one run of the command
  local start=$EPOCHREALTIME
  "$@" >/dev/null
  awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'
}
{
  echo "run allocsim_replay zcat python_pickle_load allocsim_plan_llama"
  for i in $(seq 10); do
    echo "$i $(seconds "$dir/allocsim" replay "$trace" -q)" \
      "$(seconds zcat "$trace")" \
      "$(seconds python3 -c "import gzip, pickle; pickle.load(gzip.open('$trace'))")" \
      "$(seconds "$dir/allocsim" plan workloads/llama-varlen-bf16_default.pickle.gz)"
  done
} > "$out/end_to_end.txt"
cat "$out/end_to_end.txt"
