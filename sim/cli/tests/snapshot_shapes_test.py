#!/usr/bin/env python3
"""Snapshots as older PyTorch versions wrote them replay as the newest shape does.

PyTorch 2.0's segment blocks carry no `address` (the segment's address plus the sizes of the
blocks before it) and no `requested_size` (the `real_size` of the block's last `history` entry).
A shipped history that starts mid-run, whose replay rebuilds its first state from these blocks, is
rewritten in that shape: `allocsim replay --json` must give the same report.

usage: snapshot_shapes_test.py ALLOCSIM WORKLOADS_DIR
"""
import gzip, json, os, pickle, subprocess, sys, tempfile

binary, workloads = sys.argv[1], sys.argv[2]
tmp = tempfile.mkdtemp(prefix="allocsim-shapes-")
source = os.path.join(workloads, "llama-varlen-bf16_default_stacks_window.pickle.gz")
with gzip.open(source, "rb") as f:
    snapshot = pickle.load(f)  # a shipped file of plain data

old = dict(snapshot)
old["segments"] = []
for seg in snapshot["segments"]:
    blocks = []
    for b in seg["blocks"]:
        active = b["state"] in ("active_allocated", "active_pending_free")
        shaped = {"size": b["size"], "state": b["state"]}
        shaped["history"] = [{"addr": b["address"], "real_size": b["requested_size"]}] if active else []
        blocks.append(shaped)
    old["segments"].append(dict(seg, blocks=blocks))
shaped_path = os.path.join(tmp, "torch20.pickle")
with open(shaped_path, "wb") as f:
    pickle.dump(old, f)


def report(path):
    p = subprocess.run([binary, "replay", path, "-q", "--json", "-"], capture_output=True, text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"FAIL {path}: exit {p.returncode}: {p.stderr.strip()}")
    r = json.loads(p.stdout)
    r.pop("trace")
    return r, p.stderr


want, _ = report(source)
got, stderr = report(shaped_path)
if got != want:
    diff = [k for k in want if want[k] != got.get(k)]
    sys.exit(f"FAIL: the 2.0-shaped snapshot's report differs in {diff}")
if stderr.strip():
    sys.exit(f"FAIL: the 2.0-shaped snapshot printed {stderr.strip()!r}")
print("2.0-shaped blocks (no address, no requested_size): the same report")
