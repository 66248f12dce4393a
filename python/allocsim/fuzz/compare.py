"""Replays a program's recording (runner.py) with allocsim and lists where it differs from
what PyTorch did: segment operations, block addresses, every memory_stats() key, every OOM (which
requests failed, and the figures of the last one's message), and any warning of a departure.

usage: python -m allocsim.fuzz.compare [--departures DIR/DEPARTURES] [--without-marks] ALLOCSIM DIR
       [NAME ...]
  every DIR/NAME.json by default; exit 1 if any differs, or with --departures, if any but the
  cases it lists differs, or a listed case is exact or differs without a warning;
  --without-marks: the recordings' capture marks taken out first (the pools inferred)

What a 2.11 trace cannot show is not counted as a difference, and is listed as `unknowable`
(docs/verification.md gives the evidence for each). A recording made through allocsim's recorder
(its JSON's `recorder_marks`) names every empty_cache(), cap change and stats reset, so the first
two below are differences there; it is replayed without --memory-fraction, whose cap its marks
carry (with --without-marks, as PyTorch's own recorder writes it, with the cap). A run without a cap whose cudaMalloc was
refused ran on a device other processes had filled: its differences are of kind `device_full`.
- an empty_cache() that gave nothing back to the device synchronises and leaves no trace entry:
  num_sync_all_streams lower by up to the number of them;
- an empty_cache() whose releases come right before an allocation that takes a new segment (or
  runs out of memory) reads in the trace as that malloc's own retry, which frees the same segments:
  the replay counts it as the retry, num_alloc_retries higher and num_sync_all_streams lower by up
  to the number of them;
- an OOM with nothing cached to release, in a trace with CUDA graphs' private pools, may have been
  made during a capture, where PyTorch skips the retry (and its synchronisation): the replay (which
  retries) says how many (`recorded_ooms_capture_unknown`), num_alloc_retries and
  num_sync_all_streams higher by up to that;
- a run of releases right before a request whose private pool is a guess: read as empty_cache()
  (a capture's malloc frees nothing), though outside a capture the malloc's own retry frees the
  same; the replay says how many (`releases_before_guessed_capture`), num_alloc_retries lower by
  up to that;
- the OOM message's figures where segments freed before the end had their pool guessed and the
  replay repeats every segment operation: which pool their free blocks were in at the OOM the
  operations may not show (the replay warns of it).
"""
import gzip, json, os, pickle, subprocess, sys, tempfile

from .oom_message import oom_figures


def replay(binary, trace_path, meta, marked):
    """allocsim's report on the recording; the cap is given where the recording's marks do not
    carry it (`marked`: allocsim's recorder marked the calls, set_per_process_memory_fraction's
    among them)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "report.json")
        cmd = [binary, "replay", trace_path, "--capacity", str(meta["total_bytes"]), "--json", out]
        if meta.get("cap_bytes") and not marked:
            cmd += ["--memory-fraction", repr(meta["cap_bytes"] / meta["total_bytes"])]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return None, "no answer in 120 s"
        if p.returncode not in (0, 3) or not os.path.exists(out):
            return None, f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"
        with open(out) as f:
            return json.load(f), None


def compare(binary, d, name, without_marks=False):
    """{"name", "differences": [...], "unknowable": [...], "warned": bool}; no differences: exact.
    `without_marks`: replay the recording with its capture marks (user_metadata) taken out, as a
    recorder that does not mark captures would have written it: the pools are inferred."""
    with open(os.path.join(d, name + ".json")) as f:
        meta = json.load(f)
    trace_path = os.path.join(d, name + ".pickle.gz")
    with gzip.open(trace_path) as f:
        snap = pickle.load(f)
    traces = snap.get("device_traces", [])
    if without_marks:
        with tempfile.TemporaryDirectory() as tmp:
            for t in traces:
                for e in t:
                    e.pop("user_metadata", None)
            stripped = os.path.join(tmp, name + ".pickle.gz")
            with gzip.open(stripped, "wb") as f:
                pickle.dump(snap, f)
            return compare_replay(binary, name, meta, stripped, traces, marked=False)
    return compare_replay(binary, name, meta, trace_path, traces,
                          marked=bool(meta.get("recorder_marks")))


def device_full(meta):
    """A run without a cap whose cudaMalloc was refused: the device itself was full, of other
    processes' memory (the fuzzer runs many on one GPU), which the trace does not record."""
    refused = meta.get("calls", {}).get("retries_and_ooms")  # across the program's stats resets
    if refused is None:
        stats = meta["memory_stats"]
        refused = stats.get("num_alloc_retries", 0) + stats.get("num_ooms", 0)
    return not meta.get("cap_bytes") and refused > 0


