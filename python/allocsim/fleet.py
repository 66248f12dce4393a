"""Many snapshots at once: each replayed and planned by `allocsim fleet --job`, on any
concurrent.futures.Executor (a local pool by default, or a Dask cluster's
`distributed.Client(...).get_executor()`), then put together by `allocsim fleet --results`: the
same report `allocsim fleet` makes on one machine.

    import allocsim
    report = allocsim.fleet(["oom-reports/", "tickets/"], card="24GiB", out="fleet.html")

    from distributed import Client
    with Client("tcp://scheduler:8786") as client:
        report = allocsim.fleet(["/shared/oom-reports"], executor=client.get_executor())

From the command line, `python3 -m allocsim.fleet PATHS... --scheduler tcp://HOST:PORT` (also what
`allocsim fleet --scheduler` runs). Workers need the allocsim package and read the files by the
same paths.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
from typing import Iterable, List, Optional, Sequence, Union

from ._cli import AllocsimError, Size, _executable, _plan_args, _torch_version_args
from .reports import FleetReport


def _options(card: Optional[Size], context: Optional[Size],
             alloc_conf: Union[None, str, Iterable[str]], cache: Optional[str],
             no_cache: bool, torch_version: Optional[str] = None) -> List[str]:
    args = _plan_args(card, None, context, alloc_conf) + _torch_version_args(torch_version)
    if cache is not None:
        args += ["--cache", cache]
    if no_cache:
        args.append("--no-cache")
    return args


def _checked(p: subprocess.CompletedProcess, what: str) -> str:
    if p.returncode != 0:
        errors = [line for line in p.stderr.splitlines() if line.startswith("allocsim: error")]
        raise AllocsimError(errors[0] if errors else f"allocsim fleet {what} exited with "
                            f"{p.returncode}", p.returncode)
    return p.stdout


def analyze_job(path: str, options: Sequence[str], binary: Optional[str] = None) -> dict:
    """One file's result, as `allocsim fleet --job` gives it (run on a worker)."""
    p = subprocess.run([_executable(binary), "fleet", "--job", path, *options],
                       capture_output=True, text=True, errors="replace")
    return json.loads(_checked(p, "--job"))


def fleet(paths: Sequence[str], executor: Optional[concurrent.futures.Executor] = None,
          card: Optional[Size] = None, context: Optional[Size] = None,
          alloc_conf: Union[None, str, Iterable[str]] = None, out: Optional[str] = None,
          cache: Optional[str] = None, no_cache: bool = False,
          torch_version: Optional[str] = None, binary: Optional[str] = None) -> FleetReport:
    """The fleet report of every snapshot under `paths` (files, and directories searched
    recursively), as `allocsim fleet --json` writes it.

    Args:
        paths: snapshot files and directories.
        executor: runs one file's analysis per task (default: a thread pool of one task per
            core, each running the allocsim binary); a Dask client's get_executor() runs them on
            its workers.
        card, context, alloc_conf, torch_version: as for plan() (torch_version: every job's
            replays follow that release; default: each job's own).
        out: also write the HTML report there.
        cache, no_cache: where each file's result is kept by content hash (default
            ~/.cache/allocsim/fleet on whichever machine analyses it), or none.
        binary: the allocsim binary here (workers find their own).

    Returns:
        The report (reports.FleetReport): `rows` (one per device history), `failed` (the files
        that could not be read, each with its one-line error), `totals`.

    Raises:
        AllocsimError: allocsim refused the options.
    """
    exe = _executable(binary)
    options = _options(card, context, alloc_conf, cache, no_cache, torch_version)
    listed = subprocess.run([exe, "fleet", *paths, "--list"], capture_output=True, text=True,
                            errors="replace")
    files = [f for f in _checked(listed, "--list").splitlines() if f]
    if not files:
        raise AllocsimError("allocsim: error: fleet: no snapshot files (*.pickle, *.pickle.gz, "
                            "*.atrace) found", 2)
    own = executor is None
    if own:
        executor = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    try:
        worker_binary = binary if own else None
        futures = [executor.submit(analyze_job, f, options, worker_binary) for f in files]
        results = []
        for f, future in zip(files, futures):
            try:
                results.append(future.result())
            except Exception as e:  # noqa: BLE001 -- a worker's failure is that file's, listed
                results.append({"file": f, "error": f"{f}: {type(e).__name__}: {e}"})
    finally:
        if own:
            executor.shutdown()
    with tempfile.TemporaryDirectory(prefix="allocsim-fleet-") as tmp:
        listed_results = os.path.join(tmp, "results.json")
        with open(listed_results, "w") as f:
            json.dump(results, f)
        report_path = os.path.join(tmp, "report.json")
        args = [exe, "fleet", "--results", listed_results, "--json", report_path, *options]
        if out is not None:
            args += ["--out", out]
        _checked(subprocess.run(args, capture_output=True, text=True, errors="replace"),
                 "--results")
        with open(report_path) as f:
            return json.load(f)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m allocsim.fleet",
                                     description="allocsim fleet on a Dask cluster")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--scheduler", help="tcp://HOST:PORT of a Dask scheduler")
    parser.add_argument("--out")
    parser.add_argument("--json")
    parser.add_argument("--card")
    parser.add_argument("--context")
    parser.add_argument("--alloc-conf", action="append")
    parser.add_argument("--cache")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--torch-version")
    a = parser.parse_args(argv)
    client = None
    executor = None
    if a.scheduler:
        from distributed import Client
        client = Client(a.scheduler)
        executor = client.get_executor()
    try:
        report = fleet(a.paths, executor=executor, card=a.card, context=a.context,
                       alloc_conf=a.alloc_conf, out=a.out, cache=a.cache, no_cache=a.no_cache,
                       torch_version=a.torch_version)
    except AllocsimError as e:
        print(str(e), file=sys.stderr)
        return e.returncode or 2
    finally:
        if client is not None:
            client.close()
    text = json.dumps(report, indent=1) + "\n"
    if a.json == "-":
        sys.stdout.write(text)
    elif a.json:
        with open(a.json, "w") as f:
            f.write(text)
    t = report["totals"]
    if a.json != "-":
        print(f"allocsim fleet: {report['jobs']} files, {t['devices']} device histories, "
              f"{len(report['failed'])} unreadable; {t['ooms']} ran out of memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
