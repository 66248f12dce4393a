"""allocsim.torch (the OOM advisor) and allocsim.pluggable (the pluggable allocator's loader)
against the PyTorch installed: in CI, PyTorch's CPU build, with no GPU. What needs a CUDA device
skips with that reason; the rest runs: the version checks, the advisor's registration and its
failures with CUDA absent, its handling of a recorded OOM snapshot handed over where PyTorch's
_snapshot() would hand it, and PyTorch's own snapshot readers (torch.cuda._memory_viz) on the
snapshots allocsim writes.

usage: torch_test.py STAGED_PACKAGE_DIR WORKLOADS_DIR   (exit 77: no torch or pytest here)
"""
import gzip
import io
import json
import os
import pickle
import sys
import types

if __name__ == "__main__":
    try:
        import pytest
        import torch  # noqa: F401
    except ImportError as e:
        print(f"skipped: {e} (python/requirements-test.txt has both)")
        sys.exit(77)
    os.environ["ALLOCSIM_TEST_STAGED"] = os.path.abspath(sys.argv[1])
    os.environ["ALLOCSIM_TEST_WORKLOADS"] = os.path.abspath(sys.argv[2])
    # -rs: each skip with its reason; no cache written into the source tree.
    sys.exit(pytest.main([__file__, "-q", "-rs", "-p", "no:cacheprovider"]))

import pytest  # noqa: E402
import torch  # noqa: E402

STAGED = os.environ["ALLOCSIM_TEST_STAGED"]
WORKLOADS = os.environ["ALLOCSIM_TEST_WORKLOADS"]
sys.path.insert(0, STAGED)
os.environ.pop("ALLOCSIM_BINARY", None)  # the binary staged with the package
import allocsim  # noqa: E402
import allocsim.pluggable  # noqa: E402
import allocsim.torch  # noqa: E402
from allocsim._torch_checks import (MINIMUM_TORCH, cuda_missing, parse_version,  # noqa: E402
                                    require_torch)

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason=f"needs a CUDA device ({cuda_missing(torch)})")
without_cuda = pytest.mark.skipif(CUDA, reason="checks the behaviour where CUDA is absent")


