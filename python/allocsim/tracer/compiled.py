"""torch.compile in a trace, bounded rather than guessed. Inductor fuses a region's pointwise
ops (their intermediates never exist) and AOTAutograd's partitioner chooses what the backward
keeps (recomputing the rest), neither of which a CPU run of fake tensors can reproduce. So each
compiled region runs eagerly, and of what it allocates:
  - the trace (its lower bound) keeps the region's outputs, and in the backward the gradients
    that outlive it (the parameters' .grad): a compiled region allocates those whatever it fuses;
  - the upper-bound twin keeps everything the eager run allocates (its intermediates and saved
    tensors): Inductor's default mode fuses and recomputes, and allocates no more than eager.
mode="reduce-overhead" and "max-autotune" (CUDA graphs' private pools, autotuning's benchmark
buffers) have no upper bound here, and say so."""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Optional, Set

import torch
from torch.utils._pytree import tree_leaves

from .requests import storage_of
from .uncertain import Cause

# Allocations made inside a region that a compiled run makes too (cuBLAS's handles' workspaces,
# made at the first product on a thread and stream, whatever the kernels)
_PERSISTENT = ("cuBLAS workspace", "cuBLASLt workspace")
COMPILED = Cause("torch.compile's generated code", "compiled regions run eagerly: their "
                 "intermediates and saved tensors are in the upper-bound trace only",
                 "their outputs and the gradients that outlive the backward")
GRAPHED = Cause("torch.compile with CUDA graphs or autotuning", "mode='reduce-overhead' or "
                "'max-autotune': private pools and benchmark buffers", "the eager run's")


class CompiledRegions:
    """torch.compile's stand-in (compile()) and what it marks in the request log."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.depth = 0
        # ids of the autograd nodes the regions' forwards made (alive until their backward)
        self.nodes: Set[int] = set()
        # allocations made by those nodes in the backward: internal unless they outlive it
        self.candidates: List[int] = []
        self.in_backward = False

    def compile(self, model: Any = None, *, mode: Optional[str] = None, **kwargs: Any) -> Any:
        """torch.compile(model, ...): the model (a Module or a function) run as a region."""
        if model is None:
            return lambda m: self.compile(m, mode=mode, **kwargs)
        if mode in ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
            self.tracer.uncertain.note(GRAPHED, None, self.tracer.where())
        if isinstance(model, torch.nn.Module):
            return _CompiledModule(model, self)
        return functools.wraps(model)(lambda *a, **k: self.run(model, a, k))

    def module_compile(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        """nn.Module.compile(): the module's own forward becomes a region, in place."""
        if kwargs.get("mode") in ("reduce-overhead", "max-autotune"):
            self.tracer.uncertain.note(GRAPHED, None, self.tracer.where())
        forward = module.forward
        module.forward = lambda *a, **k: self.run(forward, a, k)

    def run(self, fn: Callable[..., Any], args: Any, kwargs: Dict[str, Any]) -> Any:
        log = self.tracer.log
        start = len(log.requests)
        self.depth += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            self.depth -= 1
        if self.depth:
            return out  # the outermost region decides
        kept = set()
        for t in tree_leaves(out):
            s = storage_of(t) if isinstance(t, torch.Tensor) else None
            if s is not None:
                kept.add(s._cdata)
        internal = 0
        for r in log.requests[start:]:
            if (r.action == "alloc" and r.upper is None and r.size and
                    r.what not in _PERSISTENT and log.key_of(r.addr) not in kept):
                r.upper, r.size = r.size, 0
                internal += r.upper
        self.tracer.uncertain.note(COMPILED, internal, self.tracer.where())
        inputs = {id(t.grad_fn) for t in tree_leaves((args, kwargs))
                  if isinstance(t, torch.Tensor) and t.grad_fn is not None}
        self._collect_nodes(out, inputs)
        return out

    def _collect_nodes(self, out: Any, stop: Set[int]) -> None:
        todo = [t.grad_fn for t in tree_leaves(out)
                if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while todo:
            node = todo.pop()
            if node is None or id(node) in self.nodes or id(node) in stop or \
                    type(node).__name__ == "AccumulateGrad":
                continue
            self.nodes.add(id(node))
            todo.extend(n for n, _ in node.next_functions)

    def op_ran(self, backward: bool, node: Any, first: int) -> None:
        """An op on the device ran (in the backward, as `node`), its requests from `first` on."""
        if backward:
            self.in_backward = True
            if node is not None and id(node) in self.nodes:
                self.backward_allocated(first)
        elif self.in_backward:
            self.backward_ended()

    def backward_allocated(self, first: int) -> None:
        """The requests from `first` on were made by a region's node in the backward."""
        log = self.tracer.log
        self.candidates.extend(r.addr for r in log.requests[first:]
                               if r.action == "alloc" and r.upper is None and r.size and
                               r.what not in _PERSISTENT)

    def backward_ended(self) -> None:
        """The backward is over: what the regions' nodes allocated and is gone was internal to
        them (a compiled backward fuses it away); what is alive (gradients) stays."""
        log = self.tracer.log
        if self.candidates:
            by_addr = {r.addr: r for r in log.requests if r.action == "alloc"}
            for addr in self.candidates:
                r = by_addr.get(addr)
                if r is not None and not log.alive(addr) and r.upper is None:
                    r.upper, r.size = r.size, 0
        self.candidates.clear()
        self.nodes.clear()
        self.in_backward = False


class _CompiledModule(torch.nn.Module):
    """What torch.compile(module) returns while tracing: the module (its parameters, state dict
    under _orig_mod., attributes) whose calls are compiled regions."""

    def __init__(self, module: torch.nn.Module, regions: CompiledRegions) -> None:
        super().__init__()
        self._orig_mod = module
        object.__setattr__(self, "_regions", regions)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._regions.run(self._orig_mod, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)
