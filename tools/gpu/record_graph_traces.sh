#!/usr/bin/env bash
# Ground truth for CUDA graphs' private pools and for one process on two GPUs, in one call on a GPU
# machine (two GPUs for the twogpu run, three for threegpu; skipped where fewer). MULTI_GPU_ONLY=1
# records only those.
#
# usage (repo root, on the GPU machine): tools/gpu/record_graph_traces.sh OUTDIR
# Writes OUTDIR/graph_traces.tar.gz with NAME.{pickle.gz,json} per run and log.txt.
set -u
out=$1
work=/tmp/graph_traces
mkdir -p "$work" "$out"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"; } > "$work/gpu.txt"
rec() {  # NAME WORKLOAD STEPS ALLOC_CONF
  PYTORCH_CUDA_ALLOC_CONF=$4 timeout 240 python3 tools/gpu/record_graph_traces.py "$1" "$2" "$3" "$work" \
    2>&1 | tail -n 3
}
{
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then rec twogpu_cap4000000000 twogpu 8 ""; fi
  if [ "$(nvidia-smi -L | wc -l)" -ge 3 ]; then
    rec threegpu_expandable threegpu 6 expandable_segments:True
    rec threegpu_default threegpu 6 ""
  fi
  [ -n "${MULTI_GPU_ONLY:-}" ] && exit 0
  rec graph-capture_default graph-capture 6 ""
  rec graph-capture_recordstreamreuse graph-capture 6 graph_capture_record_stream_reuse:True
  rec graph-sharedpool_default graph-sharedpool 6 ""
  rec graph-destroy_default graph-destroy 6 ""
  rec compile-mlp-train_default compile-mlp-train 6 ""
  rec compile-mlp-train_expandable compile-mlp-train 6 expandable_segments:True
  rec compile-gpt2-infer_default compile-gpt2-infer 6 ""
  rec compile-gpt2-infer_expandable compile-gpt2-infer 6 expandable_segments:True
} 2>&1 | tee "$work/log.txt"
tar -C "$work" -czf "$out/graph_traces.tar.gz" .
