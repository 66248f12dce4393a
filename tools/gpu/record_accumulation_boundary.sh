#!/usr/bin/env bash
# Gradient accumulation under caps on either side of the memory plan predicts for it: each job
# at its full batch as k micro-batches, capped (set_per_process_memory_fraction) a little below
# and a little above the predicted need, to check plan's verdicts.
# usage: tools/gpu/record_accumulation_boundary.sh OUTDIR  (writes OUTDIR/accumulation_boundary.tar.gz)
set -u
out=$1
mkdir -p "$out/boundary"
export PYTHONUNBUFFERED=1
run() {  # MODEL BATCH ACCUM CAP
  ACCUM=$3 timeout 300 python3 tools/gpu/record_sweep.py "$out/boundary" "$1" batch "$2" 3 "$4"
}
export -f run
export out
printf '%s\n' "llama-bf16 16 4 5000000000" "llama-bf16 16 4 5400000000" \
  "gpt2 16 8 5600000000" "gpt2 16 8 6100000000" "bert 32 4 5900000000" "bert 32 4 6300000000" \
  "llama-bf16 16 8 4000000000" "llama-bf16 16 8 4400000000" |
  xargs -P 4 -L 1 bash -c 'run "$@"' _
tar -C "$out" -czf "$out/accumulation_boundary.tar.gz" boundary && rm -rf "$out/boundary"
