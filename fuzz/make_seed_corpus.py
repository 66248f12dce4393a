#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (fuzz/corpus/<target>/) from the shipped workloads.

usage: fuzz/make_seed_corpus.py   (from anywhere; deterministic: same files every time)
Snapshot seeds are small real fragments: the first events of shipped traces, re-pickled the way
PyTorch pickles snapshots (protocol 2 and 4), with and without stack frames.
"""
import gzip, os, pickle, random

here = os.path.dirname(os.path.abspath(__file__))
workloads = os.path.join(here, "..", "workloads")
corpus = os.path.join(here, "corpus")


def put(target, name, data):
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fragment(name, start, count):
    snap = pickle.load(gzip.open(os.path.join(workloads, name + ".pickle.gz")))
    events = snap["device_traces"][0][start:start + count]
    return {"segments": [], "device_traces": [events], "allocator_settings": snap["allocator_settings"],
            "external_annotations": []}


fragments = {
    "resnet50": fragment("resnet50_default", 0, 40),
    "multistream": fragment("multistream_default", 0, 60),
    "expandable": fragment("llama-varlen-bf16_expandable", 0, 40),
    "oom": fragment("gpt2_default_cap100", 4400, 40),
    "frames": fragment("gpt2-leak_default_stacks", 0, 6),
    "rounduplist": fragment("llama-varlen-bf16_rounduplist", 0, 30),
}
for name, snap in sorted(fragments.items()):
    for proto in (2, 4):
        data = pickle.dumps(snap, protocol=proto)
        put("fuzz_snapshot_reader", f"{name}_p{proto}.pickle", data)
        put("fuzz_replay", f"{name}_p{proto}.bin", bytes([proto * 3]) + data)
put("fuzz_snapshot_reader", "empty_dict.pickle", pickle.dumps({}))


def shaped_seeds():
    """Snapshot shapes beyond the newest single-device one: several devices, the segments list of
    torch.cuda.memory_snapshot(), PyTorch 2.0's blocks, CUDA graphs' private pools, and events
    that contradict themselves."""
    two = pickle.load(gzip.open(os.path.join(workloads, "twogpu_cap4000000000.pickle.gz")))
    yield "two_devices", {"segments": two["segments"][:6] + two["segments"][-6:],
                          "device_traces": [t[:40] for t in two["device_traces"]],
                          "allocator_settings": two["allocator_settings"], "external_annotations": []}
    graph = pickle.load(gzip.open(os.path.join(workloads, "cuda_graphs", "graph-capture_default.pickle.gz")))
    # Up to the capture's last request: requests routed to the pool (1, 0) by the final segments,
    # segments freed before the capture whose pool the inference must settle.
    yield "graph_pools", {"segments": graph["segments"], "device_traces": [graph["device_traces"][0][:1110]],
                          "allocator_settings": graph["allocator_settings"], "external_annotations": []}
    # The same, its captures marked (user_metadata cuda_graph_pool=A,B on the requests the final
    # segments put in the pool): the pools read, not inferred.
    marked = [dict(e) for e in graph["device_traces"][0][:1110]]
    pool_ranges = [(s["address"], s["address"] + s["total_size"], s["segment_pool_id"])
                   for s in graph["segments"] if tuple(s["segment_pool_id"]) != (0, 0)]
    for e in marked:
        for lo, hi, pool in pool_ranges:
            if e["action"] == "alloc" and lo <= e["addr"] < hi:
                e["user_metadata"] = f"cuda_graph_pool={pool[0]},{pool[1]}"
    yield "graph_pools_marked", {"segments": graph["segments"], "device_traces": [marked],
                                 "allocator_settings": graph["allocator_settings"], "external_annotations": []}
    # The last events only, as a bounded max_entries keeps them: segments from before the first
    # event restored into the pool.
    yield "graph_pools_window", {"segments": graph["segments"], "device_traces": [graph["device_traces"][0][2500:]],
                                 "allocator_settings": graph["allocator_settings"], "external_annotations": []}
    # A mid-run history with expandable segments, ordinary and private: the ranges mapped at its
    # first event rebuilt at their reservations.
    compiled = pickle.load(gzip.open(os.path.join(workloads, "cuda_graphs", "compile-gpt2-infer_expandable.pickle.gz")))
    yield "expandable_window", {"segments": compiled["segments"], "device_traces": [compiled["device_traces"][0][100:]],
                                "allocator_settings": compiled["allocator_settings"], "external_annotations": []}
    yield "segments_list", graph["segments"][:8]
    old = [dict(s, blocks=[{"size": b["size"], "state": b["state"],
                            "history": [{"addr": b["address"], "real_size": b["requested_size"]}]}
                           for b in s["blocks"]]) for s in graph["segments"][:8]]
    yield "torch20_blocks", {"segments": old, "device_traces": [graph["device_traces"][0][:20]]}
    # As PyTorch 2.12-2.14 with allocsim's recorder write it: each entry's pool_id, the recorder's
    # counts in user_metadata, an annotate entry, and the counts where the history started and ended.
    recorded = [dict(e) for e in marked[:300]]
    for i, e in enumerate(recorded):
        mark = e.pop("user_metadata", "")
        e["pool_id"] = tuple(int(x) for x in mark.split("=")[1].split(",")) if mark else (0, 0)
        e["user_metadata"] = (f"allocsim_recorder=1;empty_cache={i // 100};reset_peak.0={i // 150};"
                              f"memory_fraction.0=0.5;last=empty_cache" + (f";{mark}" if mark else ""))
    first = next(e for e in recorded if e["action"] == "alloc")
    recorded.insert(recorded.index(first) + 1, dict(first, action="annotate", user_metadata="weights"))
    yield "recorded_2_14", {"segments": graph["segments"], "device_traces": [recorded],
                            "allocator_settings": graph["allocator_settings"], "external_annotations": [],
                            "allocsim_recorder": {"start": "allocsim_recorder=1;empty_cache=0",
                                                  "end": "allocsim_recorder=1;empty_cache=4;last=empty_cache",
                                                  "max_entries": 1000}}
    ev = lambda action, addr: {"action": action, "addr": addr, "size": 512, "stream": 0}
    yield "contradictions", {"device_traces": [[ev("alloc", 1 << 21), ev("alloc", 1 << 21), ev("teleport", 0),
                                                ev("free_requested", 1 << 22), ev("free_completed", 1 << 22)]]}


for name, snap in shaped_seeds():
    data = pickle.dumps(snap, protocol=4)
    put("fuzz_snapshot_reader", f"{name}.pickle", data)
    put("fuzz_replay", f"{name}.bin", bytes([12]) + data)


def rmm_csv(snap):
    """The same request stream as RMM's logging_resource_adaptor would write it."""
    rows = ["Thread,Time,Action,Pointer,Size,Stream"]
    for i, e in enumerate(snap["device_traces"][0]):
        action = {"alloc": "allocate", "free_completed": "deallocate", "oom": "allocate failure"}.get(e["action"])
        if action:
            rows.append(f"140573312345856,{1634567890 + i / 1000:.6f},{action},{hex(e.get('addr') or 0)},"
                        f"{e['size']},{hex(e['stream'])}")
    return ("\n".join(rows) + "\n").encode()


