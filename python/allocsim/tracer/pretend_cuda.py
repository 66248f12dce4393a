"""A CUDA device that is not there: torch.cuda's calls answered as a card would answer them, and
tensors "on cuda" kept on the CPU (as fake tensors, with no memory behind them) but told apart from
host tensors, so that moving a tensor to the device or back makes the copy it makes on a GPU."""

from __future__ import annotations

import contextlib
import sys
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

from .cards import Card

_DEVICE_GETTER = torch.Tensor.device
_IS_CUDA_GETTER = torch.Tensor.is_cuda
_IS_CPU_GETTER = torch.Tensor.is_cpu
CUDA0 = torch.device("cuda", 0)


def names_cuda(device: Any) -> bool:
    if isinstance(device, torch.device):
        return device.type == "cuda"
    if isinstance(device, str):
        return device.split(":")[0] == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


class PretendStream:
    """torch.cuda.Stream's stand-in: an id the requests made on it carry."""

    def __init__(self, stream_id: int) -> None:
        self.stream_id = stream_id
        self.device = CUDA0
        self.cuda_stream = stream_id

    def wait_stream(self, other: "PretendStream") -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> "PretendEvent":
        return event or PretendEvent()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PretendStream) and other.stream_id == self.stream_id

    def __hash__(self) -> int:
        return hash(self.stream_id)


class PretendEvent:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, stream: Any = None) -> None:
        pass

    def wait(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, other: Any) -> float:
        return 0.0


def library_shims() -> Dict[str, List[Tuple[str, Any]]]:
    """Libraries' own tests for a fake tensor, answered as on a GPU (by module, patched once the
    program has imported it): transformers takes a fake tensor for graph capture (torch.export)
    and then builds explicit attention masks and skips its fast paths, which a run does not."""
    return {"transformers.utils.import_utils": [("is_fake_tensor", lambda x: False)]}


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
        if func in (torch.Tensor.pin_memory, torch.Tensor.record_stream):
            if func is torch.Tensor.record_stream:
                tracer.warn_once("record_stream", "record_stream() is traced as a no-op: the "
                                 "block is freed when its tensor dies, not when the other "
                                 "stream's work is done")
            return args[0] if func is torch.Tensor.pin_memory else None
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


def cuda_module_shims(tracer: Any, card: Card) -> Dict[str, Callable[..., Any]]:
    """torch.cuda's calls, answered for the pretend card (patched in while tracing)."""
    properties = SimpleNamespace(name=card.name, major=card.major, minor=card.minor,
                                 total_memory=card.total_memory,
                                 multi_processor_count=card.multi_processor_count,
                                 is_integrated=False, is_multi_gpu_board=False,
                                 L2_cache_size=50 * 2**20, uuid="allocsim-trace")

    def stream_context(stream: Optional[PretendStream]):
        @contextlib.contextmanager
        def use():
            if stream is None:
                yield
                return
            previous = tracer.stream
            tracer.stream = stream
            try:
                yield
            finally:
                tracer.stream = previous
        return use()

    class Stream(PretendStream):
        def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
            super().__init__(tracer.new_stream_id())

    def memory_call(name: str, value: Any = 0):
        def call(*args: Any, **kwargs: Any) -> Any:
            tracer.warn_once(name, f"torch.cuda.{name}() answers {value!r} while tracing: the "
                             "replay of the trace has the allocator's figures")
            return value
        return call

    return {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "init": lambda: None,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "get_device_name": lambda device=None: card.name,
        "get_device_capability": lambda device=None: (card.major, card.minor),
        "get_device_properties": lambda device=None: properties,
        "is_bf16_supported": lambda including_emulation=True: card.major >= 8,
        "synchronize": lambda device=None: None,
        # (PyTorch's CUDA builds ask the driver, which a machine without a GPU lacks)
        "is_current_stream_capturing": lambda: False,
        # torch.manual_seed seeds the CUDA generators through these: the CPU's is seeded already.
        "manual_seed": lambda seed: None,
        "manual_seed_all": lambda seed: None,
        "seed": lambda: None,
        "seed_all": lambda: None,
        "current_stream": lambda device=None: tracer.stream,
        "default_stream": lambda device=None: tracer.default_stream,
        "Stream": Stream,
        "Event": PretendEvent,
        "stream": stream_context,
        "set_stream": lambda stream: setattr(tracer, "stream", stream),
        "empty_cache": memory_call("empty_cache", None),
        "memory_allocated": memory_call("memory_allocated"),
        "max_memory_allocated": memory_call("max_memory_allocated"),
        "memory_reserved": memory_call("memory_reserved"),
        "max_memory_reserved": memory_call("max_memory_reserved"),
        "reset_peak_memory_stats": memory_call("reset_peak_memory_stats", None),
        "mem_get_info": memory_call("mem_get_info", (card.total_memory, card.total_memory)),
        "set_per_process_memory_fraction": memory_call("set_per_process_memory_fraction", None),
    }


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


def module_apply(moved: Dict[int, Tuple[Any, Any]]):
    """nn.Module._apply (what .to(), .cuda(), .half() call) for a trace, where a parameter moved
    to the device becomes a fake tensor: each converted parameter is a new Parameter in its place
    (PyTorch's swap of a fake parameter fails, and a real one cannot take a fake one's data). A
    parameter two modules share (tied weights) is converted once: `moved` maps the old
    parameter's id to weak references to it and to its replacement (which lives only as long as
    the program holds it: FSDP frees a whole parameter once it has sharded it)."""
    import weakref

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
            replacement = torch.nn.Parameter(applied, requires_grad=param.requires_grad)
            if param.grad is not None:
                with torch.no_grad():
                    replacement.grad = fn(param.grad)
            moved[id(param)] = (weakref.ref(param), weakref.ref(replacement))
            self._parameters[key] = replacement
        for key, buf in self._buffers.items():
            if buf is not None:
                self._buffers[key] = fn(buf)
        return self
    return apply


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
