"""diff(): two runs side by side, as `allocsim diff A B` compares them: where the memory of one
went in the other, and how much of the difference the program made and how much the allocator."""

from __future__ import annotations

from typing import List, Optional

from ._binary import run_report
from ._options import Size, Snapshot, device_args, size_arg
from .reports import DiffReport


def diff(a: Snapshot, b: Snapshot, device: Optional[int] = None, device_b: Optional[int] = None,
         capacity: Optional[Size] = None, context: Optional[Size] = None,
         out: Optional[str] = None, binary: Optional[str] = None) -> DiffReport:
    """Compares run B with run A, as `allocsim diff A B --json` does.

    Args:
        a, b: the two runs' snapshots (files, or the dicts torch.cuda.memory._snapshot() returns).
        device: the device of a snapshot of several (both runs); device_b: B's, where another.
        capacity: the card both are replayed on (default: each run's own, as far as it shows).
        context: the memory held outside PyTorch (default 750 MiB, or what a recorded OOM shows).
        out: also write both runs' timelines on one scale (FILE.html, or FILE.svg).
        binary: the allocsim binary to run (default: binary()).

    Returns:
        The report (reports.DiffReport): `a` and `b` (each run's figures), `pairing`, `groups`
        (where the difference lies at the peaks, by source line or by step and position),
        `reserved_parting`, `split` (the program's and the allocator's parts) and `warnings`.

    Raises:
        AllocsimError: allocsim refused an input, with its one-line message.
    """
    args: List[str] = device_args(device)
    if device_b is not None:
        args += ["--device-b", str(int(device_b))]
    if capacity is not None:
        args += ["--capacity", size_arg(capacity)]
    if context is not None:
        args += ["--context", size_arg(context)]
    if out is not None:
        args += ["--out", out]
    return run_report("diff", [a, b], [*args, "-q"], binary)
