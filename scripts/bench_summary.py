#!/usr/bin/env python3
"""Summarises a Google Benchmark JSON file run with --benchmark_repetitions: for each benchmark,
the fastest and the median repetition (wall time and events/s), since a shared host's speed can
drift between runs by tens of percent.

usage: scripts/bench_summary.py bench.json
"""
import json
import statistics
import sys


def main(path):
    with open(path) as f:
        runs = [b for b in json.load(f)["benchmarks"] if b.get("run_type") == "iteration"]
    names = list(dict.fromkeys(b["run_name"] for b in runs))
    print(f"{'benchmark':58s} {'min':>10s} {'median':>10s} {'unit':4s} {'best rate':>14s}")
    for name in names:
        reps = [b for b in runs if b["run_name"] == name]
        times = [b["real_time"] for b in reps]
        rate = max((b["events/s"] for b in reps if "events/s" in b), default=None)
        rate_text = f"{rate / 1e6:9.2f} M ev/s" if rate else ""
        print(f"{name:58s} {min(times):10.3f} {statistics.median(times):10.3f} "
              f"{reps[0]['time_unit']:4s} {rate_text:>14s}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    main(sys.argv[1])
