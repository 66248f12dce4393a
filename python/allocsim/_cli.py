"""Runs the allocsim binary on a snapshot and returns its JSON report."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import tempfile
from typing import Any, Iterable, List, Optional, Sequence, Union

from .reports import AccumulationReport, PlanReport, ReplayReport, SweepReport

Snapshot = Union[str, "os.PathLike[str]", dict, list]
Size = Union[int, str]

# The binary's exit statuses that come with a report (0: no OOM, 3: an OOM).
_REPORTED = (0, 3)


class AllocsimError(Exception):
    """allocsim refused the input or failed; the message is its one error line."""

    def __init__(self, message: str, returncode: int):
        super().__init__(message)
        self.returncode = returncode


def binary() -> str:
    """The allocsim binary used: $ALLOCSIM_BINARY, the one installed with this package, or the
    one on PATH."""
    candidates = [os.environ.get("ALLOCSIM_BINARY"),
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "allocsim"),
                  shutil.which("allocsim")]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise AllocsimError("allocsim: error: the allocsim binary was not found (set ALLOCSIM_BINARY, "
                        "or install the package from a build tree: pip install build/python)", 2)


def _empty_cache_args(empty_cache_at: Union[None, str, Sequence[int]]) -> List[str]:
    if empty_cache_at is None:
        return []
    if isinstance(empty_cache_at, str):
        return ["--empty-cache-at", empty_cache_at]
    return ["--empty-cache-at", ",".join(str(int(e)) for e in empty_cache_at)]


def main() -> None:
    """The `allocsim` console command: runs the binary with this process's arguments."""
    import sys
    try:
        path = binary()
    except AllocsimError as error:
        print(error, file=sys.stderr)
        sys.exit(error.returncode)
    os.execv(path, [path, *sys.argv[1:]])


def _executable(given: Optional[str]) -> str:
    return given or binary()


def _size(value: Size) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"a size is an int of bytes or a string such as '24GiB', not {value!r}")
    return str(value)


def _conf_list(alloc_conf: Union[None, str, Iterable[str]]) -> List[str]:
    if alloc_conf is None:
        return []
    return [alloc_conf] if isinstance(alloc_conf, str) else list(alloc_conf)


def _torch_version_args(torch_version: Optional[str]) -> List[str]:
    return [] if torch_version is None else ["--torch-version", str(torch_version)]


def _plan_args(card: Optional[Size], limit: Optional[Size], context: Optional[Size],
               alloc_conf: Union[None, str, Iterable[str]]) -> List[str]:
    """plan's options for the card (or limit), the context and the settings to weigh."""
    args: List[str] = []
    for flag, value in (("--card", card), ("--limit", limit), ("--context", context)):
        if value is not None:
            args += [flag, _size(value)]
    for conf in _conf_list(alloc_conf):
        args += ["--alloc-conf", conf]
    return args


def _path(snapshot: Snapshot, tmp: str, name: str) -> str:
    if isinstance(snapshot, (dict, list)):
        # What torch.cuda.memory._snapshot() / memory_snapshot() return: plain containers,
        # pickled as torch.cuda.memory._dump_snapshot() writes them.
        path = os.path.join(tmp, name + ".pickle")
        with open(path, "wb") as f:
            pickle.dump(snapshot, f, protocol=4)
        return path
    return os.fspath(snapshot)


def _run(command: str, snapshots: Sequence[Snapshot], args: Sequence[str],
         exe: Optional[str]) -> dict:
    exe = _executable(exe)
    with tempfile.TemporaryDirectory(prefix="allocsim-") as tmp:
        paths = [_path(s, tmp, f"snapshot{i}") for i, s in enumerate(snapshots)]
        report = os.path.join(tmp, "report.json")
        quiet = ["-q"] if command == "replay" else []
        p = subprocess.run([exe, command, *paths, *args, "--json", report, *quiet],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           errors="replace")
        errors = [line for line in p.stderr.splitlines() if line.startswith("allocsim: error")]
        if p.returncode not in _REPORTED or not os.path.exists(report):
            message = errors[0] if errors else (p.stderr.strip().splitlines() or [""])[-1]
            raise AllocsimError(message or f"allocsim {command} exited with {p.returncode}",
                                p.returncode)
        with open(report) as f:
            return json.load(f)


