"""The figures of PyTorch's out-of-memory message that a replay must give too."""
import re

OOM_FIELDS = [r"Tried to allocate ([\d.]+ \w+)", r"([\d.]+ \w+) allowed",
              r"Of the allocated memory ([\d.]+ \w+) is allocated by PyTorch",
              r"and ([\d.]+ \w+) is reserved by PyTorch but unallocated"]


def oom_figures(msg):
    """The request's size, the cap, the allocated and the reserved-but-unallocated figures of
    `msg` (None for each it does not name)."""
    return [m.group(1) if (m := re.search(p, msg or "")) else None for p in OOM_FIELDS]
