#!/usr/bin/env bash
# The same jobs recorded several times, each in a process of its own, through allocsim's recorder:
# whether the driver places the segments of identical request streams at the same addresses (and
# so whether statistics that depend on placement can be predicted from the requests alone).
# usage (repo root, on the GPU machine): tools/gpu/record_repeats.sh OUTDIR [TIMES (default 3)]
#        [STEPS (default 3)]
# WORKLOADS="w1 w2 ..." names the workloads of tools/record_pytorch_trace.py (default: gpt2 and
# bert, with and without an empty_cache() every step).
# Writes OUTDIR/rec/<workload>_run<k>.{json,pickle.gz}.
set -u
out=$1 times=${2:-3} steps=${3:-3}
mkdir -p "$out/rec"
export PYTHONUNBUFFERED=1
for w in ${WORKLOADS:-gpt2-emptycache gpt2 bert-emptycache}; do
  for ((k = 1; k <= times; k++)); do
    timeout 200 python3 tools/record_pytorch_trace.py "${w}_run$k" "$w" "$steps" "$out/rec" 2>&1 | tail -n 1
  done
done