class _SnapshotUnpickler(pickle.Unpickler):
    """A snapshot is dicts, lists, strings and numbers: nothing in one may name a class."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"a snapshot names {module}.{name}")


def load_snapshot(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return _SnapshotUnpickler(f).load()


def workload(name):
    return os.path.join(WORKLOADS, name + ".pickle.gz")


# Versions.

@pytest.mark.parametrize("text", ["2.0.1", "2.1.0", "2.1", "2.11.0+cu130", "2.13.0+cpu",
                                  "2.14.0a0+git5f3e1b2", "2.14.1", "2.15.0.dev20261101+cpu",
                                  "3.0.0rc1"])
def test_parse_version_orders_as_pytorch_does(text):
    ours = parse_version(text)
    theirs = torch.torch_version.TorchVersion(text)
    for other in ["2.1.0", "2.13.0", "2.14.1"]:
        assert (ours >= parse_version(other)) == (theirs >= other), (text, other)


def test_parse_version_rejects_what_is_no_version():
    with pytest.raises(ValueError, match="not a PyTorch version"):
        parse_version("unknown")


def test_this_pytorch_is_accepted():
    assert require_torch(torch, "test") == parse_version(torch.__version__)
    assert parse_version(torch.__version__)[:2] >= MINIMUM_TORCH


def test_an_older_pytorch_is_refused_with_its_version():
    old = types.SimpleNamespace(__version__="2.0.1+cu118")
    with pytest.raises(RuntimeError, match=r"needs PyTorch 2\.1 or later; this is 2\.0\.1\+cu118"):
        require_torch(old, "allocsim.torch.advise_on_oom")


# With CUDA absent: the advisor stays off, the loader refuses, nothing raises at an OOM.

@without_cuda
def test_cuda_missing_names_the_build():
    reason = cuda_missing(torch)
    assert reason is not None and torch.__version__ in reason
    if torch.version.cuda is None:
        assert "a build without CUDA" in reason


@without_cuda
def test_advisor_without_cuda_warns_and_stays_off():
    out = io.StringIO()
    with pytest.warns(RuntimeWarning, match="advise_on_oom: PyTorch .* no history is recorded"):
        advisor = allocsim.torch.advise_on_oom(file=out)
    assert not advisor.enabled and advisor.disabled_reason == cuda_missing(torch)
    advisor(0, 1 << 20, 0, 0)  # as if an OOM came: an advisor that is off says nothing
    assert out.getvalue() == "" and advisor.last_advice is None


@without_cuda
def test_advisor_failure_is_one_line_never_an_exception():
    # An advisor that is on, in a process whose PyTorch cannot take a snapshot: the user's OOM
    # must propagate as it is, so the failure is one line.
    out = io.StringIO()
    advisor = allocsim.torch.OomAdvisor(None, None, None, out, None)
    advisor(0, 1 << 20, 0, 0)
    text = out.getvalue()
    assert text.startswith("allocsim: no advice for this OOM: ") and text.count("\n") == 1, text


@without_cuda
def test_pluggable_install_refuses_without_cuda_and_changes_nothing():
    with pytest.raises(RuntimeError, match="allocsim.pluggable.install: PyTorch .*"):
        allocsim.pluggable.install("/nonexistent/liballocsim_torch.so")
    assert not torch.cuda.is_initialized()


def test_pluggable_library_loads_without_a_gpu():
    # Built where the CUDA Toolkit is: the driver is looked up at run time, so the library
    # loads (and PyTorch can open it) on a machine with no GPU and no libcuda.
    path = os.path.join(STAGED, "allocsim", "lib", "liballocsim_torch.so")
    if not os.path.isfile(path):
        pytest.skip("this build has no CUDA backend (no CUDA Toolkit where it was built)")
    allocsim.pluggable.Allocsim(path)


# The advisor on a recorded OOM: the snapshot PyTorch's _snapshot() would hand over, with
# PyTorch's device queries answering as they did in the recorded run (an H200, a 10.5 GB cap).

TOTAL = 150_109_880_320
CAP = 10_500_000_000


@pytest.fixture
def recorded_oom(monkeypatch):
    snapshot = load_snapshot(workload("llama-varlen-bf16_default_cap10500000000"))
    oom = [e for e in snapshot["device_traces"][0] if e["action"] == "oom"][0]
    reserved = allocsim.replay(snapshot, capacity=TOTAL, memory_limit=CAP)["oom"]["reserved_bytes"]
    calls = {}
    monkeypatch.setattr(torch.version, "cuda", torch.version.cuda or "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda *a, **k: snapshot)
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history",
                        lambda enabled="all", **kw: calls.setdefault("history",
                                                                      dict(kw, enabled=enabled)))
    monkeypatch.setattr(torch.cuda.memory, "_set_memory_metadata",
                        lambda m: calls.setdefault("metadata", []).append(m))
    monkeypatch.setattr(torch._C, "_cuda_attach_out_of_memory_observer",
                        lambda f: calls.setdefault("observer", f), raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda d: types.SimpleNamespace(total_memory=TOTAL))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d=None: reserved)
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda d=None: CAP / TOTAL)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (0, TOTAL))
    monkeypatch.setattr(allocsim.recorder._marks, "memory_fraction", {})
    monkeypatch.setattr(allocsim.recorder._marks, "device_memory", {})
    return types.SimpleNamespace(snapshot=snapshot, oom=oom, calls=calls)


def test_advisor_registers_a_bounded_history_and_its_observer(recorded_oom):
    advisor = allocsim.torch.advise_on_oom(max_entries=5000, stacks="all", file=io.StringIO())
    assert advisor.enabled and advisor.disabled_reason is None
    assert recorded_oom.calls["history"] == {"enabled": "all", "context": "all", "stacks": "all",
                                             "max_entries": 5000}
    assert recorded_oom.calls["observer"] is advisor
    # Through allocsim's recorder: its marks go into the trace entries from the start.
    assert recorded_oom.calls["metadata"][-1].startswith("allocsim_recorder=1;empty_cache=")


def test_advisor_advises_on_the_recorded_oom(recorded_oom, tmp_path):
    out = io.StringIO()
    sweep = [(workload(f"sweeps/gpt2_batch-{v}"), v) for v in (1, 2, 4)]
    advisor = allocsim.torch.advise_on_oom(out_dir=str(tmp_path), file=out, recordings=sweep)
    oom = recorded_oom.oom
    advisor(0, oom["size"], CAP, oom["device_free"])
    text = out.getvalue()
    advice = advisor.last_advice
    assert advice is not None and advice["limit_bytes"] == CAP, "the limit is the fraction's cap"
    assert "would have fit" in text and "expandable_segments:True" in text, text
    # GPT-2's sweep under this limit (9.78 GiB): batch 4 reserved 9.39 GB, batch 8 16.52 GB.
    largest = advice.get("largest_values") or [{}]
    assert largest[0].get("max_value") in (4, 5, 6, 7), largest
    assert "the largest value that fits, predicted from the recordings at 1, 2, 4" in text
    files = advice["files"]
    assert sorted(files) == ["advice", "snapshot", "text"]
    assert all(os.path.exists(p) for p in files.values())
    # The snapshot written is the one PyTorch handed over, readable without executing anything.
    assert load_snapshot(files["snapshot"]) == recorded_oom.snapshot
    with open(files["advice"]) as f:
        assert json.load(f)["limit_bytes"] == CAP


def test_advisor_off_says_nothing(recorded_oom):
    out = io.StringIO()
    advisor = allocsim.torch.advise_on_oom(file=out)
    advisor.enabled = False
    advisor(0, recorded_oom.oom["size"], CAP, recorded_oom.oom["device_free"])
    assert out.getvalue() == "" and advisor.last_advice is None


def test_advisor_failure_of_its_own_is_one_line(recorded_oom, monkeypatch):
    out = io.StringIO()
    advisor = allocsim.torch.advise_on_oom(file=out)

    def broken(*args, **kwargs):
        raise RuntimeError("no snapshot")

    monkeypatch.setattr(torch.cuda.memory, "_snapshot", broken)
    advisor(0, 1 << 20, TOTAL, 0)
    assert out.getvalue() == "allocsim: no advice for this OOM: RuntimeError: no snapshot\n"


# The recorder: the calls PyTorch's trace leaves out, marked in the entries' metadata, and read
# back by allocsim's replay.

STAND_IN_TOTAL = 24 * 2**30  # the stand-in device's memory: a 24 GiB card


def stand_in_devices(monkeypatch, fraction=1.0, settings=None):
    """One device, uncapped (or capped at `fraction`) with `settings` in force, as the recorder
    asks of them when it starts (on the CPU they need a device)."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d=None: 0)
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda d=None: fraction)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (0, STAND_IN_TOTAL))
    monkeypatch.setattr(allocsim.recorder._marks, "device_memory", {})
    monkeypatch.setattr(torch.cuda.memory, "_snapshot",
                        lambda *a, **k: {"segments": [], "device_traces": [[]],
                                         "allocator_settings": settings or {}})


