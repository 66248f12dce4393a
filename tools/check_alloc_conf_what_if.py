#!/usr/bin/env python3
"""The --alloc-conf what-if against real runs: a job recorded with the defaults, replayed under the
setting the same job was also recorded with, against that recording (the same requests, in the
same order; every pair in PAIRS below).

With `--segment-addresses-of` the other run (the addresses its driver gave its segments): every
segment operation, address included, every memory_stats() value and the OOM verdict equal the
run's. Without it: the verdict and every statistic but those that depend on where the driver put
the segments (ADDRESS_DEPENDENT) equal the run's, and where one of those differs the report says
that segments were placed by the model; with `compare: ops`, every segment operation's kind and
size, in order, too. Under a cap where the allocator frees cached segments to fit (garbage
collection, max_split_size_mb), which ones it frees, and when, depends on their addresses
(`compare: stats`).

usage: check_alloc_conf_what_if.py ALLOCSIM WORKLOADS_DIR     (exit 1 if any pair differs)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import what_if_report  # noqa: E402

# (recorded with the defaults, the same job recorded under another setting, compare)
PAIRS = [("gpt2_default", "gpt2_maxsplit128", "ops"),
         ("gpt2_default", "gpt2_expandable", "ops"),
         ("llama-varlen-bf16_default", "llama-varlen-bf16_expandable", "ops"),
         ("llama-varlen-bf16_default", "llama-varlen-bf16_expandable_cap100", "ops"),
         ("llama-varlen-bf16_default", "llama-varlen-bf16_roundup4", "ops"),
         ("llama-varlen-bf16_default", "llama-varlen-bf16_rounduplist", "ops"),
         ("llama-varlen-bf16_default", "llama-varlen-bf16_maxsplit256_gc07_cap11000000000",
          "stats")]

allocsim, workloads = sys.argv[1], sys.argv[2]


def replay(trace, args):
    return what_if_report.replay(allocsim, trace, args)


def check(source, target, compare):
    with open(os.path.join(workloads, target + ".json")) as f:
        run = json.load(f)
    trace = os.path.join(workloads, source + ".pickle.gz")
    recorded = os.path.join(workloads, target + ".pickle.gz")
    device = ["--capacity", str(run["total_bytes"])]
    if run.get("cap_bytes"):
        device += ["--memory-fraction", repr(run["cap_bytes"] / run["total_bytes"])]
    setup = [*device, "--alloc-conf", run["alloc_conf"]]
    real = replay(recorded, device)
    given = replay(trace, [*setup, "--segment-addresses-of", recorded])
    modelled = replay(trace, setup)
    problems = []
    ops = [(o["action"], o["size"], o["address"]) for o in real["device_ops"]]
    if [(o["action"], o["size"], o["address"]) for o in given["device_ops"]] != ops:
        problems.append("with the run's addresses, the segment operations differ")
    if compare == "ops" and \
            [(o["action"], o["size"]) for o in modelled["device_ops"]] != [o[:2] for o in ops]:
        problems.append("the segment operations' kinds or sizes differ")
    stats = run["memory_stats"]
    for name, r in (("with the run's addresses", given), ("placed by the model", modelled)):
        if (r["oom"] is None) != (run.get("oom") is None):
            problems.append(f"{name}: OOM {r['oom'] is not None}, the run {run.get('oom') is not None}")
        differ = [k for k in stats if r["memory_stats"].get(k) != stats[k]]
        if r is modelled:
            if [k for k in differ if not what_if_report.ADDRESS_DEPENDENT.match(k)]:
                problems.append(f"{name}: statistics differ: {differ[:4]}")
            elif differ and not r["addresses"]["segments_placed_by_model"]:
                problems.append(f"{name}: {differ[0]} differs and the report does not say why")
        elif differ:
            problems.append(f"{name}: statistics differ: {differ[:4]}")
    modelled_differ = sum(modelled["memory_stats"].get(k) != stats[k] for k in stats)
    peak = "reserved_bytes.all.peak"
    verdict = "DIFF" if problems else "same"
    print(f"{verdict} {source} under {run['alloc_conf'] or '(defaults)'} vs {target}: "
          f"{len(ops)} segment operations; placed by the model, "
          f"{modelled['addresses']['segments_placed_by_model']} segments, {modelled_differ} "
          f"statistics differ, peak reserved {modelled['memory_stats'][peak] - stats[peak]:+d} B"
          + "".join(f"\n    {p}" for p in problems))
    return not problems


ok = sum(check(*pair) for pair in PAIRS)
print(f"{ok} of {len(PAIRS)} pairs as the real runs")
sys.exit(0 if ok == len(PAIRS) else 1)
