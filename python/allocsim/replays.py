"""replay(): a snapshot through the simulated allocator, as `allocsim replay` replays it."""

from __future__ import annotations

from typing import List, Optional, Sequence, Union

from ._binary import run_report
from ._options import (Size, Snapshot, device_args, empty_cache_args, size_arg,
                       torch_version_args)
from .reports import ReplayReport


def replay(snapshot: Snapshot, capacity: Optional[Size] = None,
           alloc_conf: Optional[str] = None, memory_fraction: Optional[float] = None,
           memory_limit: Optional[Size] = None, replace_recorded_caps: bool = False,
           context: Optional[Size] = None, device: Optional[int] = None, on_oom: Optional[str] = None,
           empty_cache_at: Union[None, str, Sequence[int]] = None,
           torch_version: Optional[str] = None,
           extra_args: Sequence[str] = (), binary: Optional[str] = None) -> ReplayReport:
    """Replays a snapshot as `allocsim replay` does.

    Args:
        snapshot: a snapshot file (.pickle, .pickle.gz, .atrace, RMM .csv), or the dict
            torch.cuda.memory._snapshot() returns.
        capacity: the card's memory, in bytes or as "24GiB" (default 80 GiB).
        alloc_conf: a PYTORCH_CUDA_ALLOC_CONF to replay with instead of the recorded one.
        memory_fraction, memory_limit: a cap, as set_per_process_memory_fraction sets it. On a
            snapshot of allocsim's recorder, the cap where the history starts: the run's own
            cap changes after it are made where it made them.
        replace_recorded_caps: the cap given holds for the whole run instead, the run's own cap
            changes left out.
        context: the memory held outside PyTorch (default 750 MiB, or what a recorded OOM shows).
        device: one device of a snapshot of several.
        on_oom: "stop" (default) or "continue" past each OOM.
        empty_cache_at: a what-if: torch.cuda.empty_cache() before every step after the first
            ("step") or before the given trace events.
        torch_version: the PyTorch release whose allocator to follow, "2.11" to "2.14" (default:
            the oldest that writes the snapshot's fields, else 2.11).
        extra_args: further `allocsim replay` options.
        binary: the allocsim binary to run (default: binary()).

    Returns:
        The report of `allocsim replay --json`: an OOM is an answer, not an error; `oom` says
        what failed.

    Raises:
        AllocsimError: allocsim refused the input, with its one-line message.
    """
    args: List[str] = []
    if capacity is not None:
        args += ["--capacity", size_arg(capacity)]
    if alloc_conf is not None:
        args += ["--alloc-conf", alloc_conf]
    if memory_fraction is not None:
        args += ["--memory-fraction", repr(float(memory_fraction))]
    if memory_limit is not None:
        args += ["--memory-limit", size_arg(memory_limit)]
    if replace_recorded_caps:
        args.append("--replace-recorded-caps")
    if context is not None:
        args += ["--context", size_arg(context)]
    args += device_args(device)
    if on_oom is not None:
        args += ["--on-oom", on_oom]
    args += empty_cache_args(empty_cache_at) + torch_version_args(torch_version)
    return run_report("replay", [snapshot], [*args, *extra_args], binary)
