#!/bin/bash -eu
# Builds allocsim's fuzz targets the way OSS-Fuzz and ClusterFuzzLite do: with the compilers,
# flags and fuzzing engine they set (CC, CXX, CFLAGS, CXXFLAGS, LIB_FUZZING_ENGINE), into $OUT,
# each with its seed corpus (TARGET_seed_corpus.zip), dictionary and options.
# Locally: .clusterfuzzlite/test_build.sh sets that environment and runs this.
src=${SRC_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${WORK:-/tmp}/allocsim-fuzz-build
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DALLOCSIM_TESTS=OFF -DALLOCSIM_FUZZ_ENGINE="$LIB_FUZZING_ENGINE"
targets="fuzz_allocator_ops fuzz_alloc_conf fuzz_snapshot_reader fuzz_rmm_csv fuzz_replay fuzz_streamed_replay"
cmake --build "$build" --target $targets
for t in $targets; do
  cp "$build/$t" "$OUT/"
  (cd "$src/fuzz/corpus/$t" && python3 -c 'import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for f in sorted(os.listdir(".")): z.write(f)' "$OUT/${t}_seed_corpus.zip")
  [ -f "$src/fuzz/$t.options" ] && cp "$src/fuzz/$t.options" "$OUT/"
done
cp "$src/fuzz/alloc_conf.dict" "$OUT/fuzz_alloc_conf.dict"
cp "$src/fuzz/snapshot.dict" "$OUT/fuzz_snapshot_reader.dict"
cp "$src/fuzz/snapshot.dict" "$OUT/fuzz_replay.dict"
cp "$src/fuzz/snapshot.dict" "$OUT/fuzz_streamed_replay.dict"
cp "$src/fuzz/rmm_csv.dict" "$OUT/fuzz_rmm_csv.dict"
