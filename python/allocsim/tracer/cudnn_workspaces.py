"""What cuDNN's convolutions allocate through the caching allocator: a workspace whose size is the
algorithm cuDNN's heuristics choose for the shape on the card, which no rule gives. They come from
a table recorded on a GPU (tools/gpu/record_cudnn_workspaces.py, tools/build_cudnn_table.py): per
convolution op and its arguments as called (shapes, strides, dtypes and the rest), the
allocations and frees of its first call at that shape, outputs included, in order. A convolution
the table does not hold makes its outputs alone, and is counted: the trace says how many and which
are missing."""

from __future__ import annotations

import gzip
import json
import os
from typing import Any, Dict, List, Optional, Tuple

import torch

aten = torch.ops.aten
_OPS = {aten.convolution.default: "convolution",
        aten.convolution_backward.default: "convolution_backward"}
CONVOLUTION_OPS = frozenset(_OPS)
# Tables by compute capability (major, minor): cuDNN's heuristics choose by architecture.
_TABLES = {(9, 0): "cudnn_workspaces_sm90.json.gz"}

Script = List[Tuple[Any, ...]]


def _describe(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return {"shape": list(x.shape), "stride": list(x.stride()),
                "dtype": str(x.dtype).replace("torch.", "")}
    if isinstance(x, (list, tuple)):
        return [_describe(v) for v in x]
    if isinstance(x, torch.SymInt):
        return int(x)
    return x


def _nbytes(t: Any) -> Optional[int]:
    if not isinstance(t, torch.Tensor):
        return None
    return t.numel() * t.element_size()


class CudnnWorkspaces:
    """The table of the card's compute capability, read on first use; `missing` counts the
    convolutions traced that it does not hold, by op and shapes."""

    def __init__(self, major: int, minor: int) -> None:
        self._file = _TABLES.get((major, minor))
        self._table: Optional[Dict[str, List[List[Any]]]] = None
        self.recorded_on: Dict[str, Any] = {}
        self.missing: Dict[str, int] = {}

    def _load(self) -> Dict[str, List[List[Any]]]:
        if self._table is None:
            self._table = {}
            if self._file is not None:
                path = os.path.join(os.path.dirname(os.path.abspath(__file__)), self._file)
                with gzip.open(path, "rt") as f:
                    data = json.load(f)
                self._table = data["table"]
                self.recorded_on = data["recorded_on"]
        return self._table

    def script(self, func, args: Tuple[Any, ...], outputs: Tuple[Any, ...]) -> Optional[Script]:
        """The op's allocations as the table has them (its outputs among them, matched by size
        in order), or None for an op that is not a convolution."""
        name = _OPS.get(func)
        if name is None:
            return None
        key = json.dumps([name, [_describe(a) for a in args]], separators=(",", ":"))
        events = self._load().get(key)
        if events is None:
            return self._missed(name, args)
        freed = {e[1] for e in events if e[0] == "f"}
        sizes = [_nbytes(o) for o in outputs]
        taken = [False] * len(outputs)
        steps: Script = []
        allocation = 0
        for event in events:
            if event[0] == "f":
                steps.append(("free", f"temporary{event[1]}"))
                continue
            if allocation in freed:
                steps.append(("alloc", f"temporary{allocation}", event[1]))
            else:
                match = next((i for i, s in enumerate(sizes) if s == event[1] and not taken[i]),
                             None)
                if match is None:  # not this op's outputs: the table is not for this call
                    return self._missed(name, args)
                taken[match] = True
                steps.append(("output", match, None))
            allocation += 1
        steps += [("output", i, None) for i in range(len(outputs)) if not taken[i]]
        return steps

    def _missed(self, name: str, args: Tuple[Any, ...]) -> None:
        shapes = [list(a.shape) for a in args if isinstance(a, torch.Tensor)]
        what = f"{name} {shapes}"
        self.missing[what] = self.missing.get(what, 0) + 1
        return None

    def warning(self, card_name: str) -> Optional[str]:
        """One line on the convolutions traced without their workspaces, or None."""
        if not self.missing:
            return None
        calls = sum(self.missing.values())
        where = (f"the table recorded on an {self.recorded_on.get('device')} (cuDNN "
                 f"{self.recorded_on.get('cudnn')}, PyTorch {self.recorded_on.get('torch')})"
                 if self._file is not None else f"no table for the {card_name}'s architecture")
        return (f"{calls} convolution call(s) of {len(self.missing)} shape(s) are not in "
                f"{where}: traced with their outputs alone, cuDNN's workspaces left out "
                f"(the first: {next(iter(self.missing))})")
