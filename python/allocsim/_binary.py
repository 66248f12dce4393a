"""Finds, runs and checks the allocsim binary: the one place its exit status and its stderr
become AllocsimError."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, List, Optional, Sequence

from ._options import Snapshot, snapshot_path


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


def exec_binary(args: Sequence[str]) -> None:
    """Becomes `allocsim ARGS...` (this process replaced by the binary)."""
    try:
        path = binary()
    except AllocsimError as error:
        print(error, file=sys.stderr)
        sys.exit(error.returncode)
    os.execv(path, [path, *args])


def run(args: Sequence[str], given: Optional[str] = None,
        accepted: Sequence[int] = (0,)) -> subprocess.CompletedProcess:
    """Runs `allocsim ARGS...` (the binary `given`, else binary()); its stdout and stderr as text.

    Raises:
        AllocsimError: the exit status is not among `accepted`; the message is allocsim's first
            error line (else the last line it wrote, else the status).
    """
    argv = [given or binary(), *args]
    p = subprocess.run(argv, capture_output=True, text=True, errors="replace")
    if p.returncode not in accepted:
        raise error_of(p, args[0] if args else "")
    return p


def error_of(p: subprocess.CompletedProcess, command: str) -> AllocsimError:
    lines = (p.stderr or "").strip().splitlines()
    errors = [line for line in lines if line.startswith("allocsim: error")]
    message = errors[0] if errors else (lines[-1] if lines else "")
    return AllocsimError(message or f"allocsim {command} exited with {p.returncode}",
                         p.returncode)


# The exit statuses that come with a report (0: no OOM, 3: an OOM).
REPORTED = (0, 3)


def run_report(command: str, snapshots: Sequence[Snapshot], args: Sequence[str],
               given: Optional[str] = None) -> Any:
    """Runs `allocsim COMMAND SNAPSHOTS... ARGS... --json FILE` and returns the JSON report it
    wrote: an OOM (exit status 3) is an answer, not an error."""
    with tempfile.TemporaryDirectory(prefix="allocsim-") as tmp:
        paths = [snapshot_path(s, tmp, f"snapshot{i}") for i, s in enumerate(snapshots)]
        report = os.path.join(tmp, "report.json")
        quiet: List[str] = ["-q"] if command == "replay" else []
        p = run([command, *paths, *args, "--json", report, *quiet], given, accepted=REPORTED)
        if not os.path.exists(report):
            raise error_of(p, command)
        with open(report) as f:
            return json.load(f)