def per_device(meta, traces, rep):
    """[(device, recorded trace, recorded memory_stats, replayed report, last recorded OOM
    message)] for each device the run used: a recording of one device compares as it always
    has; one of several (its JSON's memory_stats_by_device) device by device, against the
    replay's report of that device."""
    by_device = meta.get("memory_stats_by_device")
    if not by_device:
        trace = next((t for t in traces if t), [])
        return [(0, trace, meta["memory_stats"], rep, meta.get("oom"))]
    reports = {r.get("device"): r for r in rep.get("devices", [])} if "devices" in rep \
        else {next((i for i, t in enumerate(traces) if t), 0): rep}
    out = []
    for key, stats in sorted(by_device.items(), key=lambda kv: int(kv[0])):
        dev = int(key)
        trace = traces[dev] if dev < len(traces) else []
        if not trace and not any(stats.values()):
            continue  # a device the program switched to and never asked anything of
        ooms = [o["message"] for o in meta.get("ooms", []) if o.get("device", 0) == dev]
        out.append((dev, trace, stats, reports.get(dev, {}), ooms[-1] if ooms else None))
    return out


def compare_replay(binary, name, meta, trace_path, traces, marked):
    """compare()'s work on the recording at `trace_path` (whose device traces are `traces`)."""
    result = {"name": name, "alloc_conf": meta.get("alloc_conf", ""), "cap": meta.get("cap_bytes", 0),
              "differences": [], "unknowable": [], "warned": False}
    diffs = result["differences"]
    if device_full(meta):
        result["device_full"] = True
    rep, error = replay(binary, trace_path, meta, marked)
    if error:
        diffs.append({"what": "error", "detail": error})
        return result
    warnings = rep.get("warnings", []) + [w for r in rep.get("devices", [])
                                          for w in r.get("warnings", [])]
    result["warned"] = bool(rep.get("departure")) or \
        any(r.get("departure") for r in rep.get("devices", [])) or any(
        "departs" in w or "OOM" in w or "statistics may differ" in w for w in warnings)
    for dev, trace, recorded_stats, drep, recorded_oom in per_device(meta, traces, rep):
        found = compare_device(meta, marked, trace, recorded_stats, drep, recorded_oom, result,
                               dev)
        if dev or meta.get("memory_stats_by_device"):
            for x in found:
                x["device"] = dev
        diffs += found
    return result