for name in ("resnet50", "multistream", "oom"):
    put("fuzz_rmm_csv", f"{name}.csv", rmm_csv(fragments[name]))


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def compact(snap):
    """allocsim's compact trace (sim/trace/compact_trace.hpp) of a fragment."""
    actions = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
               "segment_unmap", "oom"]
    zz = lambda v: ((v << 1) ^ (v >> 63)) & (2**64 - 1)
    events = snap["device_traces"][0]
    out = bytearray(b"ATRACE1\n") + varint(0) + varint(len(events))
    addr = time = 0
    for e in events:
        a = e["action"]
        out.append(actions.index(a) if a in actions else 8)
        out += varint(zz((e.get("addr") or 0) - addr)) + varint(e["size"]) + varint(e["stream"])
        out += varint(zz(e.get("time_us", 0) - time))
        if a == "oom":
            out += varint(e.get("device_free", 0))
        addr, time = e.get("addr") or 0, e.get("time_us", 0)
    return bytes(out)


for name in ("multistream", "oom", "expandable"):
    put("fuzz_snapshot_reader", f"{name}.atrace", compact(fragments[name]))
put("fuzz_rmm_csv", "header_only.csv", b"Thread,Time,Action,Pointer,Size,Stream\n")
put("fuzz_snapshot_reader", "global.pickle", b"\x80\x02cos\nsystem\n(S'true'\ntR.")

