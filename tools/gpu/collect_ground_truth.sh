#!/usr/bin/env bash
# Ground truth for fidelity and what-if checks, gathered in one call on a GPU machine.
#
# usage (repo root, on the GPU machine): tools/gpu/collect_ground_truth.sh OUTDIR
# Uses tools/record_pytorch_trace.py and tools/replay_through_pytorch.py. Writes
# OUTDIR/ground_truth.tar.gz with
#   rec/NAME.{pickle.gz,json}: real jobs recorded under settings and caps no shipped trace covers;
#   rep/NAME.{pickle.gz,json}: a shipped trace's requests replayed through PyTorch's own allocator
#                              under another setting or cap (NAME = TRACE__SETTING);
#   gpu.txt: the GPU, driver and PyTorch version.
set -u
out=$1
work=/tmp/ground_truth
mkdir -p "$work/rec" "$work/rep" "$out"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"; } > "$work/gpu.txt"

rec() {  # NAME WORKLOAD STEPS ALLOC_CONF [CAP_BYTES]
  PYTORCH_CUDA_ALLOC_CONF=$4 timeout 150 python3 tools/record_pytorch_trace.py "$1" "$2" "$3" "$work/rec" ${5:-} \
    2>&1 | tail -n 1
}
rep() {  # TRACE NAME ALLOC_CONF [CAP_BYTES] [--no-history]
  PYTORCH_CUDA_ALLOC_CONF=$3 timeout 150 python3 tools/replay_through_pytorch.py "workloads/$1.pickle.gz" "$2" \
    "$work/rep" ${4:-0} ${5:-} 2>&1 | tail -n 1
}

collect() {
  # What-if replays through PyTorch itself: settings and caps.
  for t in llama-varlen-bf16_default gpt2_default; do
    rep $t ${t}__expandable expandable_segments:True
    rep $t ${t}__maxsplit128 max_split_size_mb:128
    rep $t ${t}__roundup4 roundup_power2_divisions:4
  done
  for cap in 10000000000 10600000000 11000000000 11500000000 12500000000; do
    rep llama-varlen-bf16_default llama-varlen-bf16_default__cap$cap "" $cap
  done
  rep llama-varlen-bf16_default llama-varlen-bf16_default__expandable_cap10500000000 expandable_segments:True 10500000000
  rep llama-varlen-bf16_default llama-varlen-bf16_default__gc08_cap11500000000 garbage_collection_threshold:0.8 11500000000
  for cap in 17000000000 17500000000 18000000000 18500000000; do
    rep gpt2_default gpt2_default__cap$cap "" $cap
  done
  rep gpt2_default gpt2_default__maxsplit128_cap18000000000 max_split_size_mb:128 18000000000
  # PyTorch's own speed on the same request streams (no history recording).
  for t in gpt2gen_default llama-varlen-bf16_default gpt2_default; do
    rep $t ${t}__timing "" 0 --no-history
  done
  # Real jobs under settings and caps the shipped traces do not cover.
  rec llama-varlen-bf16_roundup4 llama-varlen-bf16 12 roundup_power2_divisions:4
  rec llama-varlen-bf16_rounduplist llama-varlen-bf16 12 "roundup_power2_divisions:[64:8,256:4,1024:4,>:1]"
  rec gpt2_gc06_cap17500000000 gpt2 6 garbage_collection_threshold:0.6 17500000000
  rec llama-varlen-bf16_maxsplit256_gc07_cap11000000000 llama-varlen-bf16 12 \
    "max_split_size_mb:256,garbage_collection_threshold:0.7" 11000000000
  rec gpt2_expandable_cap16000000000 gpt2 6 expandable_segments:True 16000000000
  rec resnet50_default_cap3000000000 resnet50 6 "" 3000000000
  rec llama-varlen-bf16_default_cap10500000000 llama-varlen-bf16 12 "" 10500000000
}
export -f rec rep collect
export work
timeout 520 bash -c collect
tar -C "$work" -czf "$out/ground_truth.tar.gz" .
ls -la "$out"
