#!/usr/bin/env python3
"""Cuts a recorded trace as a bounded max_entries would and checks allocsim's replay of each cut.

usage: check_windows.py ALLOCSIM DIR/NAME.pickle.gz [F1,F2,...]

For each fraction F (default 0.1,0.25,0.5,0.75,0.9) it keeps device 0's events from F of the way on,
with the snapshot's final `segments` (what `_record_memory_history(max_entries=N)` leaves), replays
that with `--capacity` from NAME.json's `total_bytes`, and checks against the recording:
  ops      every segment_alloc / segment_free / segment_map / segment_unmap after the cut, in order,
           size and address
  addrs    every block address (the replay's own check against the recorded ones)
  final    `--snapshot-out` equal to the file's `segments` (addresses, sizes, streams, pools, and
           each block's size and state)
  current  every `.current` statistic equal to PyTorch's at the end of the run
Prints one row per cut and, last, "windows: K/N exact". Exit status 0 only if all are exact.
"""
import gzip, json, os, pickle, subprocess, sys, tempfile


def segments(snap):
    return sorted((s["address"], s["total_size"], s["stream"], tuple(s.get("segment_pool_id", (0, 0))),
                   tuple((b["size"], b["state"]) for b in s["blocks"])) for s in snap["segments"])


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binary, path = sys.argv[1], sys.argv[2]
    fractions = [float(f) for f in sys.argv[3].split(",")] if len(sys.argv) > 3 else [0.1, 0.25, 0.5, 0.75, 0.9]
    meta = json.load(open(path[:-len(".pickle.gz")] + ".json"))
    with gzip.open(path) as f:
        snap = pickle.load(f)  # a recording of our own: plain data
    events = snap["device_traces"][0]
    exact = 0
    with tempfile.TemporaryDirectory() as tmp:
        for fraction in fractions:
            cut = int(len(events) * fraction)
            window = dict(snap, device_traces=[events[cut:]] + snap["device_traces"][1:])
            trace = os.path.join(tmp, "window.pickle")
            with open(trace, "wb") as f:
                pickle.dump(window, f)
            report, out = os.path.join(tmp, "report.json"), os.path.join(tmp, "end.pickle")
            cap = ["--memory-fraction", repr(meta["cap_bytes"] / meta["total_bytes"])] \
                if meta.get("cap_bytes") else []
            p = subprocess.run([binary, "replay", trace, "--capacity", str(meta["total_bytes"]), *cap,
                                "-q", "--json", report, "--snapshot-out", out],
                               capture_output=True, text=True)
            if p.returncode not in (0, 3):
                print(f"cut {fraction:<6} at event {cut:<7} ERROR exit {p.returncode}: {p.stderr.strip()[-200:]}")
                continue
            r = json.load(open(report))
            want = [(e["action"], e["size"], e["addr"]) for e in events[cut:] if e["action"].startswith("segment_")]
            got = [(o["action"], o["size"], o["address"]) for o in r["device_ops"]]
            with open(out, "rb") as f:
                end = pickle.load(f)
            current = sorted(k for k, v in meta["memory_stats"].items()
                             if k.endswith(".current") and r["memory_stats"].get(k) != v)
            checks = {"ops": got == want, "addrs": r["addresses"]["mismatched"] == 0,
                      "final": segments(end) == segments(snap), "current": not current}
            ok = all(checks.values())
            exact += ok
            print(f"cut {fraction:<6} at event {cut:<7} {'EXACT' if ok else 'DIFF '} "
                  + " ".join(f"{k} {'ok' if v else 'differs'}" for k, v in checks.items())
                  + f"; restored {r['restored']['segments']} segments, {r['restored']['blocks']} blocks")
    print(f"windows: {exact}/{len(fractions)} exact")
    sys.exit(0 if exact == len(fractions) else 1)


if __name__ == "__main__":
    main()
