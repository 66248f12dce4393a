#!/usr/bin/env bash
# The pairs `allocsim diff` is checked on, recorded with stack frames (tools/gpu/diff_pair_job.py):
# the same job at two batch sizes, under two settings, and before and after two changes to its
# code. usage (repo root, on the GPU machine): tools/gpu/record_diff_pairs.sh OUTDIR [STEPS]
set -eu
out=$1 steps=${2:-3}
mkdir -p "$out"
job=tools/gpu/diff_pair_job.py
python3 $job base 8 "$steps" "$out/base_b8"
python3 $job base 12 "$steps" "$out/base_b12"
python3 $job wider 8 "$steps" "$out/wider_b8"
python3 $job keep 8 "$steps" "$out/keep_b8"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 $job base 8 "$steps" "$out/base_b8_expandable"
