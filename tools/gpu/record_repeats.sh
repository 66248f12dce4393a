#!/usr/bin/env bash
# The same jobs recorded several times, each in a process of its own, through allocsim's recorder:
# whether the driver places the segments of identical request streams at the same addresses (and
# so whether statistics that depend on placement can be predicted from the requests alone).
# usage (repo root, on the GPU machine): tools/gpu/record_repeats.sh OUTDIR [TIMES (default 3)]
# Writes OUTDIR/rec/<workload>_run<k>.{json,pickle.gz}.
set -u
out=$1 times=${2:-3}
mkdir -p "$out/rec"
export PYTHONUNBUFFERED=1
for w in gpt2-emptycache gpt2 bert-emptycache; do
  for ((k = 1; k <= times; k++)); do
    timeout 200 python3 tools/record_pytorch_trace.py "${w}_run$k" "$w" 3 "$out/rec" 2>&1 | tail -n 1
  done
done
