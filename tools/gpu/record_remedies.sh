#!/usr/bin/env bash
# Ground truth for plan's remedies, on a GPU: the device call times (allocsim calibrate), jobs
# timed step by step with and without torch.cuda.empty_cache() every step, and jobs accumulating
# gradients over 2, 4 and 8 micro-batches, uncapped and under the caps where their full batch ran
# out of memory.
# usage: tools/gpu/record_remedies.sh ALLOCSIM OUTDIR  (writes OUTDIR/remedies.tar.gz)
set -u
allocsim=$1
out=$2
mkdir -p "$out/remedies/timed" "$out/remedies/accum"
export PYTHONUNBUFFERED=1
"$allocsim" calibrate --out "$out/remedies/device_call_times.json" || echo "calibrate failed"
# One job at a time, so that their step times are their own.
for w in gpt2 gpt2-emptycache bert bert-emptycache llama-varlen-bf16 llama-varlen-bf16-emptycache; do
  STEP_TIMES=1 timeout 200 python3 tools/record_pytorch_trace.py "${w}_default" "$w" 12 \
    "$out/remedies/timed" 2>&1 | tail -n 1
done
# Accumulation: gpt2 and llama-bf16 at batch 16, bert at 32; uncapped, then capped where the
# full batch runs out of memory (the caps of workloads/sweeps/*.boundary.json).
accum_run() {  # MODEL BATCH ACCUM [CAP]
  ACCUM=$3 timeout 300 python3 tools/gpu/record_sweep.py "$out/remedies/accum" "$1" batch "$2" 3 "${4:-0}"
}
export -f accum_run
export out
{
  for k in 2 4 8; do
    echo "gpt2 16 $k"; echo "llama-bf16 16 $k"; echo "bert 32 $k"
  done
  for k in 2 4; do
    echo "gpt2 16 $k 20000000000"; echo "llama-bf16 16 $k 8000000000"; echo "bert 32 $k 16000000000"
  done
} | xargs -P 3 -L 1 bash -c 'accum_run "$@"' _
tar -C "$out" -czf "$out/remedies.tar.gz" remedies && rm -rf "$out/remedies"
