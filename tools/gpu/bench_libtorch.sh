#!/usr/bin/env bash
# PyTorch's own caching allocator against allocsim's core on the same request streams (issue:
# speed). Builds bench/libtorch_replay.cpp against the torch installed on the GPU machine.
#
# usage (repo root, on the GPU machine): tools/gpu/bench_libtorch.sh ALLOCSIM OUTDIR
#   ALLOCSIM: an allocsim binary (for `allocsim convert`); writes OUTDIR/libtorch_replay.jsonl
set -u
allocsim=$1
out=$2
mkdir -p "$out"
torch=$(python3 -c "import os, torch; print(os.path.dirname(torch.__file__))")
cuda=${CUDA_HOME:-/usr/local/cuda}
g++ -std=c++20 -O2 -DNDEBUG -I. -I"$torch/include" -I"$cuda/include" \
  bench/libtorch_replay.cpp sim/compact_trace.cpp core/*.cpp backends/simulated_device.cpp \
  -L"$torch/lib" -lc10_cuda -lc10 -L"$cuda/lib64" -lcudart -Wl,-rpath,"$torch/lib" \
  -o /tmp/libtorch_replay || exit 1
: > "$out/libtorch_replay.jsonl"
for name in gpt2gen_default llama-varlen-bf16_default gpt2_default resnet50_default; do
  "$allocsim" convert "workloads/$name.pickle.gz" "/tmp/$name.atrace" > /dev/null || exit 1
  /tmp/libtorch_replay "/tmp/$name.atrace" 3 | tee -a "$out/libtorch_replay.jsonl"
done
