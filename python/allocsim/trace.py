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
from typing import Dict, List, Optional, Sequence


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
            traced: Dict[int, str] = {}

            def trace_once(value: int) -> str:
                if value not in traced:
                    traced[value] = trace_at(value)
                return traced[value]
            told: Dict[int, str] = {}

            def tell(value: int, verdict: str) -> None:
                if value not in told:
                    told[value] = verdict
                    print(f"{value}: {verdict}")
            bounds = dict(capacity=options.fit_card, limit=options.fit_limit, report=tell)
            best = largest_fitting(trace_once, values[0], values[1], **bounds)
            may = largest_fitting(trace_once, values[0], values[1], surely=False, **bounds)
            where = (f"on a card of {options.fit_card}" if options.fit_card is not None
                     else f"under a cap of {options.fit_limit}")
            print(f"the largest value that fits {where}: "
                  f"{best if best is not None else f'none ({values[0]} may not)'}")
            if may is not None and may != best:
                print(f"the largest value that may fit (its trace fits, its upper bound does "
                      f"not, or has none): {may}")
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def _trace_script(script: str, args: List[str], out: str, card: str, alloc_conf: str) -> int:
    """Runs `script` with `args` under a Tracer and writes its trace to `out`; the exit status:
    2 where the script cannot be traced (one line says why), 1 where the script itself failed
    (its traceback, as Python prints it, without the tracer's frames)."""
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
    except Exception as error:  # noqa: BLE001 - the script's own, or the tracer's: told apart
        return _failed(script, tracer, error)
    finally:
        sys.argv = saved_argv
    for warning in tracer.notes(out):
        print(f"allocsim trace: warning: {warning}", file=sys.stderr)
    try:
        upper = tracer.write(out, alloc_conf)
    except ValueError as error:
        print(f"allocsim trace: error: {error}", file=sys.stderr)
        return 2
    allocs = sum(1 for r in tracer.log.requests if r.action == "alloc" and r.size)
    print(f"{out}: {allocs} allocations traced on a pretend {tracer.card.name}"
          + (f"; its upper bound: {upper}" if upper is not None else ""))
    return 0


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_TRACER_DIR = os.path.join(_PACKAGE_DIR, "tracer")
_TORCH_MARK = os.sep + "torch" + os.sep


def _program_frame(filename: str) -> bool:
    """Whether a frame is the script's (or its libraries'), not PyTorch's, allocsim's or
    runpy's."""
    return (_TORCH_MARK not in filename and not filename.startswith(_PACKAGE_DIR) and
            "runpy" not in os.path.basename(filename))


def _failed(script: str, tracer, error: BaseException) -> int:
    """A failure inside the trace: where the innermost frame is the tracer's (or fake tensors'
    own limits), one line naming the op and the script's line (status 2); otherwise the script's
    own error, its traceback as Python prints it without the frames of runpy and the tracer
    (status 1)."""
    import traceback
    frames = traceback.extract_tb(error.__traceback__)
    program = [f for f in frames if _program_frame(f.filename)]
    innermost = frames[-1].filename if frames else ""
    fake_limit = type(error).__module__.startswith("torch._subclasses")
    if innermost.startswith(_TRACER_DIR) or fake_limit:
        line = (f"{program[-1].filename}:{program[-1].lineno}" if program
                else "(no line of the script)")
        op = f" in {tracer.current_op}" if tracer.current_op else ""
        print(f"allocsim trace: error: the trace failed{op} at {line}: "
              f"{type(error).__name__}: {error}".splitlines()[0], file=sys.stderr)
        return 2
    # PyTorch's own frames left out too: on a GPU the op fails in C++, below the script's line
    kept = [f for f in traceback.walk_tb(error.__traceback__)
            if _program_frame(f[0].f_code.co_filename)]
    print(f"allocsim trace: error: {script} raised {type(error).__name__} (its traceback, "
          "PyTorch's frames left out, follows)", file=sys.stderr)
    print("Traceback (most recent call last):", file=sys.stderr)
    print("".join(traceback.StackSummary.extract(kept).format()), end="", file=sys.stderr)
    print("".join(traceback.format_exception_only(type(error), error)), end="", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
