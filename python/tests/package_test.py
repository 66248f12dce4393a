"""The allocsim Python package on the shipped workloads, on a CPU, with no torch: the calls return
what the CLI's JSON says, take a snapshot as a path or as the dict, raise the CLI's error line, and
advise on a recorded OOM (the OOM advisor in a process, allocsim.torch, is torch_test.py's).

usage: package_test.py STAGED_PACKAGE_DIR WORKLOADS_DIR
"""
import gzip
import json
import os
import pickle
import subprocess
import sys
import tempfile

staged, workloads = sys.argv[1], sys.argv[2]
sys.path.insert(0, staged)
os.environ.pop("ALLOCSIM_BINARY", None)  # the binary staged with the package
import allocsim  # noqa: E402

failed = []


def check(ok, what):
    if not ok:
        failed.append(what)
        print("FAIL", what)


def cli_json(*args):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run([allocsim.binary(), *args, "--json", out], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)


def load(name):
    with gzip.open(os.path.join(workloads, name + ".pickle.gz")) as f:
        return pickle.load(f)  # the repository's own recordings


resnet = os.path.join(workloads, "resnet50_default.pickle.gz")
llama_oom = os.path.join(workloads, "llama-varlen-bf16_default_cap10500000000.pickle.gz")

check(allocsim.binary() == os.path.abspath(os.path.join(staged, "allocsim", "bin", "allocsim")),
      f"the staged binary is used: {allocsim.binary()}")

# replay: the CLI's JSON, from a path and from the dict.
report = allocsim.replay(resnet, capacity="2GiB")
check(report == cli_json("replay", resnet, "--capacity", "2GiB", "-q"),
      "replay(path) is the CLI's JSON report")
check(report["oom"] is not None and report["ooms"] == 1, "an OOM is a report, not an error")
from_dict = allocsim.replay(load("resnet50_default"), capacity="2GiB")
check({k: v for k, v in from_dict.items() if k != "trace"} ==
      {k: v for k, v in report.items() if k != "trace"}, "replay(dict) reports as replay(path)")
fitted = allocsim.replay(resnet, capacity=80 << 30, alloc_conf="expandable_segments:True")
check(fitted["oom"] is None and fitted["alloc_conf"] == "expandable_segments:True",
      "replay passes capacity (bytes) and alloc_conf")

# plan: the CLI's JSON, with a card or a limit.
plans = allocsim.plan(resnet, card="4GiB", alloc_conf=["expandable_segments:True"])
check(plans == cli_json("plan", resnet, "--card", "4GiB", "--alloc-conf",
                        "expandable_segments:True"), "plan(path) is the CLI's JSON")
check([p["alloc_conf"] for p in plans["plans"]] == ["", "expandable_segments:True"],
      "plan's settings: the recorded one first, then those asked for")
limited = allocsim.plan(llama_oom, limit=10_500_000_000)
check(limited["limit_bytes"] == 10_500_000_000, "plan passes limit")
gpt2 = [os.path.join(workloads, "sweeps", f"gpt2_batch-{v}.pickle.gz") for v in (1, 2, 4)]
swept = allocsim.plan_sweep(gpt2, at=[1, 2, 4], limit=17_000_000_000,
                            alloc_conf=["expandable_segments:True"])
check(swept == cli_json("plan", *gpt2, "--at", "1,2,4", "--limit", "17000000000", "--alloc-conf",
                        "expandable_segments:True"), "plan_sweep is the CLI's JSON")
check([p["max_value"] for p in swept["plans"]] == [8, 8], f"batch 8 fits: {swept['plans']}")

# plan_accumulation: the remedies at batch 16, gradient accumulation among them.
remedies = allocsim.plan_accumulation(gpt2, at=[1, 2, 4], batch=16, card="24GiB",
                                      alloc_conf=["expandable_segments:True"])
check(remedies == cli_json("plan", *gpt2, "--at", "1,2,4", "--batch", "16", "--card", "24GiB",
                           "--alloc-conf", "expandable_segments:True"),
      "plan_accumulation is the CLI's JSON")
check([m["passes"] for m in remedies["gradient_accumulation"]] == [2, 4, 8] and
      remedies["cheapest"] == {"alloc_conf": "", "passes": 2, "micro_batch": 8},
      f"no setting fits batch 16 on 24 GiB, two micro-batches of 8 do: {remedies['cheapest']}")

# The empty_cache() what-if: the CLI's report, with its added calls and their cost.
llama = os.path.join(workloads, "llama-varlen-bf16_default.pickle.gz")
with_calls = allocsim.replay(llama, capacity="11GiB", empty_cache_at="step")
check(with_calls == cli_json("replay", llama, "--capacity", "11GiB", "--empty-cache-at", "step",
                             "-q"), "replay(empty_cache_at=) is the CLI's report")
