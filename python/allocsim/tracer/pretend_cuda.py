"""A CUDA device that is not there: tensors "on cuda" kept on the CPU (as fake tensors, with no
memory behind them) but told apart from host tensors, so that moving a tensor to the device or back
makes the copy it makes on a GPU; torch.autocast("cuda") and libraries' own tests for a fake tensor
answered as on a GPU. (torch.cuda's own calls: cuda_standin.)"""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Tuple

import torch
from torch.overrides import TorchFunctionMode

_DEVICE_GETTER = torch.Tensor.device
_IS_CUDA_GETTER = torch.Tensor.is_cuda
_IS_CPU_GETTER = torch.Tensor.is_cpu
CUDA0 = torch.device("cuda", 0)
# The recurrent layers' functions, which CUDA runs through cuDNN
_RNNS = tuple(getattr(torch._VF, name) for name in ("lstm", "gru", "rnn_tanh", "rnn_relu"))


def names_cuda(device: Any) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.split(":")[0] == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


def _invert_permutation(permutation):
    """torch.nn.utils.rnn.invert_permutation into zeros rather than an empty tensor (the same
    allocation): the scatter then makes values the trace knows, as the GPU has them, which
    pad_packed_sequence reads back on the host."""
    if permutation is None:
        return None
    output = torch.zeros_like(permutation, memory_format=torch.legacy_contiguous_format)
    output.scatter_(0, permutation,
                    torch.arange(0, permutation.numel(), device=permutation.device))
    return output


def library_shims() -> Dict[str, List[Tuple[str, Any]]]:
    """Libraries' code answered as on a GPU (by module, patched once the program has imported
    it): transformers' own test for a fake tensor (it takes one for graph capture, torch.export,
    and then builds explicit attention masks and skips its fast paths, which a run does not);
    the inverse permutation of packed sequences, whose values a GPU has."""
    return {"transformers.utils.import_utils": [("is_fake_tensor", lambda x: False)],
            "torch.nn.utils.rnn": [("invert_permutation", _invert_permutation)]}


class DeviceRouting(TorchFunctionMode):
    """Rewrites device="cuda" to the CPU and says, for the call it wraps, where its new tensors
    live: `target` is "device", "host" or None (the inputs decide); the tracer also sets
    "floating" (tensors made from nothing go to the device where they are floating-point)."""

    def __init__(self, tracer: Any) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        tracer = self.tracer
        if tracer.pending_shims:
            tracer.apply_library_shims()
        owner = getattr(func, "__self__", None)
        if owner is _DEVICE_GETTER:
            return CUDA0 if tracer.on_device(args[0]) else func(*args, **kwargs)
        if owner is _IS_CUDA_GETTER:
            return tracer.on_device(args[0])
        if owner is _IS_CPU_GETTER:
            return not tracer.on_device(args[0]) and func(*args, **kwargs)
        if func is torch.Tensor.to:
            return self._to(args[0], args[1:], kwargs)
        if func is torch.Tensor.cuda:
            return self._move(args[0], True, None, kwargs.get("non_blocking", False))
        if func is torch.Tensor.cpu:
            return self._move(args[0], False, None, False)
        if func is torch.Tensor.get_device:
            return 0 if tracer.on_device(args[0]) else -1
        if func in _RNNS and args and tracer.on_device(args[0]):
            tracer.rnns.before(func, args)
        if func is torch.Tensor.pin_memory:
            # pinned host memory is the host's (PyTorch's host allocator), not the device's
            return args[0]
        if func is torch.Tensor.is_pinned:
            return False
        kwargs.pop("pin_memory", None)
        target = None
        if "device" in kwargs and kwargs["device"] is not None:
            if names_cuda(kwargs["device"]):
                kwargs["device"] = "cpu"
                target = "device"
            else:
                target = "host"
        with tracer.routing(target):
            return func(*args, **kwargs)

    def _to(self, t: torch.Tensor, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
        other = args[0] if args and isinstance(args[0], torch.Tensor) else kwargs.get("other")
        if other is not None:
            device = CUDA0 if self.tracer.on_device(other) else torch.device("cpu")
            dtype = other.dtype
        else:
            device = kwargs.get("device")
            dtype = kwargs.get("dtype")
            rest = list(args)
            if rest and not isinstance(rest[0], torch.dtype):
                device = rest.pop(0)
            if rest and isinstance(rest[0], torch.dtype):
                dtype = rest.pop(0)
        non_blocking = kwargs.get("non_blocking", False)
        copy = kwargs.get("copy", False)
        memory_format = kwargs.get("memory_format", torch.preserve_format)
        if device is None:
            with self.tracer.routing(None):
                return t.to(dtype=dtype, non_blocking=non_blocking, copy=copy,
                            memory_format=memory_format)
        return self._move(t, names_cuda(device), dtype, non_blocking, copy, memory_format)

    def _move(self, t, to_device: bool, dtype, non_blocking, copy=False,
              memory_format=torch.preserve_format):
        here = self.tracer.on_device(t)
        needs_copy = copy or here != to_device
        with self.tracer.routing("device" if to_device else "host"):
            return t.to("cpu", dtype=dtype, non_blocking=non_blocking, copy=needs_copy,
                        memory_format=memory_format)


def autocast_shims(tracer: Any) -> List[Tuple[Any, str, Any]]:
    """(owner, attribute, replacement): torch.autocast("cuda") becomes the CPU's autocast (with
    CUDA's lists installed, cuda_autocast), float16 by default as on CUDA."""
    autocast = torch.amp.autocast_mode.autocast
    original_init, original_enter, original_exit = (autocast.__init__, autocast.__enter__,
                                                    autocast.__exit__)

    def init(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self._allocsim_cuda = device_type == "cuda"
        if self._allocsim_cuda:
            device_type = "cpu"
            dtype = dtype or torch.float16
        original_init(self, device_type, dtype=dtype, enabled=enabled,
                      cache_enabled=cache_enabled)

    def enter(self):
        tracer.autocast.nesting += 1
        return original_enter(self)

    def exit(self, *exc):
        result = original_exit(self, *exc)
        tracer.autocast.nesting -= 1
        if tracer.autocast.nesting == 0:
            tracer.autocast.region_ended()
        return result

    def device_arg(function):
        def call(device_type="cuda", *args):
            return function("cpu" if device_type == "cuda" else device_type, *args)
        return call

    return [(autocast, "__init__", init), (autocast, "__enter__", enter),
            (autocast, "__exit__", exit),
            (torch, "is_autocast_enabled", device_arg(torch.is_autocast_enabled)),
            (torch, "get_autocast_dtype", device_arg(torch.get_autocast_dtype)),
            (torch, "get_autocast_gpu_dtype", lambda: torch.get_autocast_dtype("cpu"))]


def fake_device_property(tracer: Any) -> property:
    """FakeTensor.device for a trace: "cuda:0" for a tensor on the pretend device when the program
    asks (so that it takes its CUDA paths and makes its new tensors there), the CPU when
    PyTorch's own internals ask (fake tensors, decompositions: they compute on the CPU)."""
    from torch._subclasses.fake_tensor import FakeTensor
    original = FakeTensor.device

    def device(self):
        d = original.fget(self)
        if d.type != "cpu":
            return d
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "torch" or caller.startswith("torch._"):
            return d
        return CUDA0 if tracer.on_device(self) else d
    return property(device)
