"""predict(): the trace a job would record at a size it was not recorded at, as `allocsim
predict` writes it."""

from __future__ import annotations

import os
import tempfile
from typing import Optional, Sequence

from ._binary import run
from ._options import Snapshot, device_args, snapshot_path, values_arg


def predict(snapshots: Sequence[Snapshot], at: Sequence[int], to: Optional[int] = None,
            out: str = "", world_size: Optional[int] = None, device: Optional[int] = None,
            multiprocessors: Optional[int] = None, binary: Optional[str] = None) -> str:
    """Writes the trace a job would record at a value of a size parameter it was not recorded at,
    or one rank's trace at another world size, as `allocsim predict` does.

    Args:
        snapshots: recordings of the job (paths or dicts) at a few values of the parameter.
        at: the value of each recording (with world_size: the world size each rank's recording
            was made at).
        to: the value to predict at; or world_size: the ranks to predict one rank's trace at.
        out: FILE.atrace, or FILE.pickle (FILE.pickle.gz) for a memory snapshot.
        multiprocessors: the GPU's, where the reductions' staging buffers stop growing (default
            132: an H100's or H200's).
        device, binary: as for replay().

    Returns:
        `out`, which replay() and plan() read like a recording.

    Raises:
        AllocsimError: allocsim refused the input.
        ValueError: no out, or neither or both of to and world_size.
    """
    if not out:
        raise ValueError("predict: out names the trace to write (FILE.atrace or FILE.pickle)")
    if (to is None) == (world_size is None):
        raise ValueError("predict: give to (the value to predict at) or world_size (the ranks)")
    with tempfile.TemporaryDirectory(prefix="allocsim-") as tmp:
        paths = [snapshot_path(s, tmp, f"recording{i}") for i, s in enumerate(snapshots)]
        target = (["--world-size", str(int(world_size))] if world_size is not None else
                  ["--to", str(int(to))])
        sms = [] if multiprocessors is None else ["--multiprocessors", str(int(multiprocessors))]
        run(["predict", *paths, "--at", values_arg(at), *target, "--out", os.fspath(out), "-q",
             *sms, *device_args(device)], binary)
    return os.fspath(out)