@pytest.fixture
def recorder(monkeypatch):
    """allocsim's recorder with PyTorch's history, metadata and the wrapped calls stood in for
    (on the CPU they need a device); returns the metadata strings it published."""
    published, made = [], []
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history",
                        lambda enabled="all", **kw: made.append(("history", enabled)))
    monkeypatch.setattr(torch.cuda.memory, "_set_memory_metadata", published.append)
    stand_in_devices(monkeypatch)
    monkeypatch.setattr(allocsim.recorder._marks, "memory_fraction", {})
    allocsim.torch.record_memory_history()
    originals = allocsim.recorder._originals
    for name in ("empty_cache", "set_per_process_memory_fraction", "reset_peak_memory_stats",
                 "reset_accumulated_memory_stats"):
        monkeypatch.setitem(originals, name, lambda *a, _name=name: made.append((_name, a)))
    published.clear()
    made.clear()
    yield types.SimpleNamespace(published=published, made=made)
    allocsim.torch.record_memory_history(enabled=None)


def test_recorder_marks_each_call_before_it_is_made(recorder, monkeypatch):
    monkeypatch.setattr(allocsim.recorder._marks, "calls", 0)
    monkeypatch.setattr(allocsim.recorder._marks, "recent", [])
    base = allocsim.recorder._marks.empty_cache
    torch.cuda.empty_cache()  # through torch.cuda's name, as jobs call it
    torch.cuda.memory.set_per_process_memory_fraction(0.25, 0)
    torch.cuda.reset_peak_memory_stats(0)
    torch.cuda.reset_accumulated_memory_stats(0)
    torch.cuda.memory.empty_cache()
    assert [name for name, _ in recorder.made] == [
        "empty_cache", "set_per_process_memory_fraction", "reset_peak_memory_stats",
        "reset_accumulated_memory_stats", "empty_cache"]
    fraction, resets = "memory_fraction.0=0.25", "reset_peak.0=1;reset_accumulated.0=1"
    head = "allocsim_recorder=1;empty_cache="
    def counted(k, kinds):  # the count of calls and their kinds after the k-th call here
        return f"calls={k};recent={kinds}"

    assert recorder.published == [
        f"{head}{base + 1};last=empty_cache;{counted(1, 'e')}",
        f"{head}{base + 1};{fraction};last=memory_fraction;{counted(2, 'ef')}",
        f"{head}{base + 1};{fraction};reset_peak.0=1;last=reset_peak;{counted(3, 'efp')}",
        f"{head}{base + 1};{fraction};{resets};last=reset_accumulated;{counted(4, 'efpa')}",
        f"{head}{base + 2};{fraction};{resets};last=empty_cache;{counted(5, 'efpae')}"]
    assert allocsim.torch.recorder_metadata() == recorder.published[-1]
    # A call of another device than 0 names it after its letter.
    torch.cuda.reset_peak_memory_stats(1)
    assert recorder.published[-1].endswith(f";last=reset_peak;{counted(6, 'efpaep1')}")