def replay(snapshot: Snapshot, capacity: Optional[Size] = None,
           alloc_conf: Optional[str] = None, memory_fraction: Optional[float] = None,
           memory_limit: Optional[Size] = None, context: Optional[Size] = None,
           device: Optional[int] = None, on_oom: Optional[str] = None,
           empty_cache_at: Union[None, str, Sequence[int]] = None,
           torch_version: Optional[str] = None,
           extra_args: Sequence[str] = (), binary: Optional[str] = None) -> ReplayReport:
    """Replays a snapshot as `allocsim replay` does.

    Args:
        snapshot: a snapshot file (.pickle, .pickle.gz, .atrace, RMM .csv), or the dict
            torch.cuda.memory._snapshot() returns.
        capacity: the card's memory, in bytes or as "24GiB" (default 80 GiB).
        alloc_conf: a PYTORCH_CUDA_ALLOC_CONF to replay with instead of the recorded one.
        memory_fraction, memory_limit: a cap, as set_per_process_memory_fraction sets it.
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
        args += ["--capacity", _size(capacity)]
    if alloc_conf is not None:
        args += ["--alloc-conf", alloc_conf]
    if memory_fraction is not None:
        args += ["--memory-fraction", repr(float(memory_fraction))]
    if memory_limit is not None:
        args += ["--memory-limit", _size(memory_limit)]
    if context is not None:
        args += ["--context", _size(context)]
    if device is not None:
        args += ["--device", str(int(device))]
    if on_oom is not None:
        args += ["--on-oom", on_oom]
    args += _empty_cache_args(empty_cache_at) + _torch_version_args(torch_version)
    return _run("replay", [snapshot], [*args, *extra_args], binary)


def plan(snapshot: Snapshot, card: Optional[Size] = None, limit: Optional[Size] = None,
         context: Optional[Size] = None, alloc_conf: Union[None, str, Iterable[str]] = None,
         device: Optional[int] = None, empty_cache_at: Union[None, str, Sequence[int]] = None,
         torch_version: Optional[str] = None,
         extra_args: Sequence[str] = (), binary: Optional[str] = None) -> PlanReport:
    """For each allocator setting, the smallest cap on reserved memory the snapshot's run fits
    in, and whether a card (or a cap) holds it, as `allocsim plan` does.

    Args:
        snapshot: as for replay().
        card: the card to answer for (default 80 GiB); or limit: a cap on reserved memory.
        context: the memory held outside PyTorch on the card.
        alloc_conf: one setting or several to plan for beside the recorded one (default: a
            useful set).
        device, empty_cache_at, torch_version, extra_args, binary: as for replay().

    Returns:
        The report of `allocsim plan --json`: `plans`, one per setting, and `best_alloc_conf`.

    Raises:
        AllocsimError: allocsim refused the input.
    """
    args = _plan_args(card, limit, context, alloc_conf)
    if device is not None:
        args += ["--device", str(int(device))]
    args += _empty_cache_args(empty_cache_at) + _torch_version_args(torch_version)
    return _run("plan", [snapshot], [*args, *extra_args], binary)


def plan_sweep(snapshots: Sequence[Snapshot], at: Sequence[int], card: Optional[Size] = None,
               limit: Optional[Size] = None, context: Optional[Size] = None,
               alloc_conf: Union[None, str, Iterable[str]] = None, max_value: Optional[int] = None,
               device: Optional[int] = None, binary: Optional[str] = None) -> SweepReport:
    """For each allocator setting, the largest value of a size parameter (batch size, sequence
    length) whose predicted trace fits a card or a cap, as `allocsim plan TRACE... --at` does.

    Args:
        snapshots: recordings of the job at a few values of the parameter.
        at: the value of each recording.
        card, limit, context, alloc_conf: as for plan().
        max_value: the largest value to search (default 64 times the largest recorded).
        device, binary: as for replay().

    Returns:
        `plans`, one per setting, with `alloc_conf`, `max_value` and the values `tried`.

    Raises:
        AllocsimError: allocsim refused the input (recordings that do not align, say).
    """
    args: List[str] = ["--at", ",".join(str(int(v)) for v in at)]
    args += _plan_args(card, limit, context, alloc_conf)
    if max_value is not None:
        args += ["--max", str(int(max_value))]
    if device is not None:
        args += ["--device", str(int(device))]
    return _run("plan", list(snapshots), args, binary)


def plan_accumulation(snapshots: Sequence[Snapshot], at: Sequence[int], batch: int,
                      card: Optional[Size] = None, limit: Optional[Size] = None,
                      context: Optional[Size] = None,
                      alloc_conf: Union[None, str, Iterable[str]] = None,
                      device: Optional[int] = None,
                      binary: Optional[str] = None) -> AccumulationReport:
    """The remedies at a batch size the job was not recorded at, as `allocsim plan TRACE... --at
    V1,V2,... --batch B` gives them: every allocator setting (and torch.cuda.empty_cache() before
    every step) at batch B, and gradient accumulation over micro-batches of B/2, B/4 and B/8.

    Args:
        snapshots: recordings of the job at a few batch sizes, with the optimizer's
            record_function annotations (a training loop with torch.optim records them).
        at: the batch size of each recording.
        batch: the batch size the job needs.
        card, limit, context, alloc_conf: as for plan().
        device, binary: as for replay().

    Returns:
        `at_batch` (plan()'s report at the batch), `gradient_accumulation` (one plan per number
        of passes) and `cheapest`, the remedy that fits at the least cost.

    Raises:
        AllocsimError: allocsim refused the input (recordings without the optimizer's
            annotations, say).
    """
    args: List[str] = ["--at", ",".join(str(int(v)) for v in at), "--batch", str(int(batch))]
    args += _plan_args(card, limit, context, alloc_conf)
    if device is not None:
        args += ["--device", str(int(device))]
    return _run("plan", list(snapshots), args, binary)


def predict(snapshots: Sequence[Snapshot], at: Sequence[int], to: int, out: str,
            device: Optional[int] = None, binary: Optional[str] = None) -> str:
    """Writes the trace a job would record at a value of a size parameter it was not recorded at,
    as `allocsim predict` does.

    Args:
        snapshots: recordings of the job (paths or dicts) at a few values of the parameter.
        at: the value of each recording.
        to: the value to predict at.
        out: FILE.atrace, or FILE.pickle (FILE.pickle.gz) for a memory snapshot.
        device, binary: as for replay().

    Returns:
        `out`, which replay() and plan() read like a recording.

    Raises:
        AllocsimError: allocsim refused the input.
    """
    exe = _executable(binary)
    with tempfile.TemporaryDirectory(prefix="allocsim-") as tmp:
        paths = [_path(s, tmp, f"recording{i}") for i, s in enumerate(snapshots)]
        args = [exe, "predict", *paths, "--at", ",".join(str(int(v)) for v in at),
                "--to", str(int(to)), "--out", os.fspath(out), "-q"]
        if device is not None:
            args += ["--device", str(int(device))]
        p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           errors="replace")
    if p.returncode != 0:
        errors = [line for line in p.stderr.splitlines() if line.startswith("allocsim: error")]
        raise AllocsimError(errors[0] if errors else f"allocsim predict exited with {p.returncode}",
                            p.returncode)
    return os.fspath(out)


__all__: List[Any] = ["AllocsimError", "binary", "replay", "plan", "plan_sweep",
                      "plan_accumulation", "predict"]