def compare_device(meta, marked, trace, recorded_stats, rep, recorded_oom, result, dev=0):
    """The differences of device `dev`'s replay `rep` from its recorded `trace` and statistics;
    what the trace cannot show goes to result["unknowable"]."""

    def count(key):  # the runner's count of the program, or of this device where it has several
        return meta.get(key + "_by_device", {}).get(str(dev), meta.get(key, 0))

    diffs = []
    want = [(e["action"], e["size"]) for e in trace if e["action"].startswith("segment_")]
    got = [(o.get("action"), o.get("size")) for o in rep.get("device_ops") or []]
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        diffs.append({"what": "ops", "at": at, "replayed": got[at] if at < len(got) else None,
                      "recorded": want[at] if at < len(want) else None})
    addresses = rep.get("addresses") or {}
    if addresses.get("mismatched"):
        diffs.append({"what": "addresses", "mismatched": addresses["mismatched"],
                      "first_event": addresses.get("first_mismatch_event")})
    stats = rep.get("memory_stats") or {}
    # With the recorder's marks every empty_cache() is known: nothing of them is unknowable.
    silent = 0 if marked else count("empty_cache_calls_without_trace_entry")
    like_a_retry = 0 if marked else count("empty_cache_calls_like_a_retry")
    # OOMs with nothing cached to release, in a trace with captures: the replay retries, as
    # outside a capture; the run may have skipped that retry (and its synchronisation).
    in_capture = rep.get("recorded_ooms_capture_unknown", 0)
    # Releases read as empty_cache() before a request guessed to be a capture's: the malloc's own
    # retry, were the guess wrong.
    guessed = rep.get("releases_before_guessed_capture", 0)
    allowed = {"num_sync_all_streams": (-(silent + like_a_retry), in_capture),  # replayed - recorded
               "num_alloc_retries": (-guessed, like_a_retry + in_capture)}
    for key, value in sorted(recorded_stats.items()):
        if stats.get(key) == value:
            continue
        if key in allowed and stats.get(key) is not None and \
                allowed[key][0] <= stats[key] - value <= allowed[key][1]:
            result["unknowable"].append(
                f"{key} {stats[key]} for {value}: {silent} empty_cache() call(s) freed nothing, "
                f"{like_a_retry} read as a retry, {in_capture} OOM(s) perhaps in a capture, "
                f"{guessed} release(s) before a guessed capture")
            continue
        diffs.append({"what": "stat", "key": key, "replayed": stats.get(key), "recorded": value})
    recorded_ooms = [i for i, e in enumerate(trace) if e["action"] == "oom"]
    replayed_ooms = [o["event_index"] for o in rep.get("oom_events", [])]
    if replayed_ooms != recorded_ooms or rep.get("recorded_ooms_not_reproduced"):
        diffs.append({"what": "ooms", "recorded": len(recorded_ooms), "replayed": len(replayed_ooms),
                      "first": next((a for a, b in zip(recorded_ooms + [None], replayed_ooms + [None])
                                     if a != b), None)})
    elif recorded_ooms and oom_figures((rep.get("oom") or {}).get("message")) != oom_figures(recorded_oom):
        replayed_figures = oom_figures((rep.get("oom") or {}).get("message"))
        # The request and the cap must agree; what is allocated and what is reserved but
        # unallocated count a private pool's free blocks as allocated.
        if replayed_figures[:2] == oom_figures(recorded_oom)[:2] and \
                any("OOM message's memory in private pools" in w for w in rep.get("warnings", [])):
            result["unknowable"].append("the OOM message's figures: free blocks of segments whose "
                                        "pool the segment operations leave open")
        else:
            diffs.append({"what": "oom_message", "replayed": (rep.get("oom") or {}).get("message"),
                          "recorded": recorded_oom})
    return diffs


def kind(result):
    """One word for the first difference, to group divergences by."""
    d = result["differences"]
    if not d:
        return None
    if result.get("device_full"):
        return "device_full"
    first = next((x for x in d if x["what"] in ("error", "ooms", "ops")), d[0])
    return first["what"] + (":" + first["key"] if first["what"] == "stat" else "")


def listed_departures(path):
    """The case names a DEPARTURES file lists (list_departures.py writes it)."""
    with open(path) as f:
        return {line.split()[0] for line in f if line.strip() and not line.startswith("#")}


def main():
    args = sys.argv[1:]
    departures = None
    without_marks = "--without-marks" in args
    args = [a for a in args if a != "--without-marks"]
    if len(args) >= 2 and args[0] == "--departures":
        departures = listed_departures(args[1])
        args = args[2:]
    if len(args) < 2:
        sys.exit(__doc__)
    binary, d = args[0], args[1]
    names = args[2:] or sorted(f[:-5] for f in os.listdir(d) if f.endswith(".json"))
    bad = failed = 0
    for name in names:
        r = compare(binary, d, name, without_marks)
        differs = bool(r["differences"]) and not r.get("device_full")
        bad += differs
        status = "EXACT" if not r["differences"] else \
            "DEVICE FULL (other processes) " if r.get("device_full") else \
            "DIFF " + ("(warned) " if r["warned"] else "(silent) ")
        if departures is not None:  # a listed case departs, warned; any other is exact
            listed = name in departures
            if differs != listed or (differs and not r["warned"]):
                failed += 1
                status = "UNEXPECTED " + status + ("(listed) " if listed else "")
        print(f"{name:40s} {status} {json.dumps(r['differences'])[:300]}"
              + (f" unknowable: {r['unknowable']}" if r["unknowable"] else ""))
    print(f"exact: {len(names) - bad}/{len(names)}")
    if departures is not None:
        print(f"unexpected: {failed} (not exact and not a listed departure warned of, or listed "
              f"and exact)")
        sys.exit(1 if failed else 0)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