for i, text in enumerate([
        "", "max_split_size_mb:128", "expandable_segments:True", "garbage_collection_threshold:0.6",
        "roundup_power2_divisions:4", "roundup_power2_divisions:[64:8,256:4,1024:4,>:1]",
        "max_split_size_mb:256,garbage_collection_threshold:0.7", "max_non_split_rounding_mb:64",
        "backend:native,release_lock_on_cudamalloc:True", "pinned_num_register_threads:8",
        "max_split_size_mb:19", "expandable_segments:true"]):
    put("fuzz_alloc_conf", f"seed{i:02d}.txt", text.encode())

rng = random.Random(20261122)
for i in range(24):
    put("fuzz_allocator_ops", f"seed{i:02d}.bin", bytes(rng.randrange(256) for _ in range(rng.randrange(16, 600))))


def allocator_ops(program, cap, conf):
    """A differential-fuzzing program (python/allocsim/fuzz/programs.py) in fuzz_allocator_ops' bytes:
    its settings, its cap as the device's size, and each operation as the nearest the harness has
    (a capture's requests go to a private pool, a graph dropped releases it, a tensor given to
    another stream is freed deferred)."""
    flags = (1 if "expandable_segments:True" in conf else 0) | (2 if "max_split_size_mb" in conf else 0) \
        | (4 if "garbage_collection_threshold" in conf else 0) | (8 if "roundup_power2_divisions" in conf else 0)
    capacity_mib = min(cap >> 20, 4095) if cap else 4095
    out = bytearray([flags]) + (capacity_mib - 64 if capacity_mib > 64 else 0).to_bytes(2, "big") \
        + bytes([0, 108, 70, 2, 0, 0])
    live, recorded, pool_of, capture = [], set(), {}, None
    for op in program:
        kind = op[0]
        if kind == "alloc":
            size, stream = op[2], op[3] % 3
            if size < 4096:
                cls, raw = 0, size - 1
            elif size < 2**20:
                cls, raw = 1, size - 1
            elif size < 10 * 2**20:
                cls, raw = 2, size - 2**20
            elif size < 10 * 2**20 + 2**24:
                cls, raw = 3, size - 10 * 2**20
            else:
                cls, raw = 4, min((size >> 20) - 1, 255)
            pool = pool_of[capture] if capture is not None else 0
            out += bytes([0, cls]) + raw.to_bytes(3, "big") + bytes([stream + 3 * (pool - 1 if pool else 7)])
            live.append(op[1])
        elif kind == "free" and op[1] in live:
            out += bytes([10 if op[1] in recorded else 7, live.index(op[1]) % 256])
            live.remove(op[1])
        elif kind == "record":
            recorded.add(op[1])
        elif kind == "empty_cache":
            out.append(12)
        elif kind == "capture":
            pool_of[op[1]] = pool_of.get(op[3], 1 + op[1] % 2)
            capture = op[1]
        elif kind == "end_capture":
            capture = None
        elif kind == "drop_graph" and op[1] in pool_of:
            out += bytes([15, pool_of[op[1]] - 1])
    return bytes(out)


# The differential fuzzer's programs on the CPU: a sample of its generator's, and every shrunk
# case shipped in workloads/oracle_fuzz/ (whose recording also seeds the whole replay).
import sys  # noqa: E402
sys.path.insert(0, os.path.join(here, "..", "python"))
from allocsim.fuzz import programs  # noqa: E402
for seed in range(12):
    prog, cap = programs.generate(seed, capped=seed % 2 == 1, graphs=seed % 3 == 0)
    put("fuzz_allocator_ops", f"oracle_program{seed:02d}.bin", allocator_ops(prog[:1500], cap, ""))
oracle_dir = os.path.join(workloads, "oracle_fuzz")
for f in sorted(os.listdir(oracle_dir)):
    if not f.endswith(".json"):
        continue
    name = f[:-5]
    import json  # noqa: E402
    with open(os.path.join(oracle_dir, f)) as fh:
        meta = json.load(fh)
    put("fuzz_allocator_ops", f"oracle_{name}.bin", allocator_ops(meta["program"], meta["cap_bytes"],
                                                                  meta["alloc_conf"]))
    snap = pickle.load(gzip.open(os.path.join(oracle_dir, name + ".pickle.gz")))
    put("fuzz_replay", f"oracle_{name}.bin", bytes([0x80 | 12]) + pickle.dumps(snap, protocol=4))
print("wrote", sum(len(files) for _, _, files in os.walk(corpus)), "seed files under", corpus)
