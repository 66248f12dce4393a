"""The values of device tensors that a trace can know without the data: those a program fills
itself (ones, zeros, full, arange, a host tensor copied over) and what ops make of them. A
program reads them back to decide what to do next — a generation loop asks whether every
sequence has finished, a mask whether it is all ones — and on a GPU they are there to read.

Values are kept per device storage (a real CPU tensor of its elements) for storages of at most
`MAX_ELEMENTS` elements, and forgotten when the storage dies or an op writes it from values the
trace does not have. Where the values are not known but few values are possible (a boolean; what
an elementwise op makes of such tensors; the largest of them), the possible ones are kept, and an
elementwise op over them has a known result where every value they could take gives the same
one: `done | unknown` after the last step is all True, `unfinished & ~done` all 0 — what lets a
generation loop that stops on `unfinished.max() == 0` stop when its length is reached."""

from __future__ import annotations

import itertools
from typing import Any, Dict, FrozenSet, List, Optional

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_unflatten

from .requests import storage_of as _storage

aten = torch.ops.aten
MAX_ELEMENTS = 1 << 16
# Ops that overwrite their first argument whatever it held.
_OVERWRITE = {aten.copy_.default, aten.fill_.Scalar, aten.fill_.Tensor, aten.zero_.default}
# Ops whose outputs hold whatever the memory held.
_UNINITIALIZED = {aten.empty.memory_format, aten.empty_strided.default, aten.new_empty.default,
                  aten.new_empty_strided.default, aten.empty_like.default, aten.resize_.default}
_UNKNOWN = object()
# The most values a tensor of unknown values is tracked as possibly holding, and the most
# combinations of them an op is run on.
_MAX_POSSIBLE = 8
_MAX_TRIALS = 16
# Ops whose values do not depend on their tensor arguments' values (their shapes only).
_SHAPE_ONLY = {aten.ones_like.default, aten.zeros_like.default, aten.full_like.default,
               aten.new_ones.default, aten.new_zeros.default, aten.new_full.default}
# Reductions whose result is one of their input's values.
_PICKS = {aten.max.default, aten.min.default, aten.amax.default, aten.amin.default}


def _written(func, args, kwargs) -> List[torch.Tensor]:
    """The tensor arguments `func` writes (its schema's mutable ones)."""
    out: List[torch.Tensor] = []
    schema = func._schema
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write:
            continue
        value = args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name)
        flat, _ = tree_flatten(value)
        out.extend(v for v in flat if isinstance(v, torch.Tensor))
    return out


def _whole_storage(t: torch.Tensor, storage) -> bool:
    return (t.is_contiguous() and t.storage_offset() == 0 and
            t.numel() * t.element_size() == storage.nbytes())


