"""One PyTorch build against another's recordings: an allocator change checked against the release.

The programs of an earlier run (`python -m allocsim.fuzz ... --keep-recordings`, made with the
release) run again through the PyTorch this process imports (the changed build), under the same
settings and caps, recorded the same way; each new recording is compared with the old one, entry
by entry: every segment operation and block (action and size), every memory_stats() value, every
OOM (the request it refused). What a difference is told to be, by its first entry:
- `device`: a run without a cap had a cudaMalloc refused (the device, shared with other programs,
  was full);
- `timing`: a deferred free completed at another point (a CUDA event the GPU reached sooner or
  later);
- `driver`: the CUDA driver laid the segments out otherwise (addresses are compared as the segment
  they lie in, by the order the run made it, and the offset in it: the same layout at other
  addresses is no difference), before or without any other difference (best fit breaks ties by
  address, so what follows may follow from it);
- `policy`: anything else: the allocator's own doing, what an allocator change is checked for.

usage: python -m allocsim.fuzz.against OLD_RUN OUTDIR [--jobs J] [--minutes M]
  OLD_RUN: the earlier run's OUTDIR (its recordings/ and summary.json).
Writes OUTDIR/summary.json (each program: `kind`, null for the same, and the first difference) and
OUTDIR/summary.txt; the new recordings in OUTDIR/recordings.
"""
import argparse, bisect, concurrent.futures, glob, gzip, json, os, pickle, sys, threading, time

from .compare import device_full
from .driver import Worker


def entries(snapshot, device=None):
    """A device's trace entries (by default the first device's with any) as (action, size,
    where): where is the address as the segment it lies in (the how-manieth the run made, by its
    first address) and the offset in it, so that a run the driver gave the same layout at other
    addresses reads the same."""
    traces = snapshot.get("device_traces", [])
    trace = next((t for t in traces if t), []) if device is None else \
        (traces[device] if device < len(traces) else [])
    bases, ordinals = [], {}  # live segments' (or mapped ranges') first addresses, sorted
    out = []
    for e in trace:
        action, size, addr = e.get("action"), e.get("size"), e.get("addr")
        if action in ("segment_alloc", "segment_map") and addr not in ordinals:
            ordinals[addr] = len(ordinals)
        if action in ("segment_alloc", "segment_map"):
            bisect.insort(bases, addr)
        where = None
        if addr is not None and action != "oom":
            i = bisect.bisect_right(bases, addr) - 1
            where = (ordinals[bases[i]], addr - bases[i]) if i >= 0 else ("outside", addr)
        if action in ("segment_free", "segment_unmap") and addr in bases:
            bases.remove(addr)
        out.append((action, size, where))
    return out


def refused(meta, device=None):
    """The requests a recording's OOMs refused (on `device`, where given): their messages up to
    the device's free memory."""
    return [o.get("message", "").split(". GPU")[0] for o in meta.get("ooms", [])
            if device is None or o.get("device", 0) == device]


def first_difference(old, new):
    """Where two recordings of one program part, and whose doing it is: None where they agree.
    A program run on several devices is compared device by device."""
    by_device = old["meta"].get("memory_stats_by_device")
    if not by_device:
        return device_difference(old, new, None)
    for key in sorted(by_device, key=int):
        difference = device_difference(old, new, int(key))
        if difference:
            return dict(difference, device=int(key))
    return None


def device_difference(old, new, device):
    """first_difference() on one device (None: a recording of one device)."""
    old_trace, new_trace = entries(old["snapshot"], device), entries(new["snapshot"], device)
    placed = next((i for i, (a, b) in enumerate(zip(old_trace, new_trace)) if a != b), None)
    sized = [e[:2] for e in old_trace], [e[:2] for e in new_trace]
    if sized[0] != sized[1]:
        at = next((i for i, (a, b) in enumerate(zip(*sized)) if a != b),
                  min(len(old_trace), len(new_trace)))
        want = old_trace[at] if at < len(old_trace) else None
        got = new_trace[at] if at < len(new_trace) else None
        if device_full(old["meta"]) or device_full(new["meta"]):
            kind = "device"
        elif "free_completed" in ((got or (None,))[0], (want or (None,))[0]):
            kind = "timing"
        elif placed is not None and placed < at:  # best fit breaks ties by address
            kind = "driver"
        else:
            kind = "policy"
        return {"kind": kind, "what": "trace", "entry": at, "old": want, "new": got,
                "first_address_difference": placed}
    if refused(old["meta"], device) != refused(new["meta"], device):
        return {"kind": "policy", "what": "ooms", "old": refused(old["meta"], device),
                "new": refused(new["meta"], device)}

    def stats(meta):
        return meta["memory_stats"] if device is None else \
            meta.get("memory_stats_by_device", {}).get(str(device), {})

    stats_old, stats_new = stats(old["meta"]), stats(new["meta"])
    keys = sorted(k for k in set(stats_old) | set(stats_new)
                  if stats_old.get(k) != stats_new.get(k))
    if keys:
        return {"kind": "policy", "what": "memory_stats", "keys": keys[:8],
                "old": [stats_old.get(k) for k in keys[:8]],
                "new": [stats_new.get(k) for k in keys[:8]]}
    if placed is not None:
        return {"kind": "driver", "what": "addresses", "entry": placed, "old": old_trace[placed],
                "new": new_trace[placed]}
    return None


