#!/usr/bin/env bash
# Records jobs that call torch.cuda.empty_cache() every step (not in the trace, but visible as
# segment_free events with no OOM), for the empty_cache inference. usage: tools/gpu/record_empty_cache.sh OUTDIR
set -u
out=$1
mkdir -p "$out/rec"
export PYTHONUNBUFFERED=1
for w in gpt2-emptycache llama-varlen-bf16-emptycache; do
  timeout 200 python3 tools/record_pytorch_trace.py "${w}_default" "$w" 6 "$out/rec" 2>&1 | tail -n 1
done
tar -C "$out" -czf "$out/empty_cache.tar.gz" rec && rm -rf "$out/rec"
