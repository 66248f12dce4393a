#!/usr/bin/env bash
# Differential fuzzing on a GPU machine with programs shaped like users' (allocsim.fuzz's
# programs.py, shape "user"; with SHAPE=pools, "pools": MemPools besides), recorded through
# allocsim's recorder: each recording replayed with its marks and without them (as PyTorch's own
# recorder writes it). With DEVICES=N the programs switch between N devices (the machine needs N
# GPUs).
#
# usage (repo root, on the GPU machine): tools/gpu/fuzz_user_programs.sh ALLOCSIM OUTDIR [MINUTES]
#        [SEED] [SETTINGS]
# Writes OUTDIR/fuzz_user.tar.gz: summary.{json,txt}, the first divergence of each kind per
# setting (diverged/), gpu.txt (the GPU, driver and PyTorch), and with KEEP=N the N smallest exact
# recordings that changed their cap mid-run (or made the call KEEP_CALL names), candidates for
# regression cases (keep/; with KEEP_ANY=1 exact or not, 12 MiB of them at most).
set -u
allocsim=$1 out=$2 minutes=${3:-7} seed=${4:-11001} settings=${5:-0,1,2,3,5,7,8,9,15,17}
shape=${SHAPE:-user}  # or "pools": with MemPools
devices=${DEVICES:-1}
work=/tmp/fuzz-user
rm -rf "$work" && mkdir -p "$work" "$out"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"; } > "$work/gpu.txt"
# A short run first: a broken runner shows in seconds, not at the end.
PYTHONPATH=python python3 -m allocsim.fuzz "$allocsim" "$work/smoke" --shape "$shape" --programs 2 \
  --devices "$devices" --seed "$seed" --jobs 1 --minutes 0.7 --shrink-cases 0 --settings 0 | tail -n 4
if grep -q '"error"' "$work/smoke/summary.json"; then
  grep -m 3 '"error"' "$work/smoke/summary.json"
  exit 1
fi
PYTHONPATH=python python3 -m allocsim.fuzz "$allocsim" "$work/run" --shape "$shape" --programs 60 \
  --devices "$devices" --seed "$seed" --jobs 10 --minutes "$minutes" --shrink-cases 0 --settings "$settings" \
  --keep-recordings > "$work/run.log" 2>&1
tail -n 16 "$work/run.log"
mkdir -p "$work/keep"
python3 - "$work/run" "$work/keep" "${KEEP:-0}" <<'PY'
import glob, json, os, shutil, sys
run, keep, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
exact = {r["name"] for r in json.load(open(os.path.join(run, "summary.json")))
         if "error" not in r and not r.get("kind")}
found = []
for meta in glob.glob(os.path.join(run, "recordings", "*", "*.json")):
    name = os.path.basename(meta)[:-5]
    if (name in exact or os.environ.get("KEEP_ANY")) and \
            json.load(open(meta)).get("calls", {}).get(os.environ.get("KEEP_CALL", "set_cap")):
        found.append((os.path.getsize(meta[:-5] + ".pickle.gz"), meta[:-5]))
kept_bytes = 0
for size, stem in sorted(found)[:n]:
    kept_bytes += size + os.path.getsize(stem + ".json")
    if kept_bytes > 12 << 20:  # the archive comes back whole
        break
    for ext in (".json", ".pickle.gz"):
        shutil.copy(stem + ext, keep)
PY
tar czf "$out/fuzz_user.tar.gz" -C "$work" gpu.txt run.log run/summary.json run/summary.txt keep \
  $(cd "$work" && ls -d run/diverged 2>/dev/null)
