"""The largest value of a size (a batch, a sequence length) at which a traced job fits: a
bisection over traces, each made at the value tried and replayed on the card or under the cap.
Tracing costs the same at any size (fake tensors), so each try takes seconds, and each is exact
to the extent the trace is: no extrapolation between recordings. Where a trace has sizes it does
not know, its upper-bound twin is replayed too, and a value "fits" only where that fits as well;
where only the trace fits it "may not fit"; where the trace does not fit, it "does not fit"."""

from __future__ import annotations

import os
from typing import Callable, Dict, Optional, Tuple

from .._options import Size

FITS, MAY_NOT_FIT, DOES_NOT_FIT = "fits", "may not fit", "does not fit"
# What allocsim.trace writes into a trace whose unknowns have no upper bound (its warnings)
UNBOUNDED_NOTE = "no upper bound"


def _replays_without_oom(path: str, capacity: Optional[Size], limit: Optional[Size]
                         ) -> Tuple[bool, bool]:
    """Whether the trace replays without an OOM, and whether it says that some of its sizes
    have no upper bound."""
    from ..replays import replay
    report = replay(path, capacity=capacity, memory_limit=limit)
    unbounded = any(UNBOUNDED_NOTE in w for w in report.get("warnings", []))
    return report["ooms"] == 0, unbounded


def verdict(path: str, capacity: Optional[Size] = None, limit: Optional[Size] = None) -> str:
    """FITS, MAY_NOT_FIT or DOES_NOT_FIT for the trace in `path` (and its upper-bound twin
    beside it, where the trace has one) on a card of `capacity` (its memory, PyTorch's context
    taken from it as replay does) or under a cap of `limit` bytes."""
    from .tracer import upper_bound_path
    fits, unbounded = _replays_without_oom(path, capacity, limit)
    if not fits:
        return DOES_NOT_FIT
    upper = upper_bound_path(path)
    if os.path.exists(upper) and not _replays_without_oom(upper, capacity, limit)[0]:
        return MAY_NOT_FIT
    return MAY_NOT_FIT if unbounded else FITS


def fits(path: str, capacity: Optional[Size] = None, limit: Optional[Size] = None) -> bool:
    """Whether the trace in `path` surely fits (verdict FITS)."""
    return verdict(path, capacity, limit) == FITS


def largest_fitting(trace_at: Callable[[int], str], low: int, high: int,
                    capacity: Optional[Size] = None, limit: Optional[Size] = None,
                    report: Optional[Callable[[int, str], None]] = None,
                    surely: bool = True) -> Optional[int]:
    """The largest value in low..high whose trace (`trace_at(value)` writes it and returns its
    path) fits (`surely`: its verdict is FITS; else: it is not DOES_NOT_FIT), assuming a larger
    value needs no less memory; None where `low` does not. `report(value, verdict)` is told of
    each value tried."""
    if capacity is None and limit is None:
        raise ValueError("largest_fitting: give the card's memory (capacity) or a cap (limit)")
    if not 0 < low <= high:
        raise ValueError(f"largest_fitting: {low}..{high} is not a range of positive values")
    tried: Dict[int, str] = {}

    def ok(value: int) -> bool:
        if value not in tried:
            tried[value] = verdict(trace_at(value), capacity, limit)
            if report is not None:
                report(value, tried[value])
        return tried[value] == FITS if surely else tried[value] != DOES_NOT_FIT

    if not ok(low):
        return None
    while low < high:
        mid = (low + high + 1) // 2
        if ok(mid):
            low = mid
        else:
            high = mid - 1
    return low
