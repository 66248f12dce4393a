"""allocsim from Python: replay a PyTorch memory snapshot through a simulation of PyTorch's CUDA
caching allocator, plan the memory it needs under each allocator setting, and get advice at an
out-of-memory error.

    import allocsim
    report = allocsim.replay("job.pickle", capacity="24GiB")      # or the dict of _snapshot()
    plans = allocsim.plan("job.pickle", card="24GiB")
    allocsim.predict(["b4.pickle", "b8.pickle", "b16.pickle"], at=[4, 8, 16], to=32,
                     out="b32.atrace")                            # then replay or plan it
    remedies = allocsim.plan_accumulation(["b4.pickle", "b8.pickle", "b16.pickle"], at=[4, 8, 16],
                                          batch=64, card="24GiB")  # settings vs accumulation
    allocsim.torch.advise_on_oom()                                 # in a training script
    d = allocsim.diff("yesterday.pickle", "today.pickle")        # where the memory went
    allocsim.trace(train_step, steps=2, out="job.pickle.gz")      # no GPU: traced on the CPU

Each call runs the allocsim binary (the one installed with the package, $ALLOCSIM_BINARY, or the
one on PATH) and returns its JSON report as a dict; errors raise AllocsimError with allocsim's
one-line message.
"""

from typing import Any, Callable, Optional

from ._binary import AllocsimError, binary
from .advice import Advice, advise, format_size
from .diffs import diff
from .fleet import fleet
from .plans import plan, plan_accumulation, plan_ranks, plan_sweep
from .predictions import predict
from .replays import replay
from .reports import (AccumulationReport, DiffReport, FleetJob, FleetReport, PlanReport,
                      RankPlanReport, ReplayReport, SweepReport)

__all__ = ["AccumulationReport", "Advice", "AllocsimError", "DiffReport", "FleetJob",
           "FleetReport", "PlanReport", "RankPlanReport", "ReplayReport", "SweepReport", "advise",
           "binary", "diff", "fleet", "format_size", "plan", "plan_accumulation", "plan_ranks",
           "plan_sweep", "predict", "replay", "trace"]


def trace(step, steps: int = 2, out: Optional[str] = None, card: str = "h100",
          setup: Optional[Callable[[], Any]] = None, alloc_conf: str = ""):
    """Runs `step` `steps` times on the CPU as if on a GPU (no GPU, no device memory: fake
    tensors) and returns the allocsim.tracer.Tracer holding the requests it made of the CUDA
    caching allocator; with `out`, also writes them (FILE.pickle[.gz] or FILE.atrace; with
    what the trace could not know as notes, and its upper bound beside it where it has one:
    Tracer.write). `setup`,
    if given, is called first inside the trace (build the model and optimizer there: what it
    makes on "cuda" is traced) and its result, unless None, passed to each call of `step`. `card` is the GPU
    to pretend (allocsim.tracer.CARDS). What is modelled: docs/trace.md."""
    from .tracer import Tracer
    tracer = Tracer(card=card)
    with tracer:
        state = setup() if setup is not None else None
        for _ in range(steps):
            if state is not None:
                step(state)
            else:
                step()
    if out is not None:
        tracer.write(out, alloc_conf)
    return tracer


def __getattr__(name):
    # allocsim.torch imports torch: only when asked for.
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'allocsim' has no attribute {name!r}")
