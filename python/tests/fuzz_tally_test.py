#!/usr/bin/env python3
"""allocsim.fuzz.tally's counts of made-up run summaries (no GPU, no torch), and the calls the
driver names for a program.

usage: fuzz_tally_test.py STAGED_PACKAGE_DIR
"""
import json, os, subprocess, sys, tempfile

sys.path.insert(0, sys.argv[1])
from allocsim.fuzz.driver import program_calls  # noqa: E402
from allocsim.fuzz.tally import tally  # noqa: E402

failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: {got!r}, expected {want!r}")


def result(name, conf, kind=None, warned=False, calls=(), cap=1 << 30, error=None):
    r = {"name": name, "conf": conf, "seed": 1, "cap": cap, "calls": list(calls)}
    if error:
        r["error"] = error
    else:
        r.update(kind=kind, warned=warned)
    return r


run_a = [result("s00_ucap_1", "", calls=["set_cap", "sync"]),
         result("s00_ucap_3", "", kind="stat:num_alloc_retries", calls=["set_cap"]),
         result("s01_pnocap_2", "expandable_segments:True", kind="ops", warned=True,
                calls=["mem_pool", "use_pool"], cap=0),
         result("s01_pd2cap_5", "expandable_segments:True", kind="device_full"),
         {"name": "s02", "conf": "max_split_size_mb:128", "error": "worker died"}]
run_b = [result("s00_cap_7", "", calls=["capture", "capture_shared_pool"]),
         result("s00_d2nocap_8", "", error="PyTorch crashed", cap=0)]
counts = tally(run_a + run_b)
expect("total", counts["total"], {"programs": 6, "exact": 2, "warned": 1, "silent": 1,
                                  "device_full": 1, "error": 1})
expect("defaults", counts["setting"]["(defaults)"],
       {"programs": 4, "exact": 2, "warned": 0, "silent": 1, "device_full": 0, "error": 1})
expect("shapes", {k: v["programs"] for k, v in counts["shape"].items()},
       {"user": 2, "pools": 2, "fuzz": 2})
expect("set_cap", counts["call"]["set_cap"]["silent"], 1)
expect("capped", {k: v["programs"] for k, v in counts["capped"].items()},
       {"capped": 4, "uncapped": 2})

with tempfile.TemporaryDirectory() as tmp:
    for run, results in (("a", run_a), ("b", run_b)):
        os.makedirs(os.path.join(tmp, run))
        with open(os.path.join(tmp, run, "summary.json"), "w") as f:
            json.dump(results, f)
    env = dict(os.environ, PYTHONPATH=sys.argv[1])
    p = subprocess.run([sys.executable, "-m", "allocsim.fuzz.tally", os.path.join(tmp, "a"),
                        os.path.join(tmp, "b"), "--json", os.path.join(tmp, "t.json")],
                       capture_output=True, text=True, env=env)
    expect("exit status with a silent difference", p.returncode, 1)
    with open(os.path.join(tmp, "t.json")) as f:
        expect("JSON", json.load(f)["total"]["programs"], 6)
    p = subprocess.run([sys.executable, "-m", "allocsim.fuzz.tally", os.path.join(tmp, "none")],
                       capture_output=True, text=True, env=env)
    expect("a missing run", (p.returncode, "none/summary.json" in p.stderr), (1, True))

expect("calls", program_calls([["alloc", 1, 512, 0, "raw"], ["capture", 1, 1, None],
                               ["end_capture", 1], ["capture", 2, 2, 1], ["free", 1],
                               ["set_cap", 1 << 30], ["use_pool", 3], ["end_use_pool", 3]]),
       ["caching_allocator_alloc", "capture", "capture_shared_pool", "set_cap", "use_pool"])

for f in failures:
    print("FAIL:", f)
print(f"fuzz_tally_test: {len(failures)} failures")
sys.exit(1 if failures else 0)