check(with_calls["empty_cache_calls_added"] == 11 and with_calls["oom"] is None and
      with_calls["empty_cache_cost"]["extra_device_allocs"] > 0,
      f"empty_cache per step fits the 11 GiB card, at a cost: {with_calls.get('empty_cache_cost')}")

# Another release's allocator: the CLI's --torch-version, named in the report.
as_214 = allocsim.replay(resnet, capacity="2GiB", torch_version="2.14")
check(as_214 == cli_json("replay", resnet, "--capacity", "2GiB", "--torch-version", "2.14", "-q")
      and as_214["torch_version"] == {"version": "2.14", "told_by": "--torch-version"},
      f"replay(torch_version=) is the CLI's report: {as_214.get('torch_version')}")
check(allocsim.plan(resnet, card="2GiB", torch_version="2.13")["torch_version"] == "2.13",
      "plan(torch_version=) follows that release")

# The report types name every key the reports have, and no key they lack.
def keys_match(typed, report, what):
    extra = set(report) - typed.__required_keys__ - typed.__optional_keys__
    missing = typed.__required_keys__ - set(report)
    check(not extra and not missing, f"{what}: keys not typed {sorted(extra)}, "
          f"typed but missing {sorted(missing)}")


keys_match(allocsim.ReplayReport, report, "ReplayReport")
keys_match(allocsim.ReplayReport, with_calls, "ReplayReport with empty_cache_at")
keys_match(allocsim.reports.Oom, report["oom"], "Oom")
keys_match(allocsim.reports.Fragmentation, report["fragmentation"], "Fragmentation")
keys_match(allocsim.reports.DeviceOp, report["device_ops"][0], "DeviceOp")
keys_match(allocsim.PlanReport, plans, "PlanReport")
keys_match(allocsim.reports.Plan, plans["plans"][0], "Plan")
if "empty_cache_every_step" in plans:
    keys_match(allocsim.reports.EmptyCachePlan, plans["empty_cache_every_step"], "EmptyCachePlan")
keys_match(allocsim.reports.DeviceCalls, plans["plans"][0]["device_calls"], "DeviceCalls")
keys_match(allocsim.AccumulationReport, remedies, "AccumulationReport")
keys_match(allocsim.reports.MicroBatchPlan, remedies["gradient_accumulation"][0], "MicroBatchPlan")
keys_match(allocsim.reports.Cheapest, remedies["cheapest"], "Cheapest")
keys_match(allocsim.SweepReport, swept, "SweepReport")
keys_match(allocsim.reports.SweepPlan, swept["plans"][0], "SweepPlan")
keys_match(allocsim.reports.Tried, swept["plans"][0]["tried"][0], "Tried")
# plan_ranks: FSDP2 at 1 and 2 ranks; under 5.1 GB each rank fits on 2 ranks, as the real runs did.
fsdp = [os.path.join(workloads, "world_sizes", f"fsdp2_b8_ws-{n}_rank-0.pickle.gz") for n in (1, 2)]
ranked = allocsim.plan_ranks(fsdp, world_sizes=[1, 2], limit=5_100_000_000, alloc_conf="")
check(ranked == cli_json("plan", *fsdp, "--at", "1,2", "--world-size", "--limit", "5100000000",
                         "--alloc-conf", ""), "plan_ranks is the CLI's JSON")
check({p["min_ranks"] for p in ranked["plans"]} == {2}, f"2 ranks: {ranked['plans']}")
keys_match(allocsim.RankPlanReport, ranked, "RankPlanReport")
keys_match(allocsim.reports.RankPlan, ranked["plans"][0], "RankPlan")
keys_match(allocsim.reports.RankTried, ranked["plans"][0]["tried"][0], "RankTried")
# ViT-B/16 (fp16 autocast) at batch 8, 16, 24: its cuDNN workspace beyond 24 guessed, typed; the
# largest batch under 5 GB the real run's, 50.
vit = [os.path.join(workloads, "sweeps", f"vit-fp16_batch-{v}.pickle.gz") for v in (8, 16, 24)]
vit_swept = allocsim.plan_sweep(vit, at=[8, 16, 24], limit=5_000_000_000, alloc_conf="")
keys_match(allocsim.SweepReport, vit_swept, "SweepReport with guessed sizes")
keys_match(allocsim.reports.SweepPlan, vit_swept["plans"][0], "SweepPlan with max_value_held")
keys_match(allocsim.reports.GuessedSizes, vit_swept["guessed_sizes"], "GuessedSizes")
check(vit_swept["plans"][0]["max_value"] == vit_swept["plans"][0]["max_value_held"] == 50,
      f"ViT: 50 under 5 GB, as the real run: {vit_swept['plans'][0]}")
