"""allocsim inside a PyTorch job: the recorder and the OOM advisor.

    import allocsim.torch
    allocsim.torch.record_memory_history()  # a drop-in for torch.cuda.memory._record_memory_history
                                            # that marks what the trace leaves out (recorder.py)
    allocsim.torch.advise_on_oom()          # before the work; records a bounded history
    ... train ...                           # an OOM prints the advice, then raises as ever

The advisor records the allocator's history through the recorder (at most `max_entries` events,
so a long job does not grow without end) and registers an out-of-memory
observer. At an OOM the observer takes the snapshot, replays it through allocsim and prints the
advice (allocsim.advice) before PyTorch raises its OutOfMemoryError. Nothing it does can change
or mask that exception: any failure of its own is one line on the same stream. Where PyTorch has
no CUDA (a CPU build, no device), it warns once and stays off, so that the same script runs there.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
import warnings
from typing import IO, Optional, Sequence, Tuple

import torch

from ._options import Size
from ._torch_checks import cuda_missing, require_torch
from .advice import advise
from .recorder import dump_snapshot, record_memory_history, recorder_metadata, snapshot

__all__ = ["OomAdvisor", "advise_on_oom", "dump_snapshot", "record_memory_history",
           "recorder_metadata", "snapshot"]


class OomAdvisor:
    """What advise_on_oom() registered. `last_advice`: the dict of the latest advice (None before
    an OOM); `enabled = False` silences it (PyTorch cannot unregister an observer).
    `disabled_reason`: why advise_on_oom() left it off (no CUDA here), else None."""

    def __init__(self, card: Optional[Size], alloc_conf: Optional[Sequence[str]],
                 out_dir: Optional[str], file: Optional[IO[str]], binary: Optional[str],
                 recordings: Optional[Sequence[Tuple[str, int]]] = None,
                 batch: Optional[int] = None):
        self.card = card
        self.alloc_conf = alloc_conf
        self.out_dir = out_dir
        self.file = file
        self.binary = binary
        self.recordings = recordings
        self.batch = batch
        self.enabled = True
        self.disabled_reason: Optional[str] = None
        self.last_advice: Optional[dict] = None
        self._busy = False

    def _print(self, text: str) -> None:
        stream = self.file or sys.stderr
        stream.write(text)
        stream.flush()

    def __call__(self, device: int, alloc: int, device_allocated: int, device_free: int) -> None:
        # Called by the allocator between its failed retry and the raise, without its lock held.
        if not self.enabled or self._busy:
            return
        self._busy = True
        try:
            self.last_advice = self._advise(device, device_free)
            self._print(self.last_advice["text"])
        except BaseException as e:  # noqa: BLE001 -- the user's OOM must propagate unchanged
            self._print(f"allocsim: no advice for this OOM: {type(e).__name__}: {e}\n")
        finally:
            self._busy = False

    def _advise(self, device: int, device_free: int) -> dict:
        snap = snapshot()
        total = torch.cuda.get_device_properties(device).total_memory
        reserved = torch.cuda.memory_reserved(device)
        fraction = _memory_fraction(device)
        memory_limit = int(fraction * total) if fraction is not None and fraction < 1 else None
        # What the allocator could have reserved: the free memory it saw beside what it held,
        # and the fraction's cap.
        limit = reserved + device_free
        if memory_limit is not None:
            limit = min(limit, memory_limit)
        context = max(0, total - reserved - device_free)
        if self.card is not None:
            advice = advise(snap, card=self.card, context=context, device=device,
                            capacity=total, memory_limit=memory_limit,
                            alloc_conf=self.alloc_conf, recordings=self.recordings,
                            batch=self.batch, binary=self.binary)
        else:
            advice = advise(snap, limit=limit, device=device, capacity=total,
                            memory_limit=memory_limit, alloc_conf=self.alloc_conf,
                            recordings=self.recordings, batch=self.batch, binary=self.binary)
        if self.out_dir:
            advice["files"] = _write(self.out_dir, snap, advice)
            advice["text"] += f"  snapshot and advice written to {advice['files']['snapshot']}\n"
        return advice


def _memory_fraction(device: int) -> Optional[float]:
    get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    if get is None:
        return None
    try:
        return float(get(device))
    except Exception:  # noqa: BLE001 -- older PyTorch: no fraction known
        return None


def _write(out_dir: str, snapshot: dict, advice: dict) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, time.strftime("oom-%Y%m%d-%H%M%S"))
    paths = {"snapshot": stem + ".pickle", "advice": stem + ".json", "text": stem + ".txt"}
    with open(paths["snapshot"], "wb") as f:
        pickle.dump(snapshot, f)
    with open(paths["advice"], "w") as f:
        json.dump({k: v for k, v in advice.items() if k != "text"}, f, indent=1)
    with open(paths["text"], "w") as f:
        f.write(advice["text"])
    return paths


def advise_on_oom(card: Optional[Size] = None, max_entries: int = 100_000,
                  alloc_conf: Optional[Sequence[str]] = None, out_dir: Optional[str] = None,
                  file: Optional[IO[str]] = None, stacks: str = "python",
                  recordings: Optional[Sequence[Tuple[str, int]]] = None,
                  batch: Optional[int] = None, binary: Optional[str] = None) -> OomAdvisor:
    """Records the allocator's history (the last `max_entries` events, with `stacks` frames:
    "python" or "all") and prints advice at every CUDA out-of-memory error.

    card: answer for a card of this size (with this process's memory outside PyTorch beside it)
    instead of the device the job ran on. alloc_conf: the settings to weigh (default: a useful
    set). out_dir: also write the snapshot, the advice as JSON and as text there. file: where
    to print (default stderr). recordings: (snapshot path, value) of earlier runs of the job at
    smaller values of one size parameter: the advice adds the largest value that fits; with
    `batch` (the recordings' values being batch sizes), the remedies at that batch instead,
    gradient accumulation among them.

    RuntimeError where PyTorch is older than 2.1. Where PyTorch has no CUDA here, a
    RuntimeWarning and an advisor that is off (`disabled_reason` says why)."""
    require_torch(torch, "allocsim.torch.advise_on_oom")
    advisor = OomAdvisor(card, alloc_conf, out_dir, file, binary, recordings, batch)
    reason = cuda_missing(torch)
    if reason is not None:
        warnings.warn(f"allocsim.torch.advise_on_oom: {reason}: no history is recorded and no "
                      "advice will be given", RuntimeWarning, stacklevel=2)
        advisor.enabled = False
        advisor.disabled_reason = reason
        return advisor
    record_memory_history(enabled="all", stacks=stacks, max_entries=max_entries)
    torch._C._cuda_attach_out_of_memory_observer(advisor)
    return advisor
