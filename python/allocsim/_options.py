"""The allocsim options the Python functions take, written as the binary's flags."""

from __future__ import annotations

import os
import pickle
from typing import Iterable, List, Optional, Sequence, Union

Snapshot = Union[str, "os.PathLike[str]", dict, list]
Size = Union[int, str]


def size_arg(value: Size) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"a size is an int of bytes or a string such as '24GiB', not {value!r}")
    return str(value)


def conf_list(alloc_conf: Union[None, str, Iterable[str]]) -> List[str]:
    if alloc_conf is None:
        return []
    return [alloc_conf] if isinstance(alloc_conf, str) else list(alloc_conf)


def torch_version_args(torch_version: Optional[str]) -> List[str]:
    return [] if torch_version is None else ["--torch-version", str(torch_version)]


def device_args(device: Optional[int]) -> List[str]:
    return [] if device is None else ["--device", str(int(device))]


def values_arg(values: Sequence[int]) -> str:
    return ",".join(str(int(v)) for v in values)


def empty_cache_args(empty_cache_at: Union[None, str, Sequence[int]]) -> List[str]:
    if empty_cache_at is None:
        return []
    if isinstance(empty_cache_at, str):
        return ["--empty-cache-at", empty_cache_at]
    return ["--empty-cache-at", values_arg(empty_cache_at)]


def plan_args(card: Optional[Size], limit: Optional[Size], context: Optional[Size],
              alloc_conf: Union[None, str, Iterable[str]]) -> List[str]:
    """plan's options for the card (or limit), the context and the settings to weigh."""
    args: List[str] = []
    for flag, value in (("--card", card), ("--limit", limit), ("--context", context)):
        if value is not None:
            args += [flag, size_arg(value)]
    for conf in conf_list(alloc_conf):
        args += ["--alloc-conf", conf]
    return args


def snapshot_path(snapshot: Snapshot, tmp: str, name: str) -> str:
    """A path the binary reads: the snapshot's own, or for the plain containers
    torch.cuda.memory._snapshot() returns, a pickle written in `tmp` as _dump_snapshot() does."""
    if isinstance(snapshot, (dict, list)):
        path = os.path.join(tmp, name + ".pickle")
        with open(path, "wb") as f:
            pickle.dump(snapshot, f, protocol=4)
        return path
    return os.fspath(snapshot)
