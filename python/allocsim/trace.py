"""`python -m allocsim.trace script.py [ARGS...]`: runs a training or inference script on the CPU
as if on a GPU, with no GPU and no device memory, and writes the requests it would make of
PyTorch's CUDA caching allocator as a trace that `allocsim replay`, `plan`, `predict` and `fleet`
read (a PyTorch memory snapshot, or allocsim's compact trace).

    python -m allocsim.trace train.py --steps 2 -o train.pickle.gz -- --batch 16
    allocsim plan train.pickle.gz --card 24GiB

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
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    parser.add_argument("-o", "--out", required=True,
                        help="the trace to write: FILE.pickle, FILE.pickle.gz or FILE.atrace")
    parser.add_argument("--card", default="h100",
                        help="the GPU to pretend (its kernels' choices and workspaces): "
                             "h100, h200, a100, a100-40gb, l4, rtx4090, rtx3090, a10g")
    parser.add_argument("--alloc-conf", default=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                        help="the PYTORCH_CUDA_ALLOC_CONF the trace records (default: the "
                             "environment's)")
    options = parser.parse_args(argv)
    script_args: List[str] = list(options.args[1:] if options.args[:1] == ["--"] else
                                  options.args)
    if not os.path.isfile(options.script):
        print(f"allocsim trace: error: {options.script}: no such script", file=sys.stderr)
        return 2
    from .tracer import CARDS, TraceError, Tracer
    if options.card.lower() not in CARDS:
        print(f"allocsim trace: error: --card {options.card}: one of {', '.join(sorted(CARDS))}",
              file=sys.stderr)
        return 2
    saved_argv = sys.argv
    sys.argv = [options.script, *script_args]
    tracer = Tracer(card=options.card)
    try:
        with tracer:
            runpy.run_path(options.script, run_name="__main__")
    except TraceError as error:
        print(f"allocsim trace: error: {error}", file=sys.stderr)
        return 2
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            print(f"allocsim trace: error: {options.script} exited with {exit_.code}",
                  file=sys.stderr)
            return 2
    finally:
        sys.argv = saved_argv
    for warning in tracer.warnings:
        print(f"allocsim trace: warning: {warning}", file=sys.stderr)
    tracer.save(options.out, options.alloc_conf)
    allocs = sum(1 for r in tracer.log.requests if r.action == "alloc")
    print(f"{options.out}: {allocs} allocations traced on a pretend {tracer.card.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
