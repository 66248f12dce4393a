#!/usr/bin/env bash
# Sets up, builds, and replays a recorded Llama training job on a 10 GiB card: PyTorch's OOM
# message, the memory_summary() table and the fragmentation figures, as PyTorch would show them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build >/dev/null
set +e
build/allocsim replay workloads/llama-varlen-bf16_default.pickle.gz --capacity 10GiB "$@"
rc=$?
set -e
echo "(allocsim exit status $rc: 0 = fits, 3 = OOM)"
