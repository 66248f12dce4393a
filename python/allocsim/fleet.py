"""Many snapshots at once: each replayed and planned by `allocsim fleet --job`, on any
concurrent.futures.Executor (a local pool by default, or a Dask cluster's
`distributed.Client(...).get_executor()`), then put together by `allocsim fleet --results`: the
same report `allocsim fleet` makes on one machine.

    import allocsim
    report = allocsim.fleet(["oom-reports/", "tickets/"], card="24GiB", out="fleet.html")

    from distributed import Client
    with Client("tcp://scheduler:8786") as client:
        report = allocsim.fleet(["/shared/oom-reports"], executor=client.get_executor())

From the command line, `allocsim fleet PATHS... --scheduler tcp://HOST:PORT` (the command pip
installs; also `python3 -m allocsim fleet ...`) runs fleet_on_cluster(). Workers need the allocsim
package and read the files by the same paths. The cluster is driven from Python, not from the
binary: Dask's client is Python, and each worker runs the binary once per file.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import tempfile
from typing import Iterable, List, Optional, Sequence, Tuple, Union

from ._binary import AllocsimError, binary as find_binary, run
from ._options import Size, plan_args, torch_version_args
from .reports import FleetJob, FleetReport


def _options(card: Optional[Size], context: Optional[Size],
             alloc_conf: Union[None, str, Iterable[str]], cache: Optional[str],
             no_cache: bool, torch_version: Optional[str] = None) -> List[str]:
    args = plan_args(card, None, context, alloc_conf) + torch_version_args(torch_version)
    if cache is not None:
        args += ["--cache", cache]
    if no_cache:
        args.append("--no-cache")
    return args


def analyze_job(path: str, options: Sequence[str], binary: Optional[str] = None) -> FleetJob:
    """One file's result, as `allocsim fleet --job` gives it (run on a worker)."""
    return json.loads(run(["fleet", "--job", path, *options], binary).stdout)


def fleet(paths: Sequence[str], executor: Optional[concurrent.futures.Executor] = None,
          card: Optional[Size] = None, context: Optional[Size] = None,
          alloc_conf: Union[None, str, Iterable[str]] = None, out: Optional[str] = None,
          cache: Optional[str] = None, no_cache: bool = False,
          torch_version: Optional[str] = None,
          pairs: Sequence[Tuple[str, str]] = (), binary: Optional[str] = None) -> FleetReport:
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
        pairs: (A, B) of one job's two runs (yesterday's and today's): each B against A as
            diff() compares them, in the report's `pairs` (compared here, not on the executor).
        cache, no_cache: where each file's result is kept by content hash (default
            ~/.cache/allocsim/fleet on whichever machine analyses it), or none.
        binary: the allocsim binary here (workers find their own).

    Returns:
        The report (reports.FleetReport): `rows` (one per device history), `failed` (the files
        that could not be read, each with its one-line error), `totals`.

    Raises:
        AllocsimError: allocsim refused the options.
    """
    exe = binary or find_binary()
    options = _options(card, context, alloc_conf, cache, no_cache, torch_version)
    files = [f for f in run(["fleet", *paths, "--list"], exe).stdout.splitlines() if f] \
        if paths else []
    if not files and not pairs:
        raise AllocsimError("allocsim: error: fleet: no snapshot files (*.pickle, *.pickle.gz, "
                            "*.atrace) found", 2)
    own = executor is None
    if own:
        executor = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
    try:
        worker_binary = binary if own else None
        futures = [executor.submit(analyze_job, f, options, worker_binary) for f in files]
        results: List[FleetJob] = []
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
        args = ["fleet", "--results", listed_results, "--json", report_path, *options]
        for a, b in pairs:
            args += ["--pair", os.fspath(a), os.fspath(b)]
        if out is not None:
            args += ["--out", out]
        run(args, exe)
        with open(report_path) as f:
            return json.load(f)


def fleet_on_cluster(argv: Sequence[str]) -> int:
    """`allocsim fleet ARGV... --scheduler tcp://HOST:PORT`: the exit status."""
    parser = argparse.ArgumentParser(prog="allocsim fleet",
                                     description="allocsim fleet on a Dask cluster")
    parser.add_argument("paths", nargs="*")
    parser.add_argument("--scheduler", required=True, help="tcp://HOST:PORT of a Dask scheduler")
    parser.add_argument("--out")
    parser.add_argument("--json")
    parser.add_argument("--card")
    parser.add_argument("--context")
    parser.add_argument("--alloc-conf", action="append")
    parser.add_argument("--cache")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--torch-version")
    parser.add_argument("--pair", nargs=2, action="append", default=[], metavar=("A", "B"))
    a = parser.parse_args(argv)
    try:
        from distributed import Client
    except ImportError:
        print("allocsim: error: fleet --scheduler: Dask's distributed is not installed here "
              "(pip install distributed)", file=sys.stderr)
        return 2
    client = Client(a.scheduler)
    try:
        executor = client.get_executor()
        report = fleet(a.paths, executor=executor, card=a.card, context=a.context,
                       alloc_conf=a.alloc_conf, out=a.out, cache=a.cache, no_cache=a.no_cache,
                       torch_version=a.torch_version, pairs=[tuple(p) for p in a.pair])
    except AllocsimError as e:
        print(str(e), file=sys.stderr)
        return e.returncode or 2
    finally:
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

