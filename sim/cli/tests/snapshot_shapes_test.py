#!/usr/bin/env python3
"""Every shape of snapshot a user may bring replays as the shipped ones do.

- PyTorch 2.0's segment blocks carry no `address` (the segment's address plus the sizes of the
  blocks before it) and no `requested_size` (the `real_size` of the block's last `history` entry).
  A shipped history that starts mid-run, whose replay rebuilds its first state from these blocks,
  is rewritten in that shape: `allocsim replay --json` must give the same report.
- A process that drove three GPUs: three shipped runs put on devices 0, 1 and 2 of one file (the
  one on device 1 ran out of memory). Each device must be replayed on its own, as the run alone is
  (the OOM on device 1 named "GPU 1"), `--device` must pick one, `--snapshot-out` keep all three,
  and `plan` answer per device.
- What torch.cuda.memory_snapshot() returns (the segments, no history): the state is reported,
  with a warning, as the end of the full run's replay.
- A block active_pending_free in the state is restored active and not allocated.
- A snapshot without allocator_settings (before PyTorch 2.5) of a job with expandable segments:
  the setting is inferred from the segments, with a warning, and the report is the same.
- Recordings of CUDA-graph jobs (workloads/cuda_graphs/): the private pools that served their
  captures are inferred, with a warning on stderr and in the JSON, and the replay does not depart
  from the run.

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


def report(path, *args):
    p = subprocess.run([binary, "replay", path, "-q", "--json", "-", *args], capture_output=True,
                       text=True)
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


def run(args, codes=(0, 3)):
    p = subprocess.run([binary] + args, capture_output=True, text=True)
    if p.returncode not in codes:
        sys.exit(f"FAIL {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def load(name):
    with gzip.open(os.path.join(workloads, name + ".pickle.gz"), "rb") as f:
        return pickle.load(f)


# Three devices in one process; the run on device 1 was capped and ran out of memory.
runs = ["resnet50_default", "gpt2_default_cap100", "multistream_default"]
meta = json.load(open(os.path.join(workloads, "gpt2_default_cap100.json")))
cap = ["--capacity", str(meta["total_bytes"]),
       "--memory-fraction", repr(meta["cap_bytes"] / meta["total_bytes"])]
alone = []
multi = {"device_traces": [], "segments": [], "allocator_settings": None, "external_annotations": []}
for device, name in enumerate(runs):
    snap = load(name)
    multi["allocator_settings"] = snap["allocator_settings"]
    multi["device_traces"].append(next(t for t in snap["device_traces"] if t))
    multi["segments"] += [dict(seg, device=device) for seg in snap["segments"]]
    multi["external_annotations"] += [dict(a, device=device) for a in snap["external_annotations"]]
    alone.append(json.loads(run(["replay", os.path.join(workloads, name + ".pickle.gz"), "-q",
                                 "--json", "-"] + cap).stdout))
multi_path = os.path.join(tmp, "three_devices.pickle")
with open(multi_path, "wb") as f:
    pickle.dump(multi, f)


def same_as_alone(got, want, device):
    got, want = dict(got), dict(want)
    for r in (got, want):
        r.pop("trace")
        r.pop("device", None)
        if r.get("oom"):
            r["oom"] = dict(r["oom"], message=r["oom"]["message"].replace(f"GPU {device} ", "GPU 0 "))
    # A warning names the file and the device's list in it.
    for r in (got, want):
        r["warnings"] = [w.split("]: ", 1)[-1] for w in r.get("warnings", [])]
    return got == want, [k for k in want if want[k] != got.get(k)]


p = run(["replay", multi_path, "-q", "--json", "-"] + cap)
both = json.loads(p.stdout)
if p.returncode != 3 or [d["device"] for d in both["devices"]] != [0, 1, 2]:
    sys.exit(f"FAIL: three devices: exit {p.returncode}, devices {[d['device'] for d in both['devices']]}")
if both["oom_devices"] != [1] or both["events_total"] != sum(r["events_total"] for r in alone):
    sys.exit(f"FAIL: three devices: totals {both['oom_devices']} {both['events_total']}")
for device, one_device in enumerate(both["devices"]):
    ok, diff = same_as_alone(one_device, alone[device], device)
    if not ok:
        sys.exit(f"FAIL: device {device} of three differs from its run alone in {diff}")
if "GPU 1 has a total capacity" not in both["devices"][1]["oom"]["message"]:
    sys.exit("FAIL: the OOM on device 1 does not name GPU 1")
one = json.loads(run(["replay", multi_path, "-q", "--json", "-", "--device", "1"] + cap).stdout)
ok, diff = same_as_alone(one, alone[1], 1)
if not ok or "devices" in one:
    sys.exit(f"FAIL: --device 1 differs from the run alone in {diff}")
p = run(["replay", multi_path, "-q", "--device", "5"], codes=(2,))
if p.stderr.count("\n") != 1 or "devices 0, 1, 2" not in p.stderr:
    sys.exit(f"FAIL: --device 5 of three: {p.stderr!r}")
text = run(["replay", multi_path] + cap).stdout
if [l for l in text.splitlines() if l.startswith("== device")] != [
        f"== device {d} (of 3 devices in the file) ==" for d in range(3)]:
    sys.exit("FAIL: the text report has no section per device")
out_path = os.path.join(tmp, "three_out.pickle")
run(["replay", multi_path, "-q", "--snapshot-out", out_path] + cap)
with open(out_path, "rb") as f:
    written = pickle.load(f)
if [len(t) > 0 for t in written["device_traces"]] != [True] * 3 or \
        sorted({s["device"] for s in written["segments"]}) != [0, 1, 2]:
    sys.exit("FAIL: --snapshot-out does not hold the three devices")
plans = json.loads(run(["plan", multi_path, "--alloc-conf", "expandable_segments:True",
                        "--json", "-"]).stdout)
if [d["device"] for d in plans["devices"]] != [0, 1, 2]:
    sys.exit("FAIL: plan does not answer per device")
print("three devices in one file: each replayed as its run alone, --device, --snapshot-out, plan")

# torch.cuda.memory_snapshot(): the segments alone.
full = load("gpt2_default")
listed = os.path.join(tmp, "segments_only.pickle")
with open(listed, "wb") as f:
    pickle.dump(full["segments"], f)
p = run(["replay", listed, "-q", "--json", "-"], codes=(0,))
state = json.loads(p.stdout)
end = json.loads(run(["replay", os.path.join(workloads, "gpt2_default.pickle.gz"), "-q", "--json",
                      "-"]).stdout)
if state["fragmentation"]["breakdown_at_end"] != end["fragmentation"]["breakdown_at_end"] or \
        state["memory_stats"]["reserved_bytes.all.current"] != end["memory_stats"]["reserved_bytes.all.current"]:
    sys.exit("FAIL: the segments-only snapshot's state differs from the full run's end")
if "torch.cuda.memory_snapshot()" not in p.stderr or not state.get("warnings"):
    sys.exit(f"FAIL: the segments-only snapshot was not said to be one: {p.stderr!r}")
print("torch.cuda.memory_snapshot() list: the state reported, with a warning")

# Recordings of CUDA-graph jobs (private pools): the pools are inferred from the final segments,
# said in a warning on stderr and in the JSON, and the replay repeats the run's segment operations.
graphs = os.path.join(workloads, "cuda_graphs")
for name in sorted(f[:-5] for f in os.listdir(graphs) if f.endswith(".json")):
    p = run(["replay", os.path.join(graphs, name + ".pickle.gz"), "-q", "--json", "-"])
    r = json.loads(p.stdout)
    if "private pools" not in p.stderr or not any("private pools" in w for w in r.get("warnings", [])):
        sys.exit(f"FAIL: {name}: the inferred private pools were not said: {p.stderr!r}")
    if r.get("departure") or "departs from the recorded run" in p.stderr:
        sys.exit(f"FAIL: {name}: the replay departs from the recorded run: {p.stderr!r}")
p = run(["replay", os.path.join(graphs, "graph-capture_default_segments.pickle.gz"), "-q",
         "--json", "-"], codes=(0,))
if json.loads(p.stdout)["restored"]["segments"] != 29:
    sys.exit("FAIL: the recorded torch.cuda.memory_snapshot() list was not read whole")
print("CUDA-graph recordings: private pools inferred and said, no departure from the run")

# A snapshot from before PyTorch 2.5 has no allocator_settings: expandable segments, which the
# segments and segment_map events show, are inferred, and the report says so.
snap = load("gpt2_expandable")
del snap["allocator_settings"]
unset = os.path.join(tmp, "no_settings.pickle")
with open(unset, "wb") as f:
    pickle.dump(snap, f)
want, _ = report(os.path.join(workloads, "gpt2_expandable.pickle.gz"))
got, stderr = report(unset)
warnings = got.pop("warnings", [])
if got != want or len(warnings) != 1 or "expandable_segments:True inferred" not in stderr:
    sys.exit(f"FAIL: settings not inferred from the segments: {[k for k in want if want[k] != got.get(k)]}, {stderr!r}")
print("no allocator_settings: expandable_segments:True inferred, said, and the same report")

# A block freed with stream uses outstanding (active_pending_free) is restored so: active, not
# allocated.
segments = load("gpt2_default")["segments"]
pending = next(b for seg in segments for b in seg["blocks"]
               if b["state"] == "active_allocated" and b["size"] > 1 << 20)
stats = []
for state in ("active_allocated", "active_pending_free"):
    pending["state"] = state
    with open(listed, "wb") as f:
        pickle.dump(segments, f)
    stats.append(json.loads(run(["replay", listed, "-q", "--json", "-"]).stdout)["memory_stats"])
if stats[0]["allocated_bytes.all.current"] - stats[1]["allocated_bytes.all.current"] != pending["size"] or \
        stats[0]["active_bytes.all.current"] != stats[1]["active_bytes.all.current"]:
    sys.exit("FAIL: a pending-free block was not restored as pending")
print("active_pending_free blocks restored active, not allocated")

# PyTorch 2.14's "annotate" entries (torch.cuda.memory._annotate_tensor): the text attached to a
# live block, kept in the report (block_annotations), nothing warned, and the snapshot told to be
# 2.14's: replayed as the original is with --torch-version 2.14.
snap = load("resnet50_default")
events = snap["device_traces"][0]
first_allocs = [i for i, e in enumerate(events) if e["action"] == "alloc"][:2]
for n, i in enumerate(reversed(first_allocs)):
    events.insert(i + 1, {"action": "annotate", "addr": events[i]["addr"], "size": 0,
                          "stream": events[i]["stream"], "frames": [],
                          "user_metadata": f"weight {n}"})
annotated = os.path.join(tmp, "annotated.pickle")
with open(annotated, "wb") as f:
    pickle.dump(snap, f)
want, _ = report(os.path.join(workloads, "resnet50_default.pickle.gz"), "--torch-version", "2.14")
got, stderr = report(annotated)
kept = got.pop("block_annotations", None)
if got.get("torch_version") != {"version": "2.14",
                                "told_by": "the snapshot: it has annotate entries"}:
    sys.exit(f"FAIL: annotate entries: told {got.get('torch_version')}, not 2.14 by them")
expected = [{"event_index": first_allocs[0] + 1, "address": events[first_allocs[0]]["addr"],
             "text": "weight 1"},
            {"event_index": first_allocs[1] + 2, "address": events[first_allocs[1] + 1]["addr"],
             "text": "weight 0"}]
same = ("memory_stats", "device_ops", "oom", "fragmentation", "addresses")  # (events shift by 2)
if kept != expected or got.get("warnings") or any(got.get(k) != want.get(k) for k in same):
    sys.exit(f"FAIL: annotate entries: {kept} (want {expected}), {got.get('warnings')}, "
             f"{[k for k in same if want.get(k) != got.get(k)]}")
print("2.14's annotate entries kept (block_annotations), nothing else changed, nothing warned")

# --snapshot-out writes them back, each right after the event it followed and on the block where
# the replay put it: under other settings (expandable segments place blocks elsewhere) too.
for what_if in ([], ["--alloc-conf", "expandable_segments:True"]):
    out = os.path.join(tmp, "annotated_out.pickle")
    p = subprocess.run([binary, "replay", annotated, "-q", "--snapshot-out", out, *what_if],
                       capture_output=True, text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"FAIL: --snapshot-out of annotate entries: exit {p.returncode}: {p.stderr}")
    with open(out, "rb") as f:
        written = pickle.load(f)["device_traces"][0]
    notes = [(i, e) for i, e in enumerate(written) if e["action"] == "annotate"]
    allocs = [e for e in written if e["action"] == "alloc"]
    if [e.get("user_metadata") for _, e in notes] != ["weight 1", "weight 0"] or \
            [e["addr"] for _, e in notes] != [allocs[0]["addr"], allocs[1]["addr"]] or \
            [written[i - 1] for i, _ in notes] != allocs[:2]:
        sys.exit(f"FAIL: --snapshot-out {what_if}: annotate entries {notes[:2]}, "
                 f"first allocs {allocs[:2]}")
print("--snapshot-out writes annotate entries back on the replayed blocks, under a what-if too")

# PyTorch 2.14's pinned host memory (record_pinned_host_memory=True): host_segments and host_traces
# reported apart (host_memory), the device's replay unchanged, and the snapshot told 2.14 by them.
snap = load("resnet50_default")
MiB = 1 << 20
snap["host_segments"] = [{"address": 1 << 40, "total_size": 2 * MiB, "allocated_size": MiB,
                          "stream": 0, "blocks": []}]
snap["host_traces"] = [{"action": a, "addr": 1 << 40, "size": n, "stream": 0, "frames": []}
                       for a, n in (("segment_alloc", 2 * MiB), ("alloc", MiB),
                                    ("alloc", MiB // 2), ("free_completed", MiB // 2))]
hosted = os.path.join(tmp, "hosted.pickle")
with open(hosted, "wb") as f:
    pickle.dump(snap, f)
got, _ = report(hosted)
want, _ = report(os.path.join(workloads, "resnet50_default.pickle.gz"), "--torch-version", "2.14")
host = got.pop("host_memory", None)
expected = {"segments": 1, "reserved_bytes": 2 * MiB, "allocated_bytes": MiB,
            "peak_reserved_bytes": 2 * MiB, "peak_allocated_bytes": 3 * MiB // 2,
            "trace_entries": 4}
if host != expected or got.get("torch_version", {}).get("version") != "2.14" or \
        any(got.get(k) != want.get(k) for k in ("memory_stats", "device_ops", "fragmentation")):
    sys.exit(f"FAIL: host memory: {host} (want {expected}), {got.get('torch_version')}")
text = subprocess.run([binary, "replay", hosted], capture_output=True, text=True).stdout
if "Pinned host memory (apart from the device's, not replayed): 2.00 MiB reserved" not in text:
    sys.exit("FAIL: host memory: not in the text report")
print("2.14's pinned host memory reported apart (host_memory), the device's replay unchanged")

# A PyTorch newer than 2.14 writes internal_metadata: shown as it is (JSON report, a text line),
# the device's replay unchanged, replayed as 2.14 and said.
snap = load("resnet50_default")
snap["internal_metadata"] = {"allocator": "native", "version": (2, 15), "pools": {(0, 1): 1.5},
                             "note": 'a "b"\n'}
newer = os.path.join(tmp, "newer.pickle")
with open(newer, "wb") as f:
    pickle.dump(snap, f)
got, _ = report(newer)
shown = got.pop("internal_metadata", None)
if shown != {"allocator": "native", "version": [2, 15], "pools": {"[0,1]": 1.5},
             "note": 'a "b"\n'} or got.get("torch_version", {}).get("version") != "2.14" or \
        any(got.get(k) != want.get(k) for k in ("memory_stats", "device_ops", "fragmentation")):
    sys.exit(f"FAIL: internal_metadata: {shown}, {got.get('torch_version')}")
text = subprocess.run([binary, "replay", newer], capture_output=True, text=True).stdout
if 'internal_metadata (a PyTorch newer than 2.14; not read): {"allocator":"native"' not in text:
    sys.exit("FAIL: internal_metadata: not in the text report")
print("a newer PyTorch's internal_metadata shown as it is, the replay as 2.14's")

# A later PyTorch's allocator setting (main's expandable_segments_reserve), in the settings string
# and the dict: said, in a warning each, and replayed with the settings allocsim reads, as without.
snap = load("gpt2_expandable")
settings = dict(snap["allocator_settings"])
settings["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True,expandable_segments_reserve:0.5"
settings["expandable_segments_reserve"] = 0.5
snap["allocator_settings"] = settings
later = os.path.join(tmp, "later_setting.pickle")
with open(later, "wb") as f:
    pickle.dump(snap, f)
got, _ = report(later)
plain, _ = report(os.path.join(workloads, "gpt2_expandable.pickle.gz"))
warnings = got.pop("warnings", [])
said = ["has what no release up to 2.14 accepts (Unrecognized key 'expandable_segments_reserve'",
        "allocator_settings has 1 key(s) allocsim does not know ('expandable_segments_reserve'"]
if not all(any(s in w for w in warnings) for s in said) or \
        any(got.get(k) != plain.get(k) for k in ("memory_stats", "device_ops", "alloc_conf")):
    sys.exit(f"FAIL: a later PyTorch's setting: {warnings}")
print("a later PyTorch's allocator setting: said, and replayed with the settings allocsim reads")