vit_a100 = allocsim.plan_sweep(vit, at=[8, 16, 24], limit=5_000_000_000, alloc_conf="",
                               multiprocessors=108)
check(vit_a100 == cli_json("plan", *vit, "--at", "8,16,24", "--limit", "5000000000",
                           "--alloc-conf", "", "--multiprocessors", "108"),
      "plan_sweep(multiprocessors=) is the CLI's --multiprocessors")

# predict: the trace at another value, which replay reads.
with tempfile.TemporaryDirectory() as tmp:
    sweep = [os.path.join(workloads, "sweeps", f"gpt2_batch-{v}.pickle.gz") for v in (1, 2)]
    out = allocsim.predict([sweep[0], load("sweeps/gpt2_batch-2")], at=[1, 2], to=4,
                           out=os.path.join(tmp, "b4.atrace"))
    predicted = allocsim.replay(out)
    check(predicted["oom"] is None and predicted["events_replayed"] > 9000,
          "predict writes a trace that replay reads")
    ranks4 = allocsim.predict(fsdp, at=[1, 2], world_size=4, out=os.path.join(tmp, "ws4.atrace"))
    with open(os.path.join(workloads, "world_sizes", "fsdp2_b8_ws-4_rank-0.json")) as f:
        real4 = json.load(f)["max_memory_allocated"]
    peak4 = allocsim.replay(ranks4)["memory_stats"]["allocated_bytes.all.peak"]
    check(abs(peak4 - real4) <= real4 * 0.005,
          f"predict(world_size=4): one rank's peak {peak4}, the real run's {real4}")
    snapshot = allocsim.predict(sweep, at=[1, 2], to=4, out=os.path.join(tmp, "b4.pickle"))
    check(allocsim.replay(snapshot)["memory_stats"]["reserved_bytes.all.peak"] ==
          predicted["memory_stats"]["reserved_bytes.all.peak"],
          "predict writes a snapshot that replays as the trace does")
    try:
        allocsim.predict(sweep, at=[1, 2], to=4, out=os.path.join(tmp, "b4.json"))
        check(False, "predict to a name that is neither .atrace nor .pickle raises")
    except allocsim.AllocsimError as e:
        check("FILE.atrace" in str(e) and e.returncode == 2, f"predict's error: {e}")
    for wrong in ({}, {"to": 4, "world_size": 4}):
        try:
            allocsim.predict(sweep, at=[1, 2], out=os.path.join(tmp, "x.atrace"), **wrong)
            check(False, f"predict with {wrong or 'neither to nor world_size'} raises")
        except ValueError as e:
            check("to" in str(e) and "world_size" in str(e), f"predict's ValueError: {e}")

# Errors: the CLI's one line, as an exception.
with tempfile.NamedTemporaryFile(suffix=".pickle") as bad:
    bad.write(b"not a pickle")
    bad.flush()
    try:
        allocsim.replay(bad.name)
        check(False, "a bad snapshot raises")
    except allocsim.AllocsimError as e:
        check(str(e).startswith("allocsim: error: ") and bad.name in str(e) and e.returncode == 2,
              f"the error is the CLI's line: {e}")
try:
    allocsim.replay(resnet, alloc_conf="expandable_segments:yes")
    check(False, "a bad setting raises")
except allocsim.AllocsimError as e:
    check("Expected 'True' or 'False'" in str(e), f"a bad setting's message: {e}")
try:
    allocsim.replay(resnet, capacity=1.5)
    check(False, "a size that is not an int or a string raises")
except TypeError:
    pass

# advise: the Llama run capped at 10.5 GB on a 139.8 GiB H200 ran out of memory with the
# defaults; expandable segments fit under that cap (the job recorded with them ran under 10.48 GB).
total = 150_109_880_320
advice = allocsim.advise(llama_oom, capacity=total, memory_limit=10_500_000_000)
by_conf = {s["alloc_conf"]: s for s in advice["settings"]}
check(advice["oom"] and advice["request_bytes"] == 1000 << 20, "the advice names the request")
check(advice["message"].startswith("CUDA out of memory. Tried to allocate 1000.00 MiB"),
      "the OOM is the recorded one")
check(not by_conf[""]["fits"] and by_conf["expandable_segments:True"]["fits"],
      "defaults do not fit, expandable segments do")
check(advice["missing_bytes"] == -by_conf[""]["margin_bytes"] > 0, "what was missing")
check(advice["reserved_bytes"] - advice["allocated_bytes"] == advice["cached_free_bytes"] > 0,
      "where the reserved memory was")
check("expandable_segments:True" in advice["text"] and "would have fit" in advice["text"],
      "the text says which setting fits")
