#!/usr/bin/env bash
# Writes every output allocsim makes of each shipped workload into OUT_DIR, so that two builds can
# be compared byte for byte (`diff -r`): replay's text and JSON reports at the recorded settings;
# on a 24 GiB card going on past OOMs, the snapshot, the SVG timeline and the JSON; on 12 GiB with
# expandable segments, the HTML timeline against the defaults; the compact trace; plan's JSON.
# usage: scripts/workload_outputs.sh ALLOCSIM_BINARY OUT_DIR [WORKLOAD_DIR]
set -euo pipefail
bin=$(realpath "$1")
out=$2
dir=${3:-$(dirname "$0")/../workloads}
mkdir -p "$out"
dir=$(realpath "$dir")
cd "$out"  # the reports name their outputs as ./NAME, the same whatever OUT_DIR is
one() {
  local trace=$1 bin=$2 w out=.
  w=$(basename "$trace" .pickle.gz)
  run() { "$@" >>"$out/$w.stdout" 2>>"$out/$w.stderr" || echo "exit $?" >>"$out/$w.stdout"; }
  run "$bin" replay "$trace" --json "$out/$w.replay.json"
  run "$bin" replay "$trace" --capacity 24GiB --on-oom continue -q --json "$out/$w.24g.json" \
    --snapshot-out "$out/$w.24g.pickle" --timeline-out "$out/$w.24g.svg"
  run "$bin" replay "$trace" --capacity 12GiB --alloc-conf expandable_segments:True -q \
    --json "$out/$w.12g_expandable.json" --timeline-out "$out/$w.12g.html" \
    --compare-alloc-conf max_split_size_mb:256
  run "$bin" replay "$trace" --capacity 12GiB --no-recorded-addresses -q --json "$out/$w.12g_model.json"
  run "$bin" convert "$trace" "$out/$w.atrace"
  run "$bin" plan "$trace" --card 24GiB --json "$out/$w.plan.json"
}
export -f one
ls "$dir"/*.pickle.gz | xargs -P "$(nproc)" -I{} bash -c 'one "$@"' _ {} "$bin"
echo "$(ls | wc -l) files in $out"
