"""Attributes replaced for the length of a trace, put back on any exit: each patch is a context
entered on the tracer's ExitStack, so that a trace that fails half-way (in the tracer or in the
script) leaves PyTorch and the libraries as it found them."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


@contextlib.contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    """`owner.name` is `value` inside the context, and what it was (or absent) after."""
    had = name in vars(owner) if isinstance(owner, type) else hasattr(owner, name)
    old = vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name, None)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if had:
            setattr(owner, name, old)
        else:
            delattr(owner, name)