def load(folder, name):
    with open(os.path.join(folder, name + ".json")) as f:
        meta = json.load(f)
    with gzip.open(os.path.join(folder, name + ".pickle.gz")) as f:
        snapshot = pickle.load(f)  # the fuzzer's own recordings
    return {"meta": meta, "snapshot": snapshot}


def run_setting(conf, metas, outdir, deadline, log):
    """Every old recording made under `conf`, run again here and compared."""
    results = []
    worker = Worker(conf)
    try:
        for path in metas:
            if time.time() > deadline:
                break
            folder, name = os.path.dirname(path), os.path.basename(path)[:-len(".json")]
            old = load(folder, name)
            new_dir = os.path.join(outdir, "recordings", os.path.basename(folder))
            try:
                answer = worker.record(name, old["meta"]["program"], old["meta"]["cap_bytes"],
                                       new_dir)
            except RuntimeError as e:
                answer = {"error": f"PyTorch crashed: {e}"}
            if "error" in answer:
                results.append({"name": name, "conf": conf,
                                "error": answer["error"].splitlines()[0]})
                worker.close()
                worker = Worker(conf)
                continue
            difference = first_difference(old, load(new_dir, name))
            results.append({"name": name, "conf": conf,
                            "kind": difference["kind"] if difference else None,
                            "difference": difference})
            log(f"{name} {conf!r}: {difference['kind'] if difference else 'the same'}")
    finally:
        worker.close()
    return results


def summarize(results):
    lines = []
    for conf in sorted({r["conf"] for r in results}):
        rs = [r for r in results if r["conf"] == conf]
        counts = {}
        for r in rs:
            k = "error" if "error" in r else (r["kind"] or "same")
            counts[k] = counts.get(k, 0) + 1
        lines.append(f"{conf or '(defaults)'}: {len(rs)} programs, {counts}")
    done = [r for r in results if "error" not in r]
    lines.append(f"total: {len(results)} programs, {sum(not r['kind'] for r in done)} the same, "
                 + ", ".join(f"{sum(r['kind'] == k for r in done)} {k}"
                             for k in ("device", "timing", "driver", "policy"))
                 + f", {len(results) - len(done)} errors")
    return lines


def main():
    ap = argparse.ArgumentParser(prog="python -m allocsim.fuzz.against",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("old_run", help="an earlier run's OUTDIR, made with --keep-recordings")
    ap.add_argument("outdir")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=8)
    args = ap.parse_args()
    metas = sorted(glob.glob(os.path.join(args.old_run, "recordings", "*", "*.json")))
    if not metas:
        sys.exit(f"{args.old_run}: no recordings (run the fuzzer with --keep-recordings)")
    by_conf = {}
    for path in metas:
        with open(path) as f:
            by_conf.setdefault(json.load(f).get("alloc_conf", ""), []).append(path)
    os.makedirs(args.outdir, exist_ok=True)
    lock = threading.Lock()

    def log(line):
        with lock:
            print(line, flush=True)

    start = time.time()
    deadline = start + args.minutes * 60
    results = []
    # Uncapped recordings first, then the capped, as the fuzzer ran them (half the time each): a
    # capped program never shares the GPU with one that may fill it.
    for capped, phase_end in ((False, start + (deadline - start) / 2), (True, deadline)):
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
            futures = []
            for conf, paths in by_conf.items():
                mine = [p for p in paths if os.path.basename(os.path.dirname(p)).endswith("_cap")
                        == capped]
                if mine:
                    futures.append(ex.submit(run_setting, conf, mine, args.outdir, phase_end,
                                             log))
            for f in futures:
                results += f.result()
    with open(os.path.join(args.outdir, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = summarize(results)
    with open(os.path.join(args.outdir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
