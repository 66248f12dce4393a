#!/bin/bash -eu
# Runs build.sh with the environment OSS-Fuzz sets for an ASan + libFuzzer build, then checks
# that every target and seed corpus landed in $OUT and that each target runs its corpus.
# usage: .clusterfuzzlite/test_build.sh WORKDIR
work=$1
rm -rf "$work" && mkdir -p "$work/out" "$work/work"
export CC=clang CXX=clang++
export CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only -fsanitize=address -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link"
export CXXFLAGS="$CFLAGS"
export LIB_FUZZING_ENGINE="-fsanitize=fuzzer"
export OUT="$work/out" WORK="$work/work" SRC_DIR="$(cd "$(dirname "$0")/.." && pwd)"
"$(dirname "$0")/build.sh" > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
for t in fuzz_allocator_ops fuzz_alloc_conf fuzz_snapshot_reader fuzz_rmm_csv fuzz_replay fuzz_streamed_replay; do
  test -x "$OUT/$t" || { echo "missing $OUT/$t"; exit 1; }
  test -s "$OUT/${t}_seed_corpus.zip" || { echo "missing ${t}_seed_corpus.zip"; exit 1; }
  mkdir -p "$work/corpus/$t"
  (cd "$work/corpus/$t" && python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall()' "$OUT/${t}_seed_corpus.zip")
  "$OUT/$t" -runs=0 "$work/corpus/$t" > "$work/$t.log" 2>&1 || { tail -20 "$work/$t.log"; exit 1; }
done
echo "ClusterFuzzLite build OK: $(ls "$OUT" | wc -l) files in $OUT"
