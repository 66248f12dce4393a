#!/usr/bin/env python3
"""Two allocsim_bench binaries on the same benchmarks, run in turn (A, B, A, B, ...) so that a
host's drift falls on both alike; prints each benchmark's median wall time for A and B and B's
change against A.

usage: scripts/bench_compare.py A_BENCH B_BENCH [--rounds N] [--filter REGEX] [--json OUT]
"""
import argparse
import json
import statistics
import subprocess
import tempfile


def run(binary, regex):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, f"--benchmark_filter={regex}", "--benchmark_repetitions=3",
                        f"--benchmark_out={out.name}", "--benchmark_out_format=json"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        runs = json.load(open(out.name))["benchmarks"]
    return [(b["run_name"], b["real_time"], b["time_unit"]) for b in runs
            if b.get("run_type") == "iteration"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--filter", default="BM_Replay(Prepared)?/(gpt2gen|llama_varlen)/percent:100$")
    p.add_argument("--json")
    args = p.parse_args()
    times = {}
    for _ in range(args.rounds):
        for which, binary in (("a", args.a), ("b", args.b)):
            for name, t, unit in run(binary, args.filter):
                times.setdefault(name, {"a": [], "b": [], "unit": unit})[which].append(t)
    print(f"{'benchmark':48s} {'A median':>12s} {'B median':>12s} {'B vs A':>8s}  runs")
    for name, t in times.items():
        a, b = statistics.median(t["a"]), statistics.median(t["b"])
        print(f"{name:48s} {a:10.2f}{t['unit']} {b:10.2f}{t['unit']} {100 * (b / a - 1):+7.1f}%"
              f"  {len(t['a'])}+{len(t['b'])}")
    if args.json:
        json.dump(times, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
