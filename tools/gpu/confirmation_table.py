#!/usr/bin/env python3
"""The table of tools/gpu/confirm_on_gpu.sh: each workload run simulated and on the GPU.

usage: tools/gpu/confirmation_table.py OUTDIR   (reads OUTDIR/gpu.txt and OUTDIR/runs/*.json)
"""

import glob
import json
import os
import sys


def gib(n):
    return f"{n / 2**30:.2f}"


def verdict(run):
    return f"{run['ooms']} OOM" if run["ooms"] else "fits"


def trace_addresses(c):
    t = c["on_trace_addresses"]
    return "same" if t["device_ops_identical"] else f"from #{t['first_difference']}"


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "gpu.txt")) as f:
        machine = [line.strip() for line in f if line.strip()]
    rows, confirmed, total = [], 0, 0
    for path in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
        name, mode = os.path.basename(path)[:-len(".json")].rsplit(".", 1)
        with open(path) as f:
            c = json.load(f)["cuda"]
        sim, gpu, ops = c["simulated"], c["gpu"], c["device_ops"]
        total += 1
        confirmed += c["confirmed"]
        cap = "recorded" if mode == "recorded" else "70% of peak"
        rows.append(
            f"| {name} | {cap} | {verdict(sim)} | {gib(sim['peak_allocated_bytes'])} / "
            f"{gib(sim['peak_reserved_bytes'])} | {verdict(gpu)} | "
            f"{gib(gpu['peak_allocated_bytes'])} / {gib(gpu['peak_reserved_bytes'])} | "
            f"{ops['gpu']} / {ops['simulated']}{'' if ops['identical'] else ' DIFFER'} | "
            f"{trace_addresses(c)} | {c['patterns']['bad_words']} | "
            f"{'LEAK' if c['leak']['leaked'] else 'none'} | "
            f"{'yes' if c['confirmed'] else 'NO'} |")
    skipped = []
    for err in sorted(glob.glob(os.path.join(out, "runs", "*.recorded.err"))):
        name = os.path.basename(err)[:-len(".recorded.err")]
        if not os.path.exists(err[:-len(".err")] + ".json"):
            with open(err) as f:
                skipped.append(f"- {name}: {f.read().strip()}")
    print("# GPU confirmation: the simulation against the same core on a real GPU\n")
    print("Machine: " + "; ".join(machine) + "\n")
    print(f"{confirmed} of {total} runs confirmed: identical device operations (kind, size, "
          "stream, in order) from the simulation placed on the addresses this GPU's driver "
          "gave, the same OOM verdict, every block's pattern intact, and the device's free "
          "memory back to its starting value after empty_cache. The column 'sim. on trace's "
          "addresses' compares the GPU with the simulation as users run it, on the addresses "
          "the trace recorded: where the driver placed segments elsewhere, best fit (which "
          "breaks ties by address) can pick other blocks from that operation on.\n")
    print("| workload | cap | simulated | sim. peak alloc / reserved GiB | GPU | "
          "GPU peak alloc / reserved GiB | device ops GPU / sim. | sim. on trace's addresses | "
          "bad pattern words | leak | equal? |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if skipped:
        print("\nNot run on the GPU:\n" + "\n".join(skipped))
    for name in ("cuda_tests.txt", "sanitizer.txt"):
        path = os.path.join(out, name)
        if os.path.exists(path):
            with open(path) as f:
                print(f"\n{name}:\n```\n{f.read().strip()}\n```")


if __name__ == "__main__":
    main()
