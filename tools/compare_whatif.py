#!/usr/bin/env python3
"""Compares allocsim's what-if replays with PyTorch's own replays of the same trace.

usage: compare_whatif.py ALLOCSIM GROUND_TRUTH_DIR WORKLOADS_DIR [NAME ...]

GROUND_TRUTH_DIR holds NAME.json files written by tools/replay_through_pytorch.py on a GPU
(tools/gpu/collect_ground_truth.sh gathers them), NAME = TRACE__SETTING. For each, allocsim replays
WORKLOADS_DIR/TRACE.pickle.gz under the same PYTORCH_CUDA_ALLOC_CONF and cap and this prints whether
the verdict (OOM or not, and at which request), the device operations and the statistics agree.
"""
import json, os, subprocess, sys, tempfile

binary, gt_dir, workloads = sys.argv[1:4]
names = sys.argv[4:] or sorted(f[:-5] for f in os.listdir(gt_dir) if f.endswith(".json") and "__" in f)
exact = total = verdicts = 0
for name in names:
    gt = json.load(open(os.path.join(gt_dir, name + ".json")))
    if "device_ops" not in gt:
        continue  # a timing run, recorded without history
    trace = os.path.join(workloads, name.split("__")[0] + ".pickle.gz")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [binary, "replay", trace, "--capacity", str(gt["total_bytes"]), "--json", out, "-q",
               "--alloc-conf", gt["alloc_conf"]]
        if gt["cap_bytes"]:
            cmd += ["--memory-fraction", repr(gt["cap_bytes"] / gt["total_bytes"])]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode not in (0, 3):
            print(f"{name:55s} ERROR {p.stderr.strip()}")
            continue
        rep = json.load(open(out))
    total += 1
    # replay_through_pytorch counts requests among the alloc / free_completed / oom events only
    want_oom = gt["oom_at_request"]
    got_oom = None
    if rep["oom"] and not rep["oom"]["recorded"]:
        import gzip, pickle
        snap = pickle.load(gzip.open(trace))
        idx = [i for i, e in enumerate(snap["device_traces"][0]) if e["action"] in ("alloc", "free_completed", "oom")]
        got_oom = idx.index(rep["oom"]["event_index"])
    verdict_ok = want_oom == got_oom
    verdicts += verdict_ok
    want_ops = [tuple(o) for o in gt["device_ops"]]
    got_ops = [(o["action"], o["size"]) for o in rep["device_ops"]]
    ops_ok = want_ops == got_ops
    first = next((i for i, (a, b) in enumerate(zip(got_ops, want_ops)) if a != b), min(len(got_ops), len(want_ops)))
    bad = sorted(k for k, v in gt["memory_stats"].items() if rep["memory_stats"].get(k) != v)
    ok = verdict_ok and ops_ok and not bad
    exact += ok
    print(f"{name:55s} {'EXACT' if ok else 'DIFF '} verdict {'ok' if verdict_ok else f'{got_oom} vs {want_oom}'}; "
          f"ops {'ok' if ops_ok else f'differ at {first} ({len(got_ops)} vs {len(want_ops)})'}; "
          f"stats {'ok' if not bad else f'{len(bad)} differ: ' + ','.join(bad[:3])}")
print(f"what-if: {exact}/{total} exact, {verdicts}/{total} verdicts agree")
