#!/usr/bin/env python3
"""allocsim.fuzz on several devices (no GPU, no torch): the generator lays device switches over a
program without changing it, never inside a capture, the same for the same seed; the comparison
splits a recording of several devices into one per device, each against the replay's report of
that device, and names the device of each difference.

usage: fuzz_devices_test.py STAGED_PACKAGE_DIR
"""
import sys

sys.path.insert(0, sys.argv[1])
from allocsim.fuzz import compare, programs  # noqa: E402

failures = []


def expect(what, ok):
    if not ok:
        failures.append(what)


for shape in ("fuzz", "user", "pools"):
    for seed in range(6):
        one, cap = programs.generate(seed, seed % 2 == 1, True, shape)
        two, cap2 = programs.generate(seed, seed % 2 == 1, True, shape, devices=2)
        switches = [op for op in two if op[0] == "device"]
        expect(f"{shape} {seed}: the program under the switches is the one-device program",
               [op for op in two if op[0] != "device"] == one and cap == cap2)
        expect(f"{shape} {seed}: switches", switches and
               all(op[1] in (0, 1) for op in switches) and
               all(a[1] != b[1] for a, b in zip(switches, switches[1:])))
        expect(f"{shape} {seed}: the same seed, the same program",
               two == programs.generate(seed, seed % 2 == 1, True, shape, devices=2)[0])
        capturing = False
        for op in two:
            capturing = op[0] == "capture" or (capturing and op[0] != "end_capture")
            expect(f"{shape} {seed}: no switch inside a capture",
                   not (capturing and op[0] == "device"))
        # shrinking keeps switches as they are: any subset stays a valid program
        expect(f"{shape} {seed}: valid_subset keeps every operation",
               programs.valid_subset(two, range(len(two))) == two)

# The comparison of a recording of two devices: each device against its own report.
trace0 = [{"action": "segment_alloc", "size": 2 << 20}, {"action": "alloc", "size": 512}]
trace1 = [{"action": "segment_alloc", "size": 20 << 20}, {"action": "alloc", "size": 4 << 20},
          {"action": "oom", "size": 1 << 30}]
meta = {"memory_stats": {"num_ooms": 0},
        "memory_stats_by_device": {"0": {"num_ooms": 0}, "1": {"num_ooms": 1}, "2": {}},
        "ooms": [{"op": 9, "message": "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 1",
                  "device": 1}]}
rep = {"devices": [{"device": 0, "memory_stats": {"num_ooms": 0},
                    "device_ops": [{"action": "segment_alloc", "size": 2 << 20}]},
                   {"device": 1, "memory_stats": {"num_ooms": 1},
                    "device_ops": [{"action": "segment_alloc", "size": 20 << 20}],
                    "oom_events": [{"event_index": 2}],
                    "oom": {"message": "CUDA out of memory. Tried to allocate 1.00 GiB. GPU 1"}}]}
pairs = compare.per_device(meta, [trace0, trace1], rep)
expect(f"one pair per device used (device 2 asked nothing): {[p[0] for p in pairs]}",
       [p[0] for p in pairs] == [0, 1])
expect("each device's OOM message", pairs[1][4] == meta["ooms"][0]["message"] and pairs[0][4] is None)
result = {"differences": [], "unknowable": []}
for dev, trace, stats, drep, oom in pairs:
    expect(f"device {dev} exact", compare.compare_device(meta, True, trace, stats, drep, oom,
                                                         result) == [])
rep["devices"][1]["memory_stats"]["num_ooms"] = 2
found = compare.compare_device(meta, True, *pairs[1][1:3], rep["devices"][1], pairs[1][4], result)
expect(f"a difference on device 1: {found}",
       found == [{"what": "stat", "key": "num_ooms", "replayed": 2, "recorded": 1}])
# Unmarked (as PyTorch's recorder writes it): an empty_cache() that gave nothing back on a device
# left no entry there, each device by its own count.
meta_counts = dict(meta, empty_cache_calls_without_trace_entry=2,
                   empty_cache_calls_without_trace_entry_by_device={"0": 0, "1": 2})
for dev, allowed in ((0, False), (1, True)):
    drep = {"memory_stats": {"num_sync_all_streams": 3}}
    found = compare.compare_device(meta_counts, False, [], {"num_sync_all_streams": 5}, drep, None,
                                   {"differences": [], "unknowable": []}, dev)
    expect(f"device {dev}: two syncs fewer allowed: {allowed}", (found == []) == allowed)

# A recording of one device compares as it always has, against the whole report.
single = compare.per_device({"memory_stats": {"x": 1}, "oom": None}, [trace0], rep)
expect("one device: the whole report", single == [(0, trace0, {"x": 1}, rep, None)])

print("\n".join(failures) or "ok")
sys.exit(1 if failures else 0)
