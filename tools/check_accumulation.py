#!/usr/bin/env python3
"""Gradient accumulation as a what-if against real runs: each DIR/*.json is a job recorded on a GPU
accumulating gradients (tools/gpu/record_sweep.py with ACCUM=k: batch B as k micro-batches of B/k,
one optimizer step after them); allocsim predicts it from the plain recordings in SWEEPS
(`predict ... --to B/k --accumulate k`) and replays it. Two predictions per run:
  recorded micro-batch: from the recordings up to B/k, where B/k is one of them and not the
    smallest (the transform alone, on a recorded pass): peak allocated within 0.2% of max_memory_allocated, and peak
    reserved within 10% of max_memory_reserved;
  from all recordings: (the size model too) peak allocated within 5%.
A capped run's verdict: `plan --at ... --batch B --limit CAP` says the accumulation fits exactly
where the run ran.

usage: check_accumulation.py ALLOCSIM DIR SWEEPS   (exit 1 if any check fails)
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

allocsim, folder, sweeps = sys.argv[1], sys.argv[2], sys.argv[3]
RECORDED = {"gpt2": [1, 2, 4], "llama-bf16": [1, 2, 4], "bert": [4, 8, 16]}
# Verdicts known to differ, and why: shown, not failed; any other difference fails.
KNOWN = {
    "llama-bf16_batch-16_accum8_cap4000000000":
        "predicted at micro-batch 2 from the recordings at 1, 2 and 4, the trace lacks allocations "
        "only the smaller recordings make (peak 3.8% low), and the cap is 4.5% under the need",
}


def run(args):
    p = subprocess.run([allocsim, *args], capture_output=True, text=True)
    if p.returncode not in (0, 3):
        raise SystemExit(f"allocsim {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def peaks(model, values, micro, k):
    files = [os.path.join(sweeps, f"{model}_batch-{v}.pickle.gz") for v in values]
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "p.atrace")
        run(["predict", *files, "--at", ",".join(map(str, values)), "--to", str(micro),
             "--accumulate", str(k), "--out", trace, "-q"])
        stats = json.loads(run(["replay", trace, "--json", "-"]))["memory_stats"]
    return stats["allocated_bytes.all.peak"], stats["reserved_bytes.all.peak"]


def off(a, b):
    return (a - b) / b


failures = 0
for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
    r = json.load(open(path))
    model, batch, k, micro = r["model"], r["batch"], r["accum"], r["micro_batch"]
    name = os.path.basename(path)[:-5]
    values = RECORDED[model]
    problems = []
    if r["cap_bytes"]:
        files = [os.path.join(sweeps, f"{model}_batch-{v}.pickle.gz") for v in values]
        plan = json.loads(run(["plan", *files, "--at", ",".join(map(str, values)), "--batch",
                               str(batch), "--limit", str(r["cap_bytes"]), "--json", "-"]))
        row = [m for m in plan["gradient_accumulation"] if m["passes"] == k][0]
        ran = r["oom"] is None
        line = f"under {r['cap_bytes']} bytes: plan says {'fits' if row['fits'] else 'OOM'}, " \
               f"the run {'ran' if ran else 'ran out of memory'}"
        if row["fits"] != ran and name in KNOWN:
            print(f"known {name}: {line} ({KNOWN[name]})")
            continue
        if row["fits"] != ran:
            problems.append(line)
        print(("ok   " if not problems else "FAIL ") + f"{name}: {line}")
        failures += bool(problems)
        continue
    real_alloc, real_res = r["max_memory_allocated"], r["max_memory_reserved"]
    line = f"{name}:"
    if micro in values and values.index(micro) >= 1:
        alloc, res = peaks(model, [v for v in values if v <= micro], micro, k)
        line += f" recorded micro-batch: allocated {off(alloc, real_alloc):+.2%}, " \
                f"reserved {off(res, real_res):+.2%};"
        if abs(off(alloc, real_alloc)) > 0.002 or abs(off(res, real_res)) > 0.10:
            problems.append("recorded micro-batch")
    alloc, res = peaks(model, values, micro, k)
    line += f" from all recordings: allocated {off(alloc, real_alloc):+.2%}, " \
            f"reserved {off(res, real_res):+.2%}"
    if abs(off(alloc, real_alloc)) > 0.05:
        problems.append("from all recordings")
    print(("ok   " if not problems else "FAIL ") + line)
    failures += bool(problems)
print(f"{failures} of {len(glob.glob(os.path.join(folder, '*.json')))} runs differ beyond the bounds")
sys.exit(1 if failures else 0)
