"""`python -m allocsim.trace script.py [ARGS...]`: runs a training or inference script on the CPU
as if on a GPU, with no GPU and no device memory, and writes the requests it would make of
PyTorch's CUDA caching allocator as a trace that `allocsim replay`, `plan`, `predict` and `fleet`
read (a PyTorch memory snapshot, or allocsim's compact trace).

    python -m allocsim.trace train.py -o train.pickle.gz -- --batch 16
    allocsim replay train.pickle.gz --capacity 24GiB

    # the script at several batch sizes ({value} in -o and the script's arguments), for plan --at
    python -m allocsim.trace train.py -o 'b{value}.pickle.gz' --values 8,16,24 -- --batch {value}
    # the largest batch that fits on a 24 GiB card, by bisection over traces
    python -m allocsim.trace train.py -o 'b{value}.pickle.gz' --values 1:256 --fit-card 24GiB \
        -- --batch {value}

What is modelled and what is not: docs/trace.md."""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import List, Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m allocsim.trace",
        description="Trace a PyTorch script's requests of the CUDA caching allocator on the CPU.")
    parser.add_argument("script", help="the Python script to run (as python SCRIPT would)")
    parser.add_argument("args", nargs="*",
                        help="the script's own arguments (after --, any that look like options)")
    parser.add_argument("-o", "--out", required=True,
                        help="the trace to write: FILE.pickle, FILE.pickle.gz or FILE.atrace")
    parser.add_argument("--card", default="h100",
                        help="the GPU to pretend (its kernels' choices and workspaces): "
                             "h100, h200, a100, a100-40gb, l4, rtx4090, rtx3090, a10g")
    parser.add_argument("--values", help="trace the script once per value, {value} in -o and in "
                        "the script's arguments standing for it: V1,V2,... or, with --fit-card "
                        "or --fit-limit, LOW:HIGH, searched for the largest that fits")
    fit = parser.add_mutually_exclusive_group()
    fit.add_argument("--fit-card", metavar="SIZE",
                     help="with --values LOW:HIGH: the largest value whose trace fits on a card "
                          "of this memory (24GiB, 80GB or bytes; PyTorch's context taken from "
                          "it, as replay --capacity does)")
    fit.add_argument("--fit-limit", metavar="SIZE",
                     help="with --values LOW:HIGH: the largest value whose trace fits under this "
                          "cap (replay --memory-limit)")
    parser.add_argument("--alloc-conf", default=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                        help="the PYTORCH_CUDA_ALLOC_CONF the trace records (default: the "
                             "environment's)")
    argv = list(sys.argv[1:] if argv is None else argv)
    rest: List[str] = []
    if "--" in argv:
        rest = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    options = parser.parse_args(argv)
    script_args: List[str] = list(options.args) + rest
    if not os.path.isfile(options.script):
        print(f"allocsim trace: error: {options.script}: no such script", file=sys.stderr)
        return 2
    from .tracer import CARDS
    if options.card.lower() not in CARDS:
        print(f"allocsim trace: error: --card {options.card}: one of {', '.join(sorted(CARDS))}",
              file=sys.stderr)
        return 2
    search = options.fit_card is not None or options.fit_limit is not None
    values: List[int] = []
    if options.values is not None:
        try:
            if search:
                low, high = (int(v) for v in options.values.split(":"))
                values = [low, high]
            else:
                values = [int(v) for v in options.values.split(",")]
        except ValueError:
            print(f"allocsim trace: error: --values {options.values}: expected "
                  f"{'LOW:HIGH' if search else 'V1,V2,...'} (integers)", file=sys.stderr)
            return 2
        if "{value}" not in options.out:
            print("allocsim trace: error: --values: -o must name each trace with {value}",
                  file=sys.stderr)
            return 2
    elif search:
        print("allocsim trace: error: --fit-card and --fit-limit search --values LOW:HIGH",
              file=sys.stderr)
        return 2

    def trace_at(value: Optional[int]) -> str:
        def at(text: str) -> str:
            return text if value is None else text.replace("{value}", str(value))
        out = at(options.out)
        code = _trace_script(options.script, [at(a) for a in script_args], out, options.card,
                             options.alloc_conf)
        if code:
            raise SystemExit(code)
        return out

    try:
        if not values:
            trace_at(None)
        elif not search:
            for value in values:
                trace_at(value)
        else:
            from .tracer.largest import largest_fitting
            best = largest_fitting(
                trace_at, values[0], values[1], capacity=options.fit_card,
                limit=options.fit_limit,
                report=lambda v, ok: print(f"{v}: {'fits' if ok else 'out of memory'}"))
            where = (f"on a card of {options.fit_card}" if options.fit_card is not None
                     else f"under a cap of {options.fit_limit}")
            print(f"the largest value that fits {where}: "
                  f"{best if best is not None else f'none ({values[0]} does not)'}")
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def _trace_script(script: str, args: List[str], out: str, card: str, alloc_conf: str) -> int:
    """Runs `script` with `args` under a Tracer and writes its trace to `out`; the exit status."""
    from .tracer import TraceError, Tracer
    saved_argv = sys.argv
    sys.argv = [script, *args]
    tracer = Tracer(card=card)
    try:
        with tracer:
            runpy.run_path(script, run_name="__main__")
    except TraceError as error:
        print(f"allocsim trace: error: {error}", file=sys.stderr)
        return 2
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            print(f"allocsim trace: error: {script} exited with {exit_.code}", file=sys.stderr)
            return 2
    finally:
        sys.argv = saved_argv
    for warning in tracer.warnings:
        print(f"allocsim trace: warning: {warning}", file=sys.stderr)
    tracer.save(out, alloc_conf)
    allocs = sum(1 for r in tracer.log.requests if r.action == "alloc")
    print(f"{out}: {allocs} allocations traced on a pretend {tracer.card.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
