#!/usr/bin/env bash
# PyTorch's own caching allocator against allocsim's core on the same request streams. Builds
# bench/libtorch_replay.cpp (CMake target libtorch_replay) against the torch installed there.
#
# usage (repo root, on the GPU machine): tools/gpu/bench_libtorch.sh ALLOCSIM OUTDIR
#   ALLOCSIM: an allocsim binary (for `allocsim convert`); writes OUTDIR/libtorch_replay.jsonl
set -u
allocsim=$1
out=$2
mkdir -p "$out"
torch=$(python3 -c "import os, torch; print(os.path.dirname(torch.__file__))")
cmake -S . -B build-libtorch -DCMAKE_BUILD_TYPE=Release -DALLOCSIM_TESTS=OFF -DALLOCSIM_BENCH=OFF \
  -DALLOCSIM_TORCH_DIR="$torch" >/dev/null || exit 1
cmake --build build-libtorch -j "$(nproc)" --target libtorch_replay >/dev/null || exit 1
: > "$out/libtorch_replay.jsonl"
for name in gpt2gen_default llama-varlen-bf16_default gpt2_default resnet50_default; do
  "$allocsim" convert "workloads/$name.pickle.gz" "/tmp/$name.atrace" > /dev/null || exit 1
  build-libtorch/libtorch_replay "/tmp/$name.atrace" 3 | tee -a "$out/libtorch_replay.jsonl"
done