class DeviceValues:
    """Known contents of device storages, and the possible values of some others, by storage key
    (the StorageImpl's address)."""

    def __init__(self) -> None:
        self._content: Dict[int, torch.Tensor] = {}
        self._possible: Dict[int, FrozenSet[Any]] = {}

    def forget(self, key: int) -> None:
        self._content.pop(key, None)
        self._possible.pop(key, None)

    def value_of(self, t: torch.Tensor) -> Optional[torch.Tensor]:
        """A real CPU tensor with `t`'s values, or None where the trace does not have them."""
        if not isinstance(t, FakeTensor):
            return t
        s = _storage(t)
        content = self._content.get(s._cdata) if s is not None else None
        if content is None or content.dtype != t.dtype:
            return None
        with _disable_current_modes():
            return torch.as_strided(content, t.shape, t.stride(), t.storage_offset())

    def _possible_values(self, t: torch.Tensor) -> Optional[FrozenSet[Any]]:
        s = _storage(t)
        possible = self._possible.get(s._cdata) if s is not None else None
        if possible is None and t.dtype == torch.bool:
            possible = frozenset((False, True))
        return possible

    def _remember(self, fake: torch.Tensor, real: Optional[torch.Tensor],
                  possible: Optional[FrozenSet[Any]] = None) -> None:
        s = _storage(fake)
        if s is None:
            return
        self.forget(s._cdata)
        if fake.numel() > MAX_ELEMENTS or not _whole_storage(fake, s):
            return
        if real is not None and real.shape == fake.shape:
            self._content[s._cdata] = real.detach().reshape(-1).clone().to(fake.dtype)
        elif possible is not None and len(possible) == 1 and fake.numel():
            self._content[s._cdata] = torch.full((fake.numel(),), next(iter(possible)),
                                                 dtype=fake.dtype)
        elif possible is not None and len(possible) <= _MAX_POSSIBLE:
            self._possible[s._cdata] = possible

    def after(self, func, args, kwargs, out, is_device) -> None:
        """Called once `func` has run on the fake tensors (`out`): the values of its device
        outputs where they follow from known ones, and those it wrote forgotten otherwise.
        `is_device(storage)` says whether a storage is the device's."""
        with _disable_current_modes():
            self._after(func, args, kwargs, out, is_device)

    def _after(self, func, args, kwargs, out, is_device) -> None:
        written = [w for w in _written(func, args, kwargs) if isinstance(w, FakeTensor)]
        outputs = [o for o in tree_flatten(out)[0] if isinstance(o, FakeTensor)]
        if torch.Tag.nondeterministic_seeded in func.tags or func in _UNINITIALIZED:
            self._forget_all(written + outputs)
            return
        overwrite = func in _OVERWRITE
        flat, spec = tree_flatten((args, kwargs))
        unknown: List[int] = []
        real: List[Any] = []
        for i, leaf in enumerate(flat):
            if isinstance(leaf, FakeTensor):
                value = self.value_of(leaf)
                if value is None and func in _SHAPE_ONLY:
                    value = torch.zeros(leaf.shape, dtype=leaf.dtype)
                if value is None and overwrite and i == 0:
                    s = _storage(leaf)
                    if leaf.numel() <= MAX_ELEMENTS and s is not None and _whole_storage(leaf, s):
                        self.forget(s._cdata)
                        self._content[s._cdata] = torch.zeros(leaf.numel(), dtype=leaf.dtype)
                        value = self.value_of(leaf)
                if value is None:
                    if leaf.numel() > MAX_ELEMENTS:
                        self._forget_all(written + outputs)
                        return
                    unknown.append(i)
                    value = _UNKNOWN
                real.append(value)
            elif isinstance(leaf, torch.device):
                real.append(torch.device("cpu"))
            else:
                real.append(leaf)
        if any(o.numel() > MAX_ELEMENTS for o in outputs):
            self._forget_all(written + outputs)
            return
        inputs = {s._cdata for s in (_storage(a) for a in flat if isinstance(a, FakeTensor))
                  if s is not None}
        # Outputs in storages of their own (not views of an argument) on the device.
        fresh = [o for o, s in ((o, _storage(o)) for o in outputs)
                 if s is not None and is_device(s) and s._cdata not in inputs]
        if unknown:
            self._forget_all(written)
            if func in _PICKS and len(fresh) == 1 and unknown == [0]:
                self._remember(fresh[0], None, self._possible_values(flat[0]))
                return
            trials = self._trials(func, flat, spec, real, unknown)
            if trials is None or len(fresh) != 1 or len(outputs) != 1:
                self._forget_all(outputs)
                return
            first = trials[0]
            if all(r.shape == first.shape and torch.equal(r, first) for r in trials[1:]):
                self._remember(fresh[0], first)
            else:
                possible = frozenset(v for r in trials for v in r.unique().tolist())
                self._remember(fresh[0], None, possible)
            return
        result = self._run(func, spec, real)
        results = [r for r in tree_flatten(result)[0] if isinstance(r, torch.Tensor)]
        if result is None or len(results) != len(outputs):
            self._forget_all(written + outputs)
            return
        for fake, value in zip(outputs, results):
            if fake in fresh:
                self._remember(fake, value)

    def _run(self, func, spec, real):
        args, kwargs = tree_unflatten(real, spec)
        try:
            return func(*args, **kwargs)
        except Exception:  # an op the CPU does not run as CUDA does: its values unknown
            return None

    def _trials(self, func, flat, spec, real, unknown: List[int]) -> Optional[List[torch.Tensor]]:
        """An elementwise op run once for each combination of the values its unknown arguments
        could hold (each tensor filled with one: an elementwise op's element depends on its own
        elements only); None where they are not few or the op is not elementwise."""
        if torch.Tag.pointwise not in func.tags or func._schema.is_mutable:
            return None
        possible = [self._possible_values(flat[i]) for i in unknown]
        if any(p is None for p in possible):
            return None
        count = 1
        for p in possible:
            count *= len(p)
        if count > _MAX_TRIALS:
            return None
        results = []
        for values in itertools.product(*(sorted(p, key=repr) for p in possible)):
            trial = list(real)
            for i, v in zip(unknown, values):
                trial[i] = torch.full(flat[i].shape, v, dtype=flat[i].dtype)
            result = self._run(func, spec, trial)
            if not isinstance(result, torch.Tensor):
                return None
            results.append(result)
        return results

    def _forget_all(self, tensors) -> None:
        for t in tensors:
            s = _storage(t)
            if s is not None:
                self.forget(s._cdata)