# The same job run calling torch.cuda.empty_cache() before every step ran every step under that cap
# (workloads/empty_cache/llama-varlen-bf16-emptycache_default_cap10500000000).
check(advice["empty_cache_per_step"]["fits"] and
      "with torch.cuda.empty_cache() before every step and the defaults" in advice["text"],
      f"empty_cache() every step fits: {advice['empty_cache_per_step']}")
check(advice["cheapest"] == {"alloc_conf": "expandable_segments:True",
                             "empty_cache_every_step": False} and
      "cheapest that fits: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in advice["text"],
      f"the cheapest remedy: {advice['cheapest']}")
# With recordings at other batch sizes and the batch the job needs: gradient accumulation too.
at_16 = allocsim.advise(gpt2[2], card="24GiB", recordings=[(g, v) for g, v in zip(gpt2, (1, 2, 4))],
                        batch=16)
check([m["fits"] for m in at_16["gradient_accumulation"]] == [True, True, True] and
      "2 x 8 (gradient accumulation)" in at_16["text"] and
      "cheapest that fits at batch 16: gradient accumulation over 2 micro-batches of 8" in
      at_16["text"], f"the advice at batch 16: {at_16['text']}")
stacks = allocsim.advise(os.path.join(workloads, "gpt2-leak_default_stacks.pickle.gz"),
                         capacity="24GiB", limit=23 << 30)
check(stacks["oom"] and stacks["sites"] and "source lines" in stacks["text"],
      "with stack frames, the lines holding the memory")
keys_match(allocsim.Advice, advice, "Advice")
keys_match(allocsim.Advice, at_16, "Advice at a batch")
keys_match(allocsim.reports.AccumulationAdvice, at_16["gradient_accumulation"][0],
           "AccumulationAdvice")
keys_match(allocsim.reports.AdviceSetting, advice["settings"][0], "AdviceSetting")
keys_match(allocsim.reports.EmptyCacheAdvice, advice["empty_cache_per_step"], "EmptyCacheAdvice")

# diff: the CLI's report, typed; the same job under two settings is all allocator.
default = os.path.join(workloads, "gpt2_default.pickle.gz")
expandable = os.path.join(workloads, "gpt2_expandable.pickle.gz")
with tempfile.TemporaryDirectory() as tmp:
    page = os.path.join(tmp, "diff.html")
    d = allocsim.diff(default, expandable, out=page)
    check(os.path.getsize(page) > 0, "diff(out=) writes the timeline page")
check(d == cli_json("diff", default, expandable, "-q"), "diff() is the CLI's report")
keys_match(allocsim.DiffReport, d, "DiffReport")
keys_match(allocsim.reports.DiffRun, d["a"], "DiffRun")
keys_match(allocsim.reports.DiffPairing, d["pairing"], "DiffPairing")
keys_match(allocsim.reports.DiffSplits, d["split"], "DiffSplits")
keys_match(allocsim.reports.DiffSplit, d["split"]["peak_reserved"], "DiffSplit")
keys_match(allocsim.reports.ReservedParting, d["reserved_parting"], "ReservedParting")
r = d["split"]["peak_reserved"]
check(r["program"] == 0 and r["allocator"] == r["difference"] == r["b"] - r["a"] != 0,
      f"two settings of one job: all of the difference the allocator's ({r})")
leak = allocsim.diff(default, os.path.join(workloads, "gpt2-leak_default_stacks.pickle.gz"))
keys_match(allocsim.reports.DiffGroup, leak["groups"][0], "DiffGroup")
check(leak["pairing"]["source_lines"] and leak["groups"][0]["delta_at_peak"] > 0,
      "a leak: its source line holds the difference")

# The compact trace reader: what `allocsim convert` writes, event for event.
import allocsim.compact_trace  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    atrace = os.path.join(tmp, "resnet.atrace")
    subprocess.run([allocsim.binary(), "convert", resnet, atrace], check=True,
                   capture_output=True)
    trace = allocsim.compact_trace.read_compact_trace(atrace)
    replayed = cli_json("replay", atrace, "-q")
    ops = allocsim.compact_trace.device_ops(trace.events)
    check(len(trace.events) == replayed["events_total"] and
          [(o["action"], o["size"]) for o in replayed["device_ops"]] == ops and ops,
          f"read_compact_trace: {len(trace.events)} events, replay counts "
          f"{replayed['events_total']}; device operations as replay lists them")
    with open(atrace, "rb") as f:
        whole = f.read()
    with open(atrace, "wb") as f:
        f.write(whole[: len(whole) // 2])
    try:
        allocsim.compact_trace.read_compact_trace(atrace)
        check(False, "a cut compact trace raises")
    except allocsim.compact_trace.TraceFormatError as e:
        check("byte offset" in str(e) and "ends early" in str(e), f"a cut trace's error: {e}")

print(f"{len(failed)} failure(s)")
sys.exit(1 if failed else 0)
