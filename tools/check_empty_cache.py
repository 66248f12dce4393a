#!/usr/bin/env python3
"""The empty_cache() what-if against real runs: for each pair in DIR/PAIRS (JSON), a job recorded
without torch.cuda.empty_cache() (`without`) is replayed with `--empty-cache-at step` and compared
with the same job recorded calling it before every step (`with`, replayed as recorded): every
segment operation (with `--segment-addresses-of` the real run's, so that addresses compare too),
every memory_stats() value and the OOM verdict (`compare: all`); or, where the recording without
ends at an OOM the run with the calls did not have, the verdict and the segment operations up to
there, the refused request served (`compare: verdict`). `capped_as_with`: under the `with` run's
cap.

usage: check_empty_cache.py ALLOCSIM DIR     (exit 1 if any pair differs)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import what_if_report  # noqa: E402

allocsim, folder = sys.argv[1], sys.argv[2]


def replay(trace, args):
    return what_if_report.replay(allocsim, trace, args)


def ops(report):
    return [(o["action"], o["size"], o["address"]) for o in report["device_ops"]]


def check(pair):
    without = os.path.join(folder, pair["without"])
    with_calls = os.path.join(folder, pair["with"])
    with open(with_calls[:-len(".pickle.gz")] + ".json") as f:
        recorded = json.load(f)
    setup = ["--capacity", str(recorded["total_bytes"])]
    if pair["capped_as_with"]:
        setup += ["--memory-fraction", repr(recorded["cap_bytes"] / recorded["total_bytes"])]
    real = replay(with_calls, setup)
    what_if = replay(without, [*setup, "--empty-cache-at", "step",
                               "--segment-addresses-of", with_calls])
    problems = []
    # The run's calls: inferred from its releases, or, recorded through allocsim's recorder, made
    # from its marks (these jobs mark no call but empty_cache()).
    made = real["inferred_empty_cache_calls"] + real.get("recorded_calls", {}).get("made", 0)
    if pair["compare"] == "all" and what_if["empty_cache_calls_added"] != made:
        problems.append(f"{what_if['empty_cache_calls_added']} calls added, the run made {made}")
    if (what_if["oom"] is None) != (real["oom"] is None):
        problems.append(f"OOM: what-if {what_if['oom'] is not None}, run {real['oom'] is not None}")
    if pair["compare"] == "all":
        if ops(what_if) != ops(real):
            problems.append(f"segment operations differ ({len(ops(what_if))} against "
                            f"{len(ops(real))})")
        stats = [k for k in real["memory_stats"]
                 if what_if["memory_stats"].get(k) != real["memory_stats"][k]]
        if stats:
            problems.append(f"{len(stats)} memory_stats differ, {stats[:4]}")
        # Without the run's addresses (where allocsim's model of the driver places the segments)
        # statistics may differ, those that depend on addresses first: shown, and a failure only
        # where the report does not say that its addresses are not the run's.
        modelled = replay(without, [*setup, "--empty-cache-at", "step"])
        differ = [k for k in real["memory_stats"]
                  if modelled["memory_stats"].get(k) != real["memory_stats"][k]]
        others = [k for k in differ if not what_if_report.ADDRESS_DEPENDENT.match(k)]
        said = modelled["addresses"]["segments_placed_by_model"] or \
            modelled["addresses"]["mismatched"]
        if differ and not said:
            problems.append(f"placed by the model, statistics differ unsaid: {differ[:4]}")
        model_note = (f"; placed by the model, {len(differ) - len(others)} address-dependent "
                      f"statistics differ" + (f" and {len(others)} others ({others[0]}, ...)"
                                              if others else ""))
    else:
        model_note = ""
        # The recording ends at the request its run was refused; the what-if served it from a
        # new segment, which it gives back (no later request of the trace holds it).
        done = ops(what_if)
        if len(done) >= 2 and done[-1][0] == "segment_free" and done[-2][0] == "segment_alloc" \
                and done[-1][1:] == done[-2][1:]:
            done = done[:-1]
        if what_if["recorded_ooms_not_reproduced"] != what_if["recorded_ooms"]:
            problems.append("the what-if ran out of memory where the recording did")
        if done != ops(real)[:len(done)]:
            problems.append("segment operations differ from the run's up to the recording's end")
    name = f"{pair['without']} + empty_cache per step vs {pair['with']}"
    print(("DIFF " if problems else "same ") + name + (": " + "; ".join(problems) if problems
                                                     else f" ({len(ops(what_if))} segment "
                                                     f"operations, {what_if['empty_cache_calls_added']} calls"
                                                     f"{model_note})"))
    return not problems


with open(os.path.join(folder, "PAIRS")) as f:
    pairs = json.load(f)
same = sum(check(p) for p in pairs)
print(f"{same} of {len(pairs)} pairs as the real runs")
sys.exit(0 if same == len(pairs) else 1)
