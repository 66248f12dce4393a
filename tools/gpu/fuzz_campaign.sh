#!/usr/bin/env bash
# Differential fuzzing on every GPU of a machine at once: the settings of allocsim.fuzz (or those
# SETTINGS=I,J,... names) dealt out over the GPUs (the k-th on GPU k mod N), or with SPREAD=seeds
# every one on every GPU, GPU g from seed SEED + 1000 g; each GPU runs the shapes "user", "pools"
# and "fuzz" in turn, recorded through allocsim's recorder. Uncapped programs run UNCAPPED_JOBS at a time
# (default 4), so that they do not fill the GPU together; capped ones ten at a time.
#
# usage (repo root, on the GPU machine): tools/gpu/fuzz_campaign.sh ALLOCSIM OUTDIR SEED
#        [MINUTES_PER_SHAPE (default user:2.7,pools:2.7,fuzz:1.8)]
# Writes OUTDIR/campaign.tar.gz: per GPU and shape the run's summary.{json,txt} and log, the
# recordings that differed (not those run on a filled device), gpu.txt, and tally.{txt,json}
# (python -m allocsim.fuzz.tally over every run).
set -u
allocsim=$1 out=$2 seed=$3 plan=${4:-user:2.7,pools:2.7,fuzz:1.8}
work=${WORK:-/tmp/fuzz-campaign}
rm -rf "$work" && mkdir -p "$work" "$out"
export PYTHONUNBUFFERED=1
gpus=$(nvidia-smi -L | wc -l)
chosen=${SETTINGS:-$(PYTHONPATH=python python3 -c \
  "from allocsim.fuzz.driver import SETTINGS; print(','.join(map(str, range(len(SETTINGS)))))")}
IFS=, read -r -a chosen <<< "$chosen"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__)"; } > "$work/gpu.txt"
for ((g = 0; g < gpus; g++)); do
  if [ "${SPREAD:-settings}" = seeds ]; then
    mine=$(IFS=,; echo "${chosen[*]}") from=$((seed + 1000 * g))
  else
    mine=$(for ((k = g; k < ${#chosen[@]}; k += gpus)); do echo "${chosen[k]}"; done | paste -sd,)
    from=$seed
  fi
  [ -n "$mine" ] || continue
  (
    export CUDA_VISIBLE_DEVICES=$g
    for step in ${plan//,/ }; do
      shape=${step%%:*} minutes=${step#*:}
      run="$work/gpu$g-$shape"
      PYTHONPATH=python python3 -m allocsim.fuzz "$allocsim" "$run" --shape "$shape" \
        --programs 200 --seed "$from" --jobs 10 --uncapped-jobs "${UNCAPPED_JOBS:-4}" \
        --minutes "$minutes" --shrink-cases 0 --settings "$mine" --keep-recordings \
        > "$run.log" 2>&1
      # Keep the recordings that differed; drop the rest.
      python3 - "$run" <<'PY'
import glob, json, os, shutil, sys
run = sys.argv[1]
keep = {r["name"] for r in json.load(open(os.path.join(run, "summary.json")))
        if r.get("kind") not in (None, "device_full") and "error" not in r}
os.makedirs(os.path.join(run, "differed"), exist_ok=True)
for path in glob.glob(os.path.join(run, "recordings", "*", "*")):
    if os.path.basename(path).split(".")[0] in keep:
        shutil.move(path, os.path.join(run, "differed"))
shutil.rmtree(os.path.join(run, "recordings"), ignore_errors=True)
shutil.rmtree(os.path.join(run, "diverged"), ignore_errors=True)
PY
    done
  ) &
done
wait
PYTHONPATH=python python3 -m allocsim.fuzz.tally "$work"/gpu*-*/ --json "$work/tally.json" \
  > "$work/tally.txt"
cat "$work/tally.txt"
tar czf "$out/campaign.tar.gz" -C "$work" .