def test_recorder_marks_mem_pool_blocks_and_deletions(recorder, monkeypatch):
    rec = allocsim.recorder
    for name in ("memory_fraction", "reset_peak", "reset_accumulated"):
        monkeypatch.setattr(rec._marks, name, {})
    monkeypatch.setattr(rec._marks, "last", "")
    monkeypatch.setattr(rec._marks, "calls", 0)
    monkeypatch.setattr(rec._marks, "recent", [])
    monkeypatch.setattr(rec._marks, "freed_pools", [])
    monkeypatch.setattr(rec._marks, "start_pools_freed", 0)
    monkeypatch.setattr(rec._marks, "capture_pool", (0, 3))  # a capture begun first
    for name in ("begin_mem_pool", "end_mem_pool"):
        monkeypatch.setitem(rec._originals, name,
                            lambda device, pool, _name=name: recorder.made.append((_name, pool)))
    monkeypatch.setitem(rec._originals, "mem_pool_del", None)
    # As use_mem_pool calls them, by their names in torch.cuda.memory.
    torch.cuda.memory._cuda_beginAllocateCurrentThreadToPool(0, (0, 7))
    torch.cuda.memory._cuda_endAllocateToPool(0, (0, 7))
    monkeypatch.setattr(rec._marks, "capture_pool", None)
    torch.cuda.memory._cuda_beginAllocateCurrentThreadToPool(0, (0, 8))
    torch.cuda.memory._cuda_endAllocateToPool(0, (0, 8))
    rec._mem_pool_deleted(types.SimpleNamespace(id=(0, 8), _allocsim_device=1))  # MemPool.__del__
    assert recorder.made == [("begin_mem_pool", (0, 7)), ("end_mem_pool", (0, 7)),
                             ("begin_mem_pool", (0, 8)), ("end_mem_pool", (0, 8))]
    head = f"allocsim_recorder=1;empty_cache={rec._marks.empty_cache}"
    assert recorder.published == [
        f"{head};cuda_graph_pool=0,3;mem_pool=0,7@0", f"{head};cuda_graph_pool=0,3",
        f"{head};mem_pool=0,8@0", head, f"{head};pool_freed=1;last=pool_freed;calls=1;recent=d1"]
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda: {"device_traces": []})
    # the pool's id and the device it was made on (MemPool.__init__, wrapped, notes it)
    assert allocsim.torch.snapshot()["allocsim_recorder"]["freed_pools"] == [[0, 8, 1]]
    # A capture begun inside a block, and a block begun inside that capture: the routes in the
    # order they began, the innermost block's (PyTorch routes by the one begun last).
    published = len(recorder.published)
    torch.cuda.memory._cuda_beginAllocateCurrentThreadToPool(0, (0, 9))
    monkeypatch.setattr(rec._marks, "capture_pool", (0, 3))
    rec._marks.publish()
    torch.cuda.memory._cuda_beginAllocateCurrentThreadToPool(1, (0, 10))
    torch.cuda.memory._cuda_endAllocateToPool(1, (0, 10))
    tail = [p.split(";", 2)[-1] for p in recorder.published[published:]]
    assert tail == ["pool_freed=1;last=pool_freed;calls=1;recent=d1;mem_pool=0,9@0",
                    "pool_freed=1;last=pool_freed;calls=1;recent=d1;mem_pool=0,9@0;"
                    "cuda_graph_pool=0,3",
                    "pool_freed=1;last=pool_freed;calls=1;recent=d1;cuda_graph_pool=0,3;"
                    "mem_pool=0,10@1",
                    "pool_freed=1;last=pool_freed;calls=1;recent=d1;mem_pool=0,9@0;"
                    "cuda_graph_pool=0,3"], tail


def test_recorder_stops_marking_when_the_history_stops(recorder):
    allocsim.torch.record_memory_history(enabled=None)
    assert recorder.published[-1] == "" and allocsim.torch.recorder_metadata() == ""
    torch.cuda.empty_cache()
    assert recorder.published[-1] == ""  # counted, not published


# A replay's recorded_calls where the calls were made and nothing given replaced any.
NOTHING_REPLACED = {"limit_changes_replaced": 0, "starting_cap_replaced": False,
                    "settings_changes_replaced": 0, "settings_refused": 0}


def marked(snapshot, marks):
    """`snapshot` with every entry's user_metadata the recorder's string in force there: `marks`
    lists (first event, string)."""
    events = snapshot["device_traces"][0]
    for i, e in enumerate(events):
        e["user_metadata"] = [m for first, m in marks if first <= i][-1]
    return snapshot


