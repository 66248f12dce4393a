"""allocsim's --alloc-conf against PyTorch's answers (alloc_confs.py recorded them on a GPU): every
settings string PyTorch accepted, allocsim accepts, and the same requests then get the same
segments (sizes, in order, and expandable maps) or the same OOM; every string PyTorch refused,
allocsim refuses with PyTorch's message (a ValueError's or IndexError's exactly, an internal
assertion's closing words), and says so where PyTorch's process aborts. Prints one line per
difference; exits 1 if there is any.

usage: python -m allocsim.fuzz.check_alloc_confs ALLOCSIM ORACLE.json
"""
import json
import os
import pickle
import subprocess
import sys
import tempfile

allocsim, oracle_path = sys.argv[1], sys.argv[2]
with open(oracle_path) as f:
    oracle = json.load(f)
# The snapshot's own variable first, as PyTorch reads them.
VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
CAPACITY = "139.8GiB"  # the card the answers were recorded on


def settings_of(env):
    return next(env[v] for v in VARIABLES if v in env)


def trace_of(requests, path):
    """The requests as a snapshot's history: allocations only, one stream."""
    events = [{"action": "alloc", "addr": 0x7F0000000000 + i * (1 << 36), "size": n, "stream": 0,
               "time_us": i} for i, n in enumerate(requests)]
    with open(path, "wb") as f:
        pickle.dump({"segments": [], "device_traces": [events]}, f)


def segment_events(report):
    return [[op["action"], op["size"]] for op in report["device_ops"]]


def check(case, trace):
    text = settings_of(case["env"])
    p = subprocess.run([allocsim, "replay", trace, "--alloc-conf", text, "--capacity", CAPACITY,
                        "-q", "--json", "-"], capture_output=True, text=True)
    refused_by_allocsim = p.returncode == 2
    error = p.stderr.rstrip("\n")
    if case["accepted"] or case.get("error_type") == "OutOfMemoryError":
        if refused_by_allocsim:
            return f"PyTorch accepts it, allocsim refuses it: {error}"
        report = json.loads(p.stdout)
        if case["accepted"]:
            if report["oom"] is not None:
                return "PyTorch served every request, allocsim ran out of memory"
            if segment_events(report) != case["segment_events"]:
                return (f"segments: PyTorch {case['segment_events']}, "
                        f"allocsim {segment_events(report)}")
        elif report["oom"] is None:
            return "PyTorch ran out of memory, allocsim served every request"
        return None
    if not refused_by_allocsim:
        return f"PyTorch refuses it ({case['error_type']}: {case['message']}), allocsim accepts it"
    said = error.split("': ", 1)[-1]
    kind, message = case["error_type"], case["message"]
    if kind == "process":  # PyTorch's process aborted: allocsim must say so
        ok = said.startswith("PyTorch aborts the process on it")
    elif kind == "RuntimeError":  # an internal assertion raised: its closing words
        inner = said[len("RuntimeError: "):] if said.startswith("RuntimeError: ") else None
        ok = inner is not None and message.endswith(inner)
    else:
        ok = said == message or said.startswith(message + " (" + kind + ":")
    return None if ok else f"PyTorch: {kind}: {message}; allocsim: {said}"


def main():
    differences = 0
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "requests.pickle")
        trace_of(oracle["requests"], trace)
        for case in oracle["cases"]:
            difference = check(case, trace)
            if difference:
                differences += 1
                print(f"{json.dumps(case['env'])}: {difference}")
    print(f"{len(oracle['cases'])} settings strings (PyTorch {oracle['torch']}), "
          f"{differences} difference(s)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
