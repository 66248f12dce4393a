"""PyTorch 2.12 on writes each trace entry's pool (`pool_id`): read as the truth of which private
pool served a request, it replays every shipped recording whose captures were marked exactly as
the marks do. Each is rewritten as 2.12 writes it (the pool in `pool_id`, (0, 0) for the ordinary
pools; the capture mark taken out of `user_metadata`) and both are replayed, the marked one with
--torch-version 2.12 (the rewritten one is told 2.12 by its pool_ids): the reports must be the
same but for the warnings' wording, the file's name and who named the release.

usage: pool_id_test.py ALLOCSIM WORKLOADS_DIR
"""
import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile

binary, workloads = sys.argv[1], sys.argv[2]
MARK = "cuda_graph_pool="


def with_pool_ids(snapshot):
    """`snapshot` as PyTorch 2.12 writes it: each entry's pool in pool_id."""
    for trace in snapshot["device_traces"]:
        for e in trace:
            fields = str(e.pop("user_metadata", "")).split(";")
            pool = [f[len(MARK):] for f in fields if f.startswith(MARK)]
            e["pool_id"] = tuple(int(x) for x in pool[0].split(",")) if pool else (0, 0)
            rest = [f for f in fields if f and not f.startswith(MARK)]
            if rest:
                e["user_metadata"] = ";".join(rest)
    return snapshot


def report(path, args):
    p = subprocess.run([binary, "replay", path, "-q", "--json", "-"] + args, capture_output=True,
                       text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"FAIL {path}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    r = json.loads(p.stdout)
    for key in ("warnings", "trace", "source"):
        r.pop(key, None)
    version = r.pop("torch_version", {})
    if version.get("version") != "2.12":
        sys.exit(f"FAIL {path}: replayed as PyTorch {version}, not 2.12")
    return r


checked, failures = 0, []
for folder in ("oracle_fuzz", "cuda_graphs"):
    folder = os.path.join(workloads, folder)
    for name in sorted(f[:-len(".pickle.gz")] for f in os.listdir(folder)
                       if f.endswith(".pickle.gz")):
        path = os.path.join(folder, name + ".pickle.gz")
        with gzip.open(path) as f:
            snapshot = pickle.load(f)  # the repository's own recordings
        if not isinstance(snapshot, dict) or not any(
                MARK in str(e.get("user_metadata", ""))
                for t in snapshot["device_traces"] for e in t):
            continue
        args = []
        meta_path = os.path.join(folder, name + ".json")
        if os.path.exists(meta_path):
            with open(meta_path) as f:
                meta = json.load(f)
            args = ["--capacity", str(meta["total_bytes"])]
            if meta.get("cap_bytes") and not meta.get("recorder_marks"):
                args += ["--memory-fraction", repr(meta["cap_bytes"] / meta["total_bytes"])]
        marked = report(path, args + ["--torch-version", "2.12"])
        with tempfile.NamedTemporaryFile(suffix=".pickle") as tmp:
            pickle.dump(with_pool_ids(snapshot), tmp)
            tmp.flush()
            from_pool_ids = report(tmp.name, args)
        checked += 1
        differ = [k for k in marked if marked[k] != from_pool_ids.get(k)]
        if differ:
            failures.append(f"{name}: {differ[:5]}")
if checked == 0:
    sys.exit("FAIL no recording with capture marks found")
for line in failures:
    print("FAIL", line)
print(f"{checked - len(failures)} of {checked} marked recordings replay the same from pool_id")
sys.exit(1 if failures else 0)
