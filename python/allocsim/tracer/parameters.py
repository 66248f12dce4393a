"""Module.to()/.cuda()/.half() for a trace: each parameter moved to the device keeps its identity,
as PyTorch's own move does (it swaps the tensor's data in place). An optimizer made before the
move holds the same Parameter objects the model then trains, with their attributes, hooks and
subclass; the data behind them is a fake tensor on the pretend device."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Dict, List, Tuple

import torch


def _hooks(t: torch.Tensor) -> Tuple[List[Any], List[Any]]:
    backward = list((getattr(t, "_backward_hooks", None) or {}).values())
    post = list((getattr(t, "_post_accumulate_grad_hooks", None) or {}).values())
    return backward, post


def adopt(param: torch.Tensor, replacement: torch.Tensor) -> bool:
    """`param` takes `replacement`'s tensor (its impl, its class: a fake tensor's) and keeps its
    identity, its own attributes and its hooks; False where PyTorch cannot swap them (another
    tensor shares `param`'s impl), `param` untouched."""
    if param._use_count() > 2 or replacement._use_count() > 1:
        return False
    backward, post = _hooks(param)
    try:
        torch._C._swap_tensor_impl(param, replacement)
    except RuntimeError:
        return False
    own = dict(param.__dict__)
    own.pop("_backward_hooks", None)
    own.pop("_post_accumulate_grad_hooks", None)
    theirs = dict(replacement.__dict__)
    param.__class__, replacement.__class__ = replacement.__class__, param.__class__
    # The fake tensor's own fields, then the parameter's (its mark _is_param, the user's)
    param.__dict__ = {**theirs, **own}
    replacement.__dict__ = {}
    # The hooks are registered with the tensor they were made on: made again on this one (the
    # dicts emptied first, so that registering installs them with the autograd engine anew).
    param._backward_hooks = None
    param._post_accumulate_grad_hooks = None
    for hook in backward:
        param.register_hook(hook)
    for hook in post:
        param.register_post_accumulate_grad_hook(hook)
    return True


def module_apply(moved: Dict[int, Tuple[Any, Any]], warn: Callable[[str, str], None]):
    """nn.Module._apply (what .to(), .cuda(), .half() call) for a trace, where a parameter moved
    to the device becomes a fake tensor in place (`adopt`). A parameter two modules share (tied
    weights) is converted once: `moved` maps its id to weak references to it and to what it
    became. Where the swap cannot be made, a new Parameter takes the old one's place, and a
    warning says that an optimizer made before the move does not see it."""

    def apply(self: torch.nn.Module, fn: Callable[[torch.Tensor], torch.Tensor],
              recurse: bool = True) -> torch.nn.Module:
        if recurse:
            for module in self.children():
                module._apply(fn)
        for key, param in self._parameters.items():
            if param is None:
                continue
            hit = moved.get(id(param))
            if hit is not None and hit[0]() is param and hit[1]() is not None:
                self._parameters[key] = hit[1]()
                continue
            with torch.no_grad():
                applied = fn(param)
            if applied is param:
                continue
            grad = param.grad
            replacement = torch.nn.Parameter(applied, requires_grad=param.requires_grad)
            subclass = type(param)
            if adopt(param, replacement):
                target = param
                if subclass is not torch.nn.Parameter:
                    warn(f"parameter class {subclass.__name__}",
                         f"parameters of class {subclass.__name__} keep their identity on the "
                         "device but are fake tensors there: isinstance(p, "
                         f"{subclass.__name__}) no longer holds")
            else:
                warn("parameter identity",
                     f"a parameter of {type(self).__name__} ({tuple(param.shape)}) could not "
                     "keep its identity when moved: an optimizer made before the move does not "
                     "see it (make the optimizer after model.cuda())")
                target = replacement
            if grad is not None:
                with torch.no_grad():
                    target.grad = fn(grad)
            if target is not param:
                moved[id(param)] = (weakref.ref(param), weakref.ref(target))
            self._parameters[key] = target
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self
    return apply