def test_replay_makes_the_calls_the_recorder_marked(tmp_path):
    name = "resnet50_default"
    plain = allocsim.replay(workload(name))
    events = load_snapshot(workload(name))["device_traces"][0]
    # The last alloc: what the run holds from there on is less than its peak.
    k = max(i for i, e in enumerate(events) if e["action"] == "alloc")
    none = "allocsim_recorder=1;empty_cache=4"
    emptied = allocsim.replay(marked(load_snapshot(workload(name)),
                                     [(0, none), (k, "allocsim_recorder=1;empty_cache=6")]))
    reset = allocsim.replay(marked(load_snapshot(workload(name)),
                                   [(0, none), (k, "allocsim_recorder=1;empty_cache=6;"
                                                   "reset_peak.0=1")]))
    assert emptied["recorded_calls"] == dict(NOTHING_REPLACED, made=2)
    assert reset["recorded_calls"] == dict(NOTHING_REPLACED, made=3)
    before = plain["memory_stats"]
    # Two empty_cache() calls before event k: two more synchronisations, and the cached
    # segments given back (the replay's segment operations are no longer the recording's).
    assert emptied["memory_stats"]["num_sync_all_streams"] == before["num_sync_all_streams"] + 2
    assert emptied["memory_stats"]["num_device_free"] > before["num_device_free"]
    # Then the peaks start again from event k: lower, every other statistic the same.
    peaks = [key for key in before if key.endswith(".peak")]
    assert any(reset["memory_stats"][key] < emptied["memory_stats"][key] for key in peaks)
    assert all(reset["memory_stats"][key] <= emptied["memory_stats"][key] for key in peaks)
    assert {k: v for k, v in reset["memory_stats"].items() if k not in peaks} == \
        {k: v for k, v in emptied["memory_stats"].items() if k not in peaks}
    # Marks with no calls between them change nothing.
    unchanged = allocsim.replay(marked(load_snapshot(workload(name)), [(0, none)]))
    assert unchanged["memory_stats"] == before and "recorded_calls" not in unchanged


