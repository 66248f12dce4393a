#!/usr/bin/env python3
"""Replays each recorded workload with allocsim and compares the result with what PyTorch did.

usage: check_fidelity.py ALLOCSIM DIR [NAME ...]

For each DIR/NAME.json + NAME.pickle.gz (see workloads/README.md) it runs
  ALLOCSIM replay NAME.pickle.gz --capacity TOTAL [--memory-fraction CAP/TOTAL] --json OUT
and checks, against the recorded trace and PyTorch's own statistics:
  ops    the device operations (segment_alloc / segment_free / segment_map / segment_unmap), in order and size
  stats  every key of torch.cuda.memory_stats() at the end of the trace (for a windowed history, the .current ones)
  oom    the OOMs the trace recorded, each reproduced and no other (those the job caught and went on
         after, as cuDNN's algorithm search does, too), and the figures in the message of the one the
         script raised, if any
Runs recorded with memory held outside PyTorch (ballast_leave_free) are skipped: their device limit is not a
setting. Where a recording marks its empty_cache() calls (`markers`, workloads/cuda_graph_syncs/), a
num_sync_all_streams difference is shown beside the number of them that left no trace entry, which
no replay can count. A run of one process on several GPUs (`devices` in the JSON) is checked device by device
(`--device N`, each under its own cap). Prints one row per run and, last, "fidelity: K/N runs exact". Exit status 0 only if all are exact.
"""
import gzip, json, os, pickle, subprocess, sys, tempfile

# The OOM message's figures, as the differential fuzzer compares them (python/allocsim/fuzz/).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from allocsim.fuzz.oom_message import OOM_FIELDS, oom_figures  # noqa: E402,F401


def check(binary, d, name):
    meta = json.load(open(os.path.join(d, name + ".json")))
    if meta.get("ballast_leave_free"):
        return None
    trace_path = os.path.join(d, name + ".pickle.gz")
    with gzip.open(trace_path) as f:
        snap = pickle.load(f)
    if "devices" in meta:
        # one process on several GPUs: each device on its own, under its own cap
        results = [check_device(binary, trace_path, snap["device_traces"][m["device"]], m, m["device"])
                   for m in meta["devices"]]
        bad = next((r for r in results if "error" in r or not (r["ops"] and not r["bad_keys"] and r["oom"])),
                   None)
        return bad or results[0]
    # a rank of a multi-GPU job records on its own device: the one trace with events
    trace = next((t for t in snap["device_traces"] if t), [])
    return check_device(binary, trace_path, trace, meta, None)


def check_device(binary, trace_path, trace, meta, device):
    want_ops = [{"action": e["action"], "size": e["size"]} for e in trace
                if e["action"].startswith("segment_")]
    with tempfile.TemporaryDirectory() as tmp:
        # the replay sees the trace alone, never the recorded answers beside it
        alone = os.path.join(tmp, "trace.pickle.gz")
        with open(trace_path, "rb") as src, open(alone, "wb") as dst:
            dst.write(src.read())
        out = os.path.join(tmp, "report.json")
        cmd = [binary, "replay", alone, "--capacity", str(meta["total_bytes"]), "--json", out]
        if meta.get("cap_bytes"):
            cmd += ["--memory-fraction", repr(meta["cap_bytes"] / meta["total_bytes"])]
        if device is not None:
            cmd += ["--device", str(device)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return {"error": "no answer in 300 s"}
        if p.returncode not in (0, 3) or not os.path.exists(out):
            return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"}
        try:
            rep = json.load(open(out))
        except ValueError as e:
            return {"error": f"report is not JSON: {e}"}
    got_ops = [{"action": o.get("action"), "size": o.get("size")} for o in rep.get("device_ops") or []]
    ops_ok = got_ops == want_ops
    first_diff = next((i for i, (a, b) in enumerate(zip(got_ops, want_ops)) if a != b),
                      None if len(got_ops) == len(want_ops) else min(len(got_ops), len(want_ops)))
    stats = rep.get("memory_stats") or {}
    # a windowed history (bounded max_entries) starts mid-run: counters and peaks from before it are unknowable,
    # the state at its end is not
    windowed = bool(meta.get("history_max_entries"))
    bad_keys = sorted(k for k, v in meta["memory_stats"].items()
                      if (not windowed or k.endswith(".current")) and stats.get(k) != v)
    # A recording that marks its empty_cache() calls (workloads/cuda_graph_syncs/) shows which left
    # no trace entry: synchronisations no replay can count, said beside the difference.
    unseen = unseen_syncs(meta.get("markers"), trace)
    # Every OOM the trace recorded, and no other: the caught ones (cuDNN's algorithm search, a
    # job's try/except) as well as one that ended the script. Where the script raised one, the
    # replay's last has its figures.
    recorded = sum(1 for e in trace if e.get("action") == "oom")
    events = rep.get("oom_events") or []
    oom_ok = len(events) == recorded and all(e.get("recorded") for e in events) and \
        not rep.get("recorded_ooms_not_reproduced")
    if oom_ok and meta.get("oom"):
        oom_ok = oom_figures((rep["oom"] or {}).get("message")) == oom_figures(meta["oom"])
    return {"ops": ops_ok, "first_diff": first_diff, "n_ops": (len(got_ops), len(want_ops)),
            "bad_keys": bad_keys, "oom": oom_ok, "exit": p.returncode, "unseen_syncs": unseen,
            "num_sync": (stats.get("num_sync_all_streams"), meta["memory_stats"].get("num_sync_all_streams"))}


def unseen_syncs(markers, trace):
    """The marked empty_cache() calls with no trace entry between their marks but the recorder's own
    `snapshot` entries; None without markers."""
    if not markers:
        return None
    unseen = 0
    for i, m in enumerate(markers):
        if m["what"] != "empty_cache:before":
            continue
        end = next((n for n in markers[i + 1:] if n["what"] == "empty_cache:after"), None)
        if end is not None and all(e["action"] == "snapshot" for e in trace[m["at"]:end["at"]]):
            unseen += 1
    return unseen


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, d = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or sorted(f[:-5] for f in os.listdir(d) if f.endswith(".json"))
    exact = total = 0
    for name in names:
        r = check(binary, d, name)
        if r is None:
            continue
        total += 1
        if "error" in r:
            print(f"{name:44s} ERROR {r['error']}")
            continue
        ok = r["ops"] and not r["bad_keys"] and r["oom"]
        exact += ok
        ops = "ok" if r["ops"] else f"differ at op {r['first_diff']} ({r['n_ops'][0]} vs {r['n_ops'][1]})"
        keys = "ok" if not r["bad_keys"] else f"{len(r['bad_keys'])} differ: " + ",".join(r["bad_keys"][:4])
        if "num_sync_all_streams" in r["bad_keys"] and r.get("unseen_syncs") is not None:
            got, want = r["num_sync"]
            keys += f" ({got} of {want}; {r['unseen_syncs']} marked empty_cache() call(s) left no trace entry)"
        print(f"{name:44s} {'EXACT' if ok else 'DIFF '} ops {ops}; stats {keys}; oom {'ok' if r['oom'] else 'differs'}")
    print(f"fidelity: {exact}/{total} runs exact")
    sys.exit(0 if total and exact == total else 1)


if __name__ == "__main__":
    main()
