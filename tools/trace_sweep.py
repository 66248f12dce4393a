"""Traces the sweeps' training jobs (tools/sweep_jobs.py) on the CPU with allocsim.trace, as
tools/gpu/record_sweep.py records them on a GPU, and compares a trace with its recording.

usage: python3 tools/trace_sweep.py OUTDIR MODEL PARAM V1,V2,... [STEPS] [--card h200]
       python3 tools/trace_sweep.py --compare RECORDED.pickle.gz TRACED.pickle.gz
       python3 tools/trace_sweep.py --largest OUTDIR MODEL CAP_BYTES LOW HIGH [STEPS]
  Writes OUTDIR/MODEL_PARAM-V.pickle.gz. Recordings start after model.cuda() and the optimizer,
  so the trace's requests are compared from there: --compare prints the recorded requests matched
  in order and size (count and bytes, a shortest edit script over sizes, by windows of 4,000 on
  runs of more than 20,000) and the traced ones left.
  --largest: the largest batch in LOW..HIGH whose trace replays without an OOM under a cap of
  CAP_BYTES (set_per_process_memory_fraction's), by bisection, tracing each batch tried (LOW
  must fit); the answer to compare with a boundary's real_max_value (workloads/sweeps/).
Needs torch (the CPU build is enough), transformers and torchvision, and the allocsim package
(PYTHONPATH=build/python).
"""
import difflib
import gzip
import os
import pickle
import sys


def trace(outdir, model_name, param, values, steps, card):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import allocsim
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from sweep_jobs import make_job

    for value in values:
        torch.manual_seed(0)
        job = make_job(model_name, param, value)
        out = os.path.join(outdir, f"{model_name}_{param}-{value}.pickle.gz")
        tracer = allocsim.trace(job.step, steps=steps, setup=job.prepare, out=out, card=card)
        allocs = sum(1 for r in tracer.requests() if r.action == "alloc")
        print(f"{out}: {allocs} allocations")


class _Snapshot(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"a snapshot names no class ({module}.{name})")


def _allocs(path):
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        snapshot = _Snapshot(f).load()
    return [e["size"] for e in snapshot["device_traces"][0] if e["action"] == "alloc"]


def _matching(a, b, window=4000):
    """Blocks (i, j, n) of a and b equal in order: difflib's shortest edit script, over windows
    of `window` recorded allocations where the runs are longer (a generation's hundreds of
    thousands), each window ending three quarters in and the next starting where it matched."""
    if len(a) <= 5 * window:
        sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
        return [(m.a, m.b, m.size) for m in sm.get_matching_blocks() if m.size]
    blocks = []
    i = j = 0
    while i < len(a) and j < len(b):
        last = i + window >= len(a)
        end = len(a) - i if last else window * 3 // 4
        sm = difflib.SequenceMatcher(None, a[i:i + window], b[j:j + window * 4 // 3],
                                     autojunk=False)
        next_i, next_j = end, 0
        for m in sm.get_matching_blocks():
            if m.a >= end or not m.size:
                break
            n = min(m.size, end - m.a)
            blocks.append((i + m.a, j + m.b, n))
            next_i, next_j = m.a + n, m.b + n
        i, j = i + next_i, j + next_j
    return blocks


def compare(recorded, traced):
    """(matched, of recorded, matched bytes, recorded bytes, traced allocations)."""
    a, b = _allocs(recorded), _allocs(traced)
    blocks = _matching(a, b)
    matched = sum(n for _, _, n in blocks)
    matched_bytes = sum(sum(a[i:i + n]) for i, _, n in blocks)
    return matched, len(a), matched_bytes, sum(a), len(b)


def largest(outdir, model_name, cap, low, high, steps, card="h200"):
    """The largest batch in low..high that runs `steps` steps under `cap` (bisection over
    traces: allocsim.tracer.largest)."""
    from allocsim.tracer.largest import largest_fitting

    def trace_at(batch):
        trace(outdir, model_name, "batch", [batch], steps, card)
        return os.path.join(outdir, f"{model_name}_batch-{batch}.pickle.gz")
    return largest_fitting(trace_at, low, high, limit=cap,
                           report=lambda b, ok: print(f"batch {b}: {'fits' if ok else 'OOM'}"))


def main():
    if sys.argv[1] == "--largest":
        outdir, model_name, cap, low, high = sys.argv[2:7]
        steps = int(sys.argv[7]) if len(sys.argv) > 7 else 3
        os.makedirs(outdir, exist_ok=True)
        best = largest(outdir, model_name, int(cap), int(low), int(high), steps)
        print(f"{model_name}: the largest batch under {cap} bytes: {best}")
        return
    if sys.argv[1] == "--compare":
        m, n, mb, nb, t = compare(sys.argv[2], sys.argv[3])
        print(f"{m} of {n} recorded allocations matched in order and size ({m / n:.1%}; "
              f"{mb / nb:.1%} of the bytes); {t - m} of {t} traced unmatched")
        return
    args = [a for a in sys.argv[1:] if not a.startswith("--card")]
    card = "h200"
    for i, a in enumerate(sys.argv):
        if a == "--card":
            card = sys.argv[i + 1]
            args.remove(card)
    outdir, model_name, param, values = args[0], args[1], args[2], args[3]
    steps = int(args[4]) if len(args) > 4 else 3
    os.makedirs(outdir, exist_ok=True)
    trace(outdir, model_name, param, [int(v) for v in values.split(",")], steps, card)


if __name__ == "__main__":
    main()