def test_replay_takes_the_cap_the_recorder_marked():
    name = "resnet50_default"
    peak = allocsim.replay(workload(name))["memory_stats"]["reserved_bytes.all.peak"]
    total = 80 << 30
    fraction = (peak // 2) / total
    snapshot = marked(load_snapshot(workload(name)),
                      [(0, f"allocsim_recorder=1;empty_cache=0;memory_fraction.0={fraction!r}")])
    capped = allocsim.replay(snapshot, capacity=total, on_oom="continue")
    assert capped["ooms"] > 0 and capped["recorded_calls"]["made"] == 1
    # A cap given replaces the recorded one, and says so.
    given = allocsim.replay(snapshot, capacity=total, memory_limit=total)
    assert given["ooms"] == 0 and given["recorded_calls"]["starting_cap_replaced"]
    assert any("replaces the one the recorder marked where the history starts" in w
               for w in given["warnings"])


def test_recorder_starts_from_the_cap_and_settings_in_force(monkeypatch):
    # A cap set at start-up, before recording (the usual order), and the settings then.
    published = []
    monkeypatch.setattr(torch.cuda.memory, "_record_memory_history", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda.memory, "_set_memory_metadata", published.append)
    start = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128", "max_split_size": 128 << 20}
    stand_in_devices(monkeypatch, fraction=0.375, settings=start)
    rec = allocsim.recorder
    monkeypatch.setattr(rec._marks, "memory_fraction", {})
    try:
        allocsim.torch.record_memory_history()
        assert "memory_fraction.0=0.375" in published[-1]
        snap = allocsim.torch.snapshot()["allocsim_recorder"]
        assert "memory_fraction.0=0.375" in snap["start"]
        assert snap["start_settings"] == start and snap["settings"] == []
        assert snap["device_memory"] == [[0, STAND_IN_TOTAL]]
    finally:
        allocsim.torch.record_memory_history(enabled=None)


def test_replay_runs_on_the_device_the_recorder_measured():
    snapshot = load_snapshot(workload("resnet50_default"))
    snapshot["allocsim_recorder"] = {"device_memory": [[0, 24 << 30]]}
    report = allocsim.replay(snapshot)
    assert report["capacity_bytes"] == 24 << 30
    assert not any("leave room for a card" in w for w in report.get("warnings", []))
    # A fraction the recorder marked is a fraction of that device: half the peak there, more
    # than the peak of an 80 GiB card.
    fraction = (report["memory_stats"]["reserved_bytes.all.peak"] // 2) / (24 << 30)
    capped = marked(load_snapshot(workload("resnet50_default")),
                    [(0, f"allocsim_recorder=1;empty_cache=0;memory_fraction.0={fraction!r}")])
    capped["allocsim_recorder"] = {"device_memory": [[0, 24 << 30]]}
    assert allocsim.replay(capped, on_oom="continue")["ooms"] > 0
    assert allocsim.replay(capped, capacity=80 << 30, on_oom="continue")["ooms"] == 0
    # A capacity given still decides.
    assert allocsim.replay(snapshot, capacity=80 << 30)["capacity_bytes"] == 80 << 30
    snapshot["allocsim_recorder"] = {"device_memory": [[0, "24 GiB"]]}
    report = allocsim.replay(snapshot)
    assert report["capacity_bytes"] == 80 << 30
    assert any("'device_memory' is not a list of [device, bytes]" in w for w in report["warnings"])


def test_recorder_marks_settings_set_at_run_time(recorder, monkeypatch):
    rec = allocsim.recorder
    monkeypatch.setattr(rec._marks, "calls", 0)
    monkeypatch.setattr(rec._marks, "recent", [])
    monkeypatch.setattr(rec._marks, "last", "")
    monkeypatch.setattr(rec._marks, "settings", [])
    monkeypatch.setattr(rec._marks, "start_settings_count", 0)
    taken = []
    # The C entry point the Python one calls: counted once, however it was reached.
    for name in rec._SETTINGS_ENTRIES:
        if name in rec._originals:
            monkeypatch.setitem(rec._originals, name, taken.append)
    inner = next(getattr(torch._C, n) for n in rec._SETTINGS_ENTRIES if n in rec._originals)
    monkeypatch.setitem(rec._originals, "_set_allocator_settings", inner)
    torch.cuda.memory._set_allocator_settings("expandable_segments:True")
    inner("max_split_size_mb:256")
    assert taken == ["expandable_segments:True", "max_split_size_mb:256"]
    fields = recorder.published[-1].split(";")
    assert {"settings=2", "last=settings", "calls=2", "recent=ss"} <= set(fields)
    assert allocsim.torch.snapshot()["allocsim_recorder"]["settings"] == taken


def settings_trace(max_split_mb):
    """A run that set max_split_size_mb after its first segment, recorded through allocsim's
    recorder: an 8 MiB request beside a cached 30 MiB block, which that setting makes
    oversize, so it takes a 20 MiB segment of its own."""
    mib = 1 << 20
    base, second = 0x7F0000000000, 0x7F0004000000
    head = "allocsim_recorder=1;empty_cache=0"
    after = f"{head};settings=1;last=settings;calls=1;recent=s"

    def entry(action, addr, size, meta):
        return {"action": action, "addr": addr, "size": size, "stream": 0,
                "user_metadata": meta}

    events = [entry("segment_alloc", base, 30 * mib, head), entry("alloc", base, 30 * mib, head),
              entry("free_requested", base, 30 * mib, head),
              entry("free_completed", base, 30 * mib, head),
              entry("segment_alloc", second, 20 * mib, after),
              entry("alloc", second, 8 * mib, after)]
    defaults = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                "garbage_collection_threshold": 0.0, "expandable_segments": False}
    return {"segments": [], "device_traces": [events],
            "allocator_settings": dict(defaults, PYTORCH_CUDA_ALLOC_CONF=f"max_split_size_mb:"
                                       f"{max_split_mb}", max_split_size=max_split_mb * mib),
            "allocsim_recorder": {"start": head, "end": after, "max_entries": 1000,
                                  "freed_pools": [], "settings": [f"max_split_size_mb:"
                                                                  f"{max_split_mb}"],
                                  "start_settings": defaults}}


def test_a_trace_whose_segments_contradict_its_final_settings_says_they_changed():
    # expandable_segments switched off before the snapshot, as serving engines do: the segments
    # mapped while it was on are there, PyTorch's trace does not say where it changed.
    snapshot = settings_trace(20)
    del snapshot["allocsim_recorder"]
    mib = 1 << 20
    snapshot["device_traces"][0] += [
        {"action": "segment_map", "addr": 0x7F0010000000, "size": 20 * mib, "stream": 0},
        {"action": "alloc", "addr": 0x7F0010000000, "size": 20 * mib, "stream": 0}]
    report = allocsim.replay(snapshot)
    said = [w for w in report.get("warnings", []) if "changed during the run" in w]
    assert len(said) == 1 and "expandable_segments:False, yet 1 expandable" in said[0], said
    # Segments that agree with the settings: nothing said.
    plain = settings_trace(20)
    del plain["allocsim_recorder"]
    assert not [w for w in allocsim.replay(plain).get("warnings", []) if "changed during" in w]


def test_replay_applies_settings_where_the_run_set_them():
    report = allocsim.replay(settings_trace(20))
    assert "departure" not in report and report["recorded_calls"]["made"] == 1
    assert report["memory_stats"]["num_device_alloc"] == 2
    # Without the string the change is not made, and said: the cached block is split instead.
    unnamed = settings_trace(20)
    unnamed["allocsim_recorder"]["settings"] = []
    dropped = allocsim.replay(unnamed)
    assert "departure" in dropped and any("name no string" in w for w in dropped["warnings"])
    # A what-if's settings replace it, and say so.
    given = allocsim.replay(settings_trace(20), alloc_conf="")
    assert given["recorded_calls"]["settings_changes_replaced"] == 1
    assert any("replace the 1 allocator settings change" in w for w in given["warnings"])


def use_on_oom_trace():
    """A run under a 700 MiB cap whose torch.cuda.MemPool(use_on_oom=True) cached a free 300 MiB
    block: a 250 MiB request outside it, beside a cached 200 MiB ordinary segment, took the pool's
    block (PyTorch 2.14: before any cached segment is released)."""
    mib = 1 << 20
    pool_at, plain_at = 0x7F0000000000, 0x7F0020000000
    cap = f"memory_fraction.0={700 * mib / (80 << 30)!r}"
    head = f"allocsim_recorder=1;empty_cache=0;{cap}"
    in_pool = f"{head};mem_pool=0,1@0"

    def entry(action, addr, size, meta):
        return {"action": action, "addr": addr, "size": size, "stream": 0,
                "user_metadata": meta}

    events = [entry("segment_alloc", pool_at, 300 * mib, in_pool),
              entry("alloc", pool_at, 300 * mib, in_pool),
              entry("free_requested", pool_at, 300 * mib, in_pool),
              entry("free_completed", pool_at, 300 * mib, in_pool),
              entry("segment_alloc", plain_at, 200 * mib, head),
              entry("alloc", plain_at, 200 * mib, head),
              entry("free_requested", plain_at, 200 * mib, head),
              entry("free_completed", plain_at, 200 * mib, head),
              entry("alloc", pool_at, 250 * mib, head)]
    return {"segments": [], "device_traces": [events],
            "allocsim_recorder": {"start": head, "end": head, "max_entries": 1000,
                                  "freed_pools": [], "settings": [],
                                  "pool_options": [[0, 1, 0, True, False]]}}


def test_replay_takes_a_use_on_oom_pools_block_as_the_run_did():
    report = allocsim.replay(use_on_oom_trace())
    assert "departure" not in report, report.get("departure")
    assert report["memory_stats"]["num_device_alloc"] == 2
    assert report["memory_stats"]["num_alloc_retries"] == 0
    # Without the recorder's note of the option the replay releases the cache and departs.
    plain = use_on_oom_trace()
    del plain["allocsim_recorder"]["pool_options"]
    assert "departure" in allocsim.replay(plain)
    # A malformed note is said and left out.
    bad = use_on_oom_trace()
    bad["allocsim_recorder"]["pool_options"] = [[0, 1, 0, "yes", False]]
    warned = allocsim.replay(bad)
    assert any("'pool_options' is not a list" in w for w in warned["warnings"])


def test_an_empty_cache_between_two_blocks_of_a_pool_is_made_outside_them():
    # A use_mem_pool block ended, empty_cache() was called (nothing to give back, so no entry),
    # and another block began: both entries are routed to the pool. A recorder that counts the
    # calls made inside blocks (its snapshots name pool_options) says this one was not, and the
    # replay synchronises as PyTorch did.
    mib = 1 << 20
    head = "allocsim_recorder=1;empty_cache=0"
    after = "allocsim_recorder=1;empty_cache=1;last=empty_cache;calls=1;recent=e"
    events = [{"action": "segment_alloc", "addr": 0x7F0000000000, "size": 20 * mib, "stream": 0,
               "user_metadata": f"{head};mem_pool=0,1@0"},
              {"action": "alloc", "addr": 0x7F0000000000, "size": 4 * mib, "stream": 0,
               "user_metadata": f"{head};mem_pool=0,1@0"},
              {"action": "alloc", "addr": 0x7F0000400000, "size": 4 * mib, "stream": 0,
               "user_metadata": f"{after};mem_pool=0,1@0"}]

    def snapshot(pool_options):
        recorder = {"start": head, "end": after, "max_entries": 1000, "freed_pools": [],
                    "settings": []}
        if pool_options:
            recorder["pool_options"] = []
        return {"segments": [], "device_traces": [[dict(e) for e in events]],
                "allocsim_recorder": recorder}

    assert allocsim.replay(snapshot(True))["memory_stats"]["num_sync_all_streams"] == 1
    # An older recorder's trace: between two routed entries, the call is taken as made inside.
    assert allocsim.replay(snapshot(False))["memory_stats"]["num_sync_all_streams"] == 0


def test_recorder_notes_mem_pool_options(recorder, monkeypatch):
    rec = allocsim.recorder
    monkeypatch.setattr(rec._marks, "pool_options", [])
    made = []
    monkeypatch.setitem(rec._originals, "mem_pool_init",
                        lambda pool, *args, **kwargs: made.append((args, kwargs)))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    for i, (args, kwargs) in enumerate([((), {}), ((None, True), {}),
                                        ((), {"no_split": True}),
                                        ((None,), {"use_on_oom": True, "no_split": True})]):
        pool = types.SimpleNamespace(id=(0, i + 1))
        rec._mem_pool_made(pool, *args, **kwargs)
        assert pool._allocsim_device == 1
    assert len(made) == 4
    assert rec._marks.pool_options == [(0, 2, 1, True, False), (0, 3, 1, False, True),
                                       (0, 4, 1, True, True)]
    monkeypatch.setattr(torch.cuda.memory, "_snapshot", lambda: {"device_traces": []})
    assert allocsim.torch.snapshot()["allocsim_recorder"]["pool_options"] == [
        [0, 2, 1, True, False], [0, 3, 1, False, True], [0, 4, 1, True, True]]


def test_a_cap_given_starts_the_run_and_the_recorded_changes_follow():
    name = "resnet50_default"
    peak = allocsim.replay(workload(name))["memory_stats"]["reserved_bytes.all.peak"]
    total = 80 << 30
    snapshot = load_snapshot(workload(name))
    k = len(snapshot["device_traces"][0]) // 2
    head = "allocsim_recorder=1;empty_cache=0"
    low = (peak // 2) / total
    snapshot = marked(snapshot, [(0, head), (k, f"{head};memory_fraction.0={low!r};"
                                             "last=memory_fraction;calls=1;recent=f")])
    # The cap given is the starting one; the run's own change halfway still runs it out.
    kept = allocsim.replay(snapshot, capacity=total, memory_limit=total, on_oom="continue")
    assert kept["ooms"] > 0 and kept["recorded_calls"]["limit_changes_replaced"] == 0
    replaced = allocsim.replay(snapshot, capacity=total, memory_limit=total,
                               replace_recorded_caps=True)
    assert replaced["ooms"] == 0 and replaced["recorded_calls"]["limit_changes_replaced"] == 1


# PyTorch's own readers of _snapshot() dicts on the snapshots allocsim writes (--snapshot-out):
# what memory_viz and torch.cuda._memory_viz show of a simulated run.

@pytest.mark.parametrize("name", ["resnet50_default", "llama-varlen-bf16_expandable_cap100",
                                  "gpt2-leak_default_stacks"])
def test_pytorch_reads_the_snapshots_allocsim_writes(name, tmp_path):
    from torch.cuda import _memory_viz

    out = tmp_path / "simulated.pickle"
    report = allocsim.replay(workload(name), extra_args=["--snapshot-out", str(out)])
    snapshot = load_snapshot(str(out))
    stats = report["memory_stats"]
    # segsum checks that each segment's blocks add up to it, and the totals to the reserved bytes.
    summary = _memory_viz.segsum(snapshot)
    assert f"segments: {len(snapshot['segments'])}\n" in summary
    assert sum(s["total_size"] for s in snapshot["segments"]) == stats["reserved_bytes.all.current"]
    # trace() walks every device's history; the viewer's page embeds the snapshot whole.
    assert _memory_viz.trace(snapshot)
    page = _memory_viz.trace_plot(snapshot)
    assert page.lstrip().startswith("<!DOCTYPE html>") or "<html" in page[:200]


def test_replay_takes_the_dict_as_pytorch_hands_it():
    path = workload("resnet50_default")
    from_dict = allocsim.replay(load_snapshot(path), capacity="2GiB")
    from_path = allocsim.replay(path, capacity="2GiB")
    assert from_dict["memory_stats"] == from_path["memory_stats"]
    assert from_dict["oom"] == from_path["oom"]


# On a GPU: a real OOM under a memory fraction, advised in the process.

@needs_cuda
def test_advice_at_a_real_oom(tmp_path):
    out = io.StringIO()
    advisor = allocsim.torch.advise_on_oom(file=out, out_dir=str(tmp_path))
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction((1 << 30) / total)
    try:
        kept = [torch.empty(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(3)]
        with pytest.raises(torch.OutOfMemoryError):
            kept.append(torch.empty(512 << 20, dtype=torch.uint8, device="cuda"))
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.memory._record_memory_history(enabled=None)
    assert advisor.last_advice is not None, out.getvalue()
    assert advisor.last_advice["oom"], out.getvalue()
    del kept
    torch.cuda.empty_cache()



@needs_cuda
def test_a_job_recorded_through_the_recorder_replays_exactly():
    # Caps changed mid-run (down, below what is reserved), empty_cache(), stats resets and an OOM
    # caught: the replay of the recorder's snapshot gives PyTorch's own memory_stats().
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    allocsim.torch.record_memory_history(stacks="python", max_entries=100_000)
    mib = 1 << 20
    try:
        torch.cuda.set_per_process_memory_fraction((3 << 30) / total)
        held = [torch.empty(100 * mib + k, dtype=torch.uint8, device="cuda") for k in range(8)]
        del held[::2]
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.set_per_process_memory_fraction((600 * mib) / total)
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(512 * mib, dtype=torch.uint8, device="cuda")
        held.append(torch.empty(50 * mib, dtype=torch.uint8, device="cuda"))
        torch.cuda.reset_accumulated_memory_stats()
        del held[0]
        torch.cuda.empty_cache()  # frees nothing more than the cache: after the last entry too
        torch.cuda.reset_peak_memory_stats()
        snap = allocsim.torch.snapshot()
        stats = torch.cuda.memory_stats()
    finally:
        allocsim.torch.record_memory_history(enabled=None)
        torch.cuda.set_per_process_memory_fraction(1.0)
    report = allocsim.replay(snap, capacity=total)
    replayed = report["memory_stats"]
    differ = {k: (replayed[k], stats[k]) for k in replayed if k in stats and replayed[k] != stats[k]}
    assert not differ, differ
    assert report["recorded_calls"]["made"] >= 7 and "departure" not in report
    del held
    torch.cuda.empty_cache()
