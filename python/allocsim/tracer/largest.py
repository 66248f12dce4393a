"""The largest value of a size (a batch, a sequence length) at which a traced job fits: a
bisection over traces, each made at the value tried and replayed on the card or under the cap.
Tracing costs the same at any size (fake tensors), so each try takes seconds, and each is exact
to the extent the trace is: no extrapolation between recordings."""

from __future__ import annotations

from typing import Callable, Dict, Optional

from .._options import Size


def fits(path: str, capacity: Optional[Size] = None, limit: Optional[Size] = None) -> bool:
    """Whether the trace in `path` replays without an OOM on a card of `capacity` (its memory,
    PyTorch's context taken from it as replay does) or under a cap of `limit` bytes
    (set_per_process_memory_fraction's)."""
    from ..replays import replay
    return replay(path, capacity=capacity, memory_limit=limit)["ooms"] == 0


def largest_fitting(trace_at: Callable[[int], str], low: int, high: int,
                    capacity: Optional[Size] = None, limit: Optional[Size] = None,
                    report: Optional[Callable[[int, bool], None]] = None) -> Optional[int]:
    """The largest value in low..high whose trace (`trace_at(value)` writes it and returns its
    path) fits, assuming a larger value needs no less memory; None where `low` does not fit."""
    if capacity is None and limit is None:
        raise ValueError("largest_fitting: give the card's memory (capacity) or a cap (limit)")
    if not 0 < low <= high:
        raise ValueError(f"largest_fitting: {low}..{high} is not a range of positive values")
    tried: Dict[int, bool] = {}

    def ok(value: int) -> bool:
        if value not in tried:
            tried[value] = fits(trace_at(value), capacity, limit)
            if report is not None:
                report(value, tried[value])
        return tried[value]

    if not ok(low):
        return None
    while low < high:
        mid = (low + high + 1) // 2
        if ok(mid):
            low = mid
        else:
            high = mid - 1
    return low
