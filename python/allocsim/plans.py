"""Capacity planning, as `allocsim plan` answers it: the smallest cap per allocator setting
(plan), the largest batch or sequence that fits (plan_sweep), the fewest ranks that fit
(plan_ranks), the remedies at a batch size the job was not recorded at (plan_accumulation)."""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Union

from ._binary import run_report
from ._options import (Size, Snapshot, device_args, empty_cache_args, plan_args,
                       torch_version_args, values_arg)
from .reports import AccumulationReport, PlanReport, RankPlanReport, SweepReport


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
    args = plan_args(card, limit, context, alloc_conf)
    args += device_args(device)
    args += empty_cache_args(empty_cache_at) + torch_version_args(torch_version)
    return run_report("plan", [snapshot], [*args, *extra_args], binary)


def plan_sweep(snapshots: Sequence[Snapshot], at: Sequence[int], card: Optional[Size] = None,
               limit: Optional[Size] = None, context: Optional[Size] = None,
               alloc_conf: Union[None, str, Iterable[str]] = None, max_value: Optional[int] = None,
               device: Optional[int] = None, multiprocessors: Optional[int] = None,
               binary: Optional[str] = None) -> SweepReport:
    """For each allocator setting, the largest value of a size parameter (batch size, sequence
    length) whose predicted trace fits a card or a cap, as `allocsim plan TRACE... --at` does.

    Args:
        snapshots: recordings of the job at a few values of the parameter.
        at: the value of each recording.
        card, limit, context, alloc_conf: as for plan().
        max_value: the largest value to search (default 64 times the largest recorded).
        multiprocessors: as for predict().
        device, binary: as for replay().

    Returns:
        `plans`, one per setting, with `alloc_conf`, `max_value` and the values `tried`.

    Raises:
        AllocsimError: allocsim refused the input (recordings that do not align, say).
    """
    args: List[str] = ["--at", values_arg(at)]
    args += plan_args(card, limit, context, alloc_conf)
    if max_value is not None:
        args += ["--max", str(int(max_value))]
    if multiprocessors is not None:
        args += ["--multiprocessors", str(int(multiprocessors))]
    args += device_args(device)
    return run_report("plan", list(snapshots), args, binary)


def plan_ranks(snapshots: Sequence[Snapshot], world_sizes: Sequence[int],
               card: Optional[Size] = None, limit: Optional[Size] = None,
               context: Optional[Size] = None, alloc_conf: Union[None, str, Iterable[str]] = None,
               max_ranks: Optional[int] = None, device: Optional[int] = None,
               binary: Optional[str] = None) -> RankPlanReport:
    """For each allocator setting, the fewest ranks of a data-parallel job on which each rank
    fits a card or a cap, as `allocsim plan TRACE... --at N1,N2 --world-size` does.

    Args:
        snapshots: one rank's recordings of the job at a few world sizes.
        world_sizes: the world size of each recording.
        card, limit, context, alloc_conf: as for plan().
        max_ranks: the most ranks to search (default 1024).
        device, binary: as for replay().

    Returns:
        `plans`, one per setting, with `alloc_conf`, `min_ranks` (0: none up to the bound) and
        the world sizes `tried`.

    Raises:
        AllocsimError: allocsim refused the input (recordings that do not align, say).
    """
    args: List[str] = ["--at", values_arg(world_sizes), "--world-size"]
    args += plan_args(card, limit, context, alloc_conf)
    if max_ranks is not None:
        args += ["--max", str(int(max_ranks))]
    args += device_args(device)
    return run_report("plan", list(snapshots), args, binary)


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
    args: List[str] = ["--at", values_arg(at), "--batch", str(int(batch))]
    args += plan_args(card, limit, context, alloc_conf)
    args += device_args(device)
    return run_report("plan", list(snapshots), args, binary)
