"""PyTorch 2.12 on writes each trace entry's pool (`pool_id`): read as the truth of which private
pool served a request, it replays every shipped recording whose captures were marked exactly as
the marks do. Each is rewritten as 2.12 writes it (the pool in `pool_id`, (0, 0) for the ordinary
pools; the capture mark taken out of `user_metadata`) and both are replayed, the marked one with
--torch-version 2.12 (the rewritten one is told 2.12 by its pool_ids): the reports must be the
same but for the warnings' wording, the file's name and who named the release. Each is also
rewritten as 2.14 writes it (besides, an `annotate` entry after its first alloc, and pinned host
memory): replayed as 2.14, the same again, and no warning says a pool was inferred. Replayed as
2.13 on, memory_stats' reserved_bytes_by_private_pools at the end is what the snapshot's segments
of each pool (segment_pool_id) hold, where the replay as 2.14 does not depart from the 2.11
recording (2.13 rounds a cap's limit) and no pool was freed holding blocks (a pool made after one
such takes its memory over, and PyTorch's counts follow the blocks, not the segments' first pool).

usage: pool_id_test.py ALLOCSIM WORKLOADS_DIR
"""
import copy
import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile

binary, workloads = sys.argv[1], sys.argv[2]
MARK = "cuda_graph_pool="
MEM_POOL = "mem_pool="


def route(fields, device):
    """The pool the recorder's marks route a request of `device` to: of a capture and a
    use_mem_pool block open together, the one begun last (written last), a block of another
    device leaving the capture's."""
    pool = None
    for f in fields:
        if f.startswith(MARK):
            pool = f[len(MARK):]
        elif f.startswith(MEM_POOL):
            value, _, on = f[len(MEM_POOL):].partition("@")
            if not on or int(on) == device:
                pool = value
    return tuple(int(x) for x in pool.split(",")) if pool else (0, 0)


def with_pool_ids(snapshot):
    """`snapshot` as PyTorch 2.12 writes it: each entry's pool in pool_id."""
    for device, trace in enumerate(snapshot["device_traces"]):
        for e in trace:
            fields = str(e.pop("user_metadata", "")).split(";")
            e["pool_id"] = route(fields, device)
            rest = [f for f in fields if f and not f.startswith((MARK, MEM_POOL))]
            if rest:
                e["user_metadata"] = ";".join(rest)
    return snapshot


def as_214(snapshot):
    """`snapshot` (with pool_ids) as PyTorch 2.14 writes it: an annotate entry, host memory."""
    trace = next(t for t in snapshot["device_traces"] if t)
    first = next(i for i, e in enumerate(trace) if e["action"] == "alloc")
    trace.insert(first + 1, {"action": "annotate", "addr": trace[first]["addr"], "size": 0,
                             "stream": trace[first]["stream"], "frames": [], "pool_id": (0, 0),
                             "user_metadata": "first"})
    snapshot["host_segments"] = [{"address": 1 << 40, "total_size": 2 << 20, "allocated_size": 0,
                                  "stream": 0, "blocks": []}]
    snapshot["host_traces"] = [{"action": "segment_alloc", "addr": 1 << 40, "size": 2 << 20,
                                "stream": 0, "frames": []}]
    return snapshot


def report(path, args, version="2.12"):
    p = subprocess.run([binary, "replay", path, "-q", "--json", "-"] + args, capture_output=True,
                       text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"FAIL {path}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    r = json.loads(p.stdout)
    if any("inferred" in w for w in r.get("warnings", [])) and "--torch-version" not in args:
        sys.exit(f"FAIL {path}: a pool inferred though every entry names its own: "
                 f"{[w for w in r['warnings'] if 'inferred' in w][0][:300]}")
    ignored = ("warnings", "trace", "source", "block_annotations", "host_memory")
    for one in r.get("devices", []):  # a snapshot of several GPUs: each device's report too
        for key in ignored + ("torch_version",):
            one.pop(key, None)
    for key in ignored:
        r.pop(key, None)
    told = r.pop("torch_version", {})
    if told.get("version") != version:
        sys.exit(f"FAIL {path}: replayed as PyTorch {told}, not {version}")
    return r


def private_pool_bytes(snapshot, report):
    """Where the snapshot's segments by pool and the report's reserved_bytes_by_private_pools
    (current) differ: [] if they agree, on every device."""
    differ = []
    devices = report.get("devices", [report])
    if "departure" in report:
        return []
    for one in devices:
        if "pools_freed_holding_blocks" in one or "departure" in one:
            continue
        device = one.get("device", 0)
        want = {}
        for seg in snapshot.get("segments", []):
            pool = tuple(seg.get("segment_pool_id", (0, 0)))
            if pool != (0, 0) and (len(devices) == 1 or seg.get("device", 0) == device):
                key = f"{pool[0]}_{pool[1]}"
                want[key] = want.get(key, 0) + seg["total_size"]
        got = {k.split(".")[1]: v for k, v in one["memory_stats"].items()
               if k.startswith("reserved_bytes_by_private_pools.") and k.endswith(".all.current")}
        got = {k: v for k, v in got.items() if v}
        if got != want:
            differ.append(f"device {device}: reserved_bytes_by_private_pools {got}, segments {want}")
    return differ


checked, failures = 0, []
for folder in ("oracle_fuzz", "cuda_graphs", "nested_pools"):
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
        marked_214 = report(path, args + ["--torch-version", "2.14"], "2.14")
        with tempfile.NamedTemporaryFile(suffix=".pickle") as tmp:
            pickle.dump(with_pool_ids(copy.deepcopy(snapshot)), tmp)
            tmp.flush()
            from_pool_ids = report(tmp.name, args)
        with tempfile.NamedTemporaryFile(suffix=".pickle") as tmp:
            pickle.dump(as_214(with_pool_ids(copy.deepcopy(snapshot))), tmp)
            tmp.flush()
            shaped_214 = report(tmp.name, args, "2.14")
        checked += 1
        differ = [k for k in marked if marked[k] != from_pool_ids.get(k)]
        # The annotate entry shifts the event indices by one from the first alloc on (of the
        # first device that has one): each device's report compared on what it leaves alone.
        same_214 = ("memory_stats", "device_ops", "fragmentation", "alloc_conf")
        for a, b in zip(marked_214.get("devices", [marked_214]),
                        shaped_214.get("devices", [shaped_214])):
            differ += [f"2.14: {k}" for k in same_214 if a.get(k) != b.get(k)]
            counted = [{k: r["addresses"].get(k) for k in ("checked", "mismatched")}
                       for r in (a, b)]
            if counted[0] != counted[1]:
                differ.append("2.14: addresses")
        differ += private_pool_bytes(snapshot, shaped_214)
        if differ:
            failures.append(f"{name}: {differ[:5]}")
if checked == 0:
    sys.exit("FAIL no recording with capture marks found")
for line in failures:
    print("FAIL", line)
print(f"{checked - len(failures)} of {checked} marked recordings replay the same from pool_id, "
      "and shaped as 2.14 writes them")
sys.exit(1 if failures else 0)
