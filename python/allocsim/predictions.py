"""predict(): the trace a job would record at a size it was not recorded at, as `allocsim
predict` writes it."""

from __future__ import annotations

import os
import tempfile
from typing import Optional, Sequence

from ._binary import run
from ._options import Snapshot, device_args, snapshot_path, values_arg


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
    with tempfile.TemporaryDirectory(prefix="allocsim-") as tmp:
        paths = [snapshot_path(s, tmp, f"recording{i}") for i, s in enumerate(snapshots)]
        run(["predict", *paths, "--at", values_arg(at), "--to", str(int(to)), "--out",
             os.fspath(out), "-q", *device_args(device)], binary)
    return os.fspath(out)
