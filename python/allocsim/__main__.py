"""`allocsim` as pip installs it, and `python3 -m allocsim`: the allocsim binary with these
arguments, except `allocsim fleet PATHS... --scheduler tcp://HOST:PORT`, which drives a Dask
cluster from Python (allocsim.fleet), each worker running the binary once per file."""

import sys
from typing import Optional, Sequence

from ._binary import exec_binary


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["fleet"] and any(a == "--scheduler" or a.startswith("--scheduler=")
                                     for a in args):
        from .fleet import fleet_on_cluster
        sys.exit(fleet_on_cluster(args[1:]))
    exec_binary(args)


if __name__ == "__main__":
    main()
