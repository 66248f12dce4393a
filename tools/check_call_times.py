#!/usr/bin/env python3
"""plan's time estimate for torch.cuda.empty_cache() before every step against real step times:
for each job in DIR recorded twice with STEP_TIMES=1 (NAME-timed_default, without the calls, and
NAME-emptycache-timed_default, with them), the extra device-call time plan estimates for the
calls (empty_cache_every_step.extra_device_seconds, from the job without them) against the
measured difference of the two runs' step times after the first step. Fails where an estimate is
off by more than a factor of two (the call-time table in the wrong unit, the calls miscounted).

usage: check_call_times.py ALLOCSIM DIR
"""
import glob
import json
import os
import subprocess
import sys

allocsim, folder = sys.argv[1], sys.argv[2]
failures = 0
pairs = sorted(glob.glob(os.path.join(folder, "*-emptycache-timed_default.json")))
for with_json in pairs:
    name = os.path.basename(with_json)[:-len("-emptycache-timed_default.json")]
    without = os.path.join(folder, f"{name}-timed_default")
    with_calls = json.load(open(with_json))
    plain = json.load(open(without + ".json"))
    p = subprocess.run([allocsim, "plan", without + ".pickle.gz", "--json", "-"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{without}: allocsim exit {p.returncode}: {p.stderr.strip()}")
    row = json.loads(p.stdout)["empty_cache_every_step"]
    estimate = row["extra_device_seconds"]
    measured = sum(with_calls["step_seconds"][1:]) - sum(plain["step_seconds"][1:])
    ok = measured > 0 and 0.5 <= estimate / measured <= 2
    failures += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {row['empty_cache_calls']} calls, "
          f"{row['extra_device_allocs']} more cudaMalloc; estimated {estimate * 1e3:.0f} ms, "
          f"measured {measured * 1e3:.0f} ms over {len(plain['step_seconds']) - 1} steps")
print(f"{len(pairs) - failures} of {len(pairs)} estimates within a factor of two")
sys.exit(1 if failures or not pairs else 0)
