#!/usr/bin/env python3
"""allocsim.fuzz.against's verdict on two recordings of one program (no GPU, no torch): the same,
a deferred free completed elsewhere (timing), a segment placed elsewhere (driver), or the
allocator's policy (another segment, OOM or statistic).

usage: fuzz_against_test.py STAGED_PACKAGE_DIR
"""
import copy, sys

sys.path.insert(0, sys.argv[1])
from allocsim.fuzz.against import first_difference  # noqa: E402

MiB = 1 << 20


def recording(*entries, ooms=(), stats=None):
    trace = [{"action": a, "addr": addr, "size": size} for a, size, addr in entries]
    return {"snapshot": {"device_traces": [trace]},
            "meta": {"ooms": [{"message": m} for m in ooms], "cap_bytes": 8 << 30,
                     "memory_stats": stats or {"num_ooms": len(ooms)}}}


base = recording(("segment_alloc", 20 * MiB, 0x1000), ("alloc", MiB, 0x1000),
                 ("free_requested", MiB, 0x1000), ("alloc", 2 * MiB, 0x100000),
                 ("free_completed", MiB, 0x1000))
failures = []


def check(what, new, kind, old=None):
    got = first_difference(base if old is None else old, new)
    if (got or {}).get("kind") != kind:
        failures.append(f"{what}: {got} (want {kind})")


check("the same recording", copy.deepcopy(base), None)
later = copy.deepcopy(base)
trace = later["snapshot"]["device_traces"][0]
trace[3], trace[4] = trace[4], trace[3]  # the deferred free completed before the next alloc
check("a deferred free completed earlier", later, "timing")
other = copy.deepcopy(base)
other["snapshot"]["device_traces"][0][0]["size"] = 40 * MiB
check("another segment size", other, "policy")
shifted = copy.deepcopy(base)
for e in shifted["snapshot"]["device_traces"][0]:
    e["addr"] += 0x200000
check("the same layout at other addresses", shifted, None)
moved = copy.deepcopy(base)
moved["snapshot"]["device_traces"][0][3]["addr"] += 0x200000  # the second block elsewhere
check("a block placed elsewhere", moved, "driver")
cascade = copy.deepcopy(base)
cascade["snapshot"]["device_traces"][0][1]["addr"] += 0x10000  # the first block elsewhere,
cascade["snapshot"]["device_traces"][0][3]["size"] = 4 * MiB     # then another request
check("another block after the segment was placed elsewhere", cascade, "driver")
full = copy.deepcopy(other)
full["meta"]["cap_bytes"] = 0
full["meta"]["memory_stats"] = {"num_ooms": 0, "num_alloc_retries": 1}
check("without a cap, on a device another program filled", full, "device")
stats = copy.deepcopy(base)
stats["meta"]["memory_stats"] = {"num_ooms": 0, "num_alloc_retries": 1}
check("another statistic", stats, "policy")
refused = copy.deepcopy(base)
refused["meta"]["ooms"] = [{"message": "CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has"}]
check("an OOM the release did not have", refused, "policy")
a = recording(ooms=["CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has 3 free"])
b = recording(ooms=["CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has 5 free"])
if first_difference(a, b) is not None:
    failures.append("the device's free memory in an OOM message counted as a difference")
# Two devices: each compared with its own trace, statistics and OOMs, the device named.
two = copy.deepcopy(base)
two["snapshot"]["device_traces"].append(copy.deepcopy(base["snapshot"]["device_traces"][0]))
two["meta"]["memory_stats_by_device"] = {"0": {"num_ooms": 0}, "1": {"num_ooms": 0}}
check("two devices, the same", copy.deepcopy(two), None, two)
on_1 = copy.deepcopy(two)
on_1["snapshot"]["device_traces"][1][0]["size"] = 40 * MiB
check("another segment size on device 1", on_1, "policy", two)
if (first_difference(two, on_1) or {}).get("device") != 1:
    failures.append("the device of a difference not named")
stats_1 = copy.deepcopy(two)
stats_1["meta"]["memory_stats_by_device"]["1"] = {"num_ooms": 0, "num_alloc_retries": 1}
check("another statistic on device 1", stats_1, "policy", two)
oom_1 = copy.deepcopy(two)
oom_1["meta"]["ooms"] = [{"message": "CUDA out of memory. Tried to allocate 2.00 MiB. GPU 1 has",
                          "device": 1}]
check("an OOM on device 1 the release did not have", oom_1, "policy", two)
for f in failures:
    print("FAIL", f)
print(f"{15 - len(failures)} of 15 verdicts right")
sys.exit(1 if failures else 0)
