#!/usr/bin/env python3
"""Where the CUDA driver put a job's segments, measured on recordings (no GPU, no allocsim binary).

usage: driver_placement.py repeats RUN1 RUN2 [RUN ...]
       driver_placement.py rules RECORDING ...

`repeats`: recordings of the same job, each in a process of its own (tools/gpu/record_repeats.sh),
given as NAME (NAME.pickle.gz and NAME.json). For each pair, the first segment operation whose
address relative to the run's first segment differs, and the memory_stats() keys that differ.
`rules`: for every segment allocated after a segment was freed, with the recording's own segments
live at that point, whether each of seven simple rules names the address the driver gave it: a
hole between live segments that fits (the highest, the lowest or the smallest; at its top or
bottom), and the top of the highest address range that freed segments left and none has taken
since, where one fits (allocsim's model, backends/simulated_device.hpp); per recording and in
all.
"""
import gzip
import itertools
import json
import pickle
import sys

GRANULE = 2 << 20


def segment_ops(path):
    """The trace's segment_alloc and segment_free entries, device 0: (action, size, address)."""
    with gzip.open(path) as f:
        snapshot = pickle.load(f)
    traces = snapshot.get("device_traces") or [[]]
    return [(e["action"], e["size"], e["addr"]) for e in traces[0]
            if e["action"] in ("segment_alloc", "segment_free")]


def repeats(names):
    for a, b in itertools.combinations(names, 2):
        ops = [segment_ops(n + ".pickle.gz") for n in (a, b)]
        relative = [[(act, size, addr - o[0][2]) for act, size, addr in o] for o in ops]
        parts = next((i for i, (x, y) in enumerate(zip(*relative)) if x != y), None)
        same_requests = [(x[0], x[1]) for x in relative[0]] == [(y[0], y[1]) for y in relative[1]]
        stats = [json.load(open(n + ".json"))["memory_stats"] for n in (a, b)]
        differ = sorted(k for k in stats[0] if stats[0][k] != stats[1].get(k))
        print(f"{a} / {b}: {len(ops[0])} and {len(ops[1])} segment operations"
              f"{'' if same_requests else ' (other sizes or order)'}; placement parts at "
              f"operation {parts}; memory_stats() keys that differ: {len(differ)} {differ[:4]}")


def round_up(v):
    return (v + GRANULE - 1) // GRANULE * GRANULE


def hole_rule(which, top):
    def place(live, size):
        need = round_up(size)
        spans = sorted(live.items())
        best = None
        for (lo_start, lo_size), (hi_start, _) in zip(spans, spans[1:]):
            lo = lo_start + round_up(lo_size)
            if hi_start < lo + need:
                continue
            at = hi_start - need if top else lo
            key = {"highest": -at, "lowest": at, "smallest": (hi_start - lo, -at)}[which]
            if best is None or key < best[0]:
                best = (key, at)
        return best[1] if best else None
    return place


RULES = {f"{which} hole, {'top' if top else 'bottom'}": hole_rule(which, top)
         for which in ("highest", "lowest", "smallest") for top in (True, False)}
FREED_RULE = "highest freed range, top"


class FreedRanges:
    """The address ranges freed segments left and none has taken since, merged."""

    def __init__(self):
        self.ranges = []  # (start, end), sorted, disjoint

    def add(self, start, end):
        merged = []
        for s, e in self.ranges:
            if e < start or s > end:
                merged.append((s, e))
            else:
                start, end = min(start, s), max(end, e)
        self.ranges = sorted(merged + [(start, end)])

    def take(self, start, end):
        left = []
        for s, e in self.ranges:
            if e <= start or s >= end:
                left.append((s, e))
                continue
            if s < start:
                left.append((s, start))
            if e > end:
                left.append((end, e))
        self.ranges = left

    def place(self, size):
        fits = [e for s, e in self.ranges if e - s >= round_up(size)]
        return max(fits) - round_up(size) if fits else None


def rules(paths):
    names = [*RULES, FREED_RULE]
    total = dict.fromkeys(names, 0)
    placed = 0
    for path in paths:
        live, freed, hits, n = {}, False, dict.fromkeys(names, 0), 0
        ranges = FreedRanges()
        for action, size, addr in segment_ops(path):
            if action == "segment_free":
                live.pop(addr, None)
                ranges.add(addr, addr + round_up(size))
                freed = True
                continue
            if freed:
                n += 1
                for name, rule in RULES.items():
                    hits[name] += rule(live, size) == addr
                hits[FREED_RULE] += ranges.place(size) == addr
            live[addr] = size
            ranges.take(addr, addr + round_up(size))
        placed += n
        for name in names:
            total[name] += hits[name]
        print(f"{path}: {n} segments after a free; " +
              ", ".join(f"{name} {hits[name]}" for name in names))
    print(f"all: {placed} segments after a free; " +
          ", ".join(f"{name} {total[name]} ({100 * total[name] / max(placed, 1):.1f}%)"
                    for name in names))


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("repeats", "rules"):
        sys.exit(__doc__)
    (repeats if sys.argv[1] == "repeats" else rules)(sys.argv[2:])


if __name__ == "__main__":
    main()
