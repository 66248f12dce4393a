"""torch.cuda while tracing: the whole public API answered as the pretend card would answer it,
with no GPU and no driver (PyTorch's CPU builds have no CUDA runtime; its CUDA builds have one
that fails without a driver).

What reaches the allocator goes into the trace as allocsim's recorder writes it
(allocsim.recorder): empty_cache(), set_per_process_memory_fraction(), the stats resets,
use_mem_pool() blocks and MemPools deleted, and caching_allocator_alloc()/_delete() as requests.
Statistics answer from the requests traced so far (allocated bytes exactly, as PyTorch rounds
them; reserved bytes are the replay's, so they answer the allocated ones, with a warning). A
script's own memory history (_record_memory_history, _snapshot, _dump_snapshot) leaves the trace
alone: _snapshot() answers the trace so far and _dump_snapshot() writes it where asked. Streams
and events are ids the requests carry; nvtx ranges, RNG state and device contexts answer as on
one GPU. CUDA graphs and CUDAPluggableAllocator are refused with one line (what a trace cannot
follow). Any other public function of torch.cuda answers None with a warning naming it."""

from __future__ import annotations

import contextlib
import inspect
import sys
from types import ModuleType, SimpleNamespace
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch

from .cards import Card
from .errors import TraceError

CUDA0 = torch.device("cuda", 0)

# The modules whose functions the stand-in answers: torch.cuda re-exports most of the others'.
_MODULES = ("torch.cuda", "torch.cuda.memory", "torch.cuda.random", "torch.cuda.graphs",
            "torch.cuda.nvtx", "torch.cuda.streams")
# Public functions of those modules that need no device (pure Python over what is answered),
# left as they are.
_PURE = {"lru_cache", "classproperty", "cast", "signature", "overload", "contextmanager",
         "deprecated", "is_initialized"}


class PretendStream:
    """torch.cuda.Stream's stand-in: an id the requests made on it carry; a context manager that
    makes it current, as torch.Stream is."""

    def __init__(self, stream_id: int, standin: Optional["CudaStandin"] = None) -> None:
        self.stream_id = stream_id
        self.device = CUDA0
        self.device_index = 0
        self.device_type = "cuda"
        self.cuda_stream = stream_id
        self.priority = 0
        self._standin = standin
        self._previous: List[Any] = []

    def wait_stream(self, other: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> "PretendEvent":
        event = event or PretendEvent()
        event.record(self)
        return event

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def is_capturing(self) -> bool:
        return False

    def __enter__(self) -> "PretendStream":
        if self._standin is not None:
            self._previous.append(self._standin.tracer.stream)
            self._standin.tracer.stream = self
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._standin is not None and self._previous:
            self._standin.tracer.stream = self._previous.pop()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PretendStream) and other.stream_id == self.stream_id

    def __hash__(self) -> int:
        return hash(self.stream_id)

    def __repr__(self) -> str:
        return f"<allocsim pretend cuda stream {self.stream_id}>"


class PretendEvent:
    """torch.cuda.Event's stand-in: work is done as soon as it is asked about."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.stream: Optional[Any] = None

    def record(self, stream: Any = None) -> None:
        self.stream = stream

    def wait(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, other: Any) -> float:
        return 0.0

    def ipc_handle(self) -> bytes:
        return b""


class CudaStandin:
    """The answers, made for one trace (`tracer` supplies the request log, the streams, the
    marks and the warnings); install() patches them into torch.cuda's modules on an ExitStack
    the tracer closes."""

    def __init__(self, tracer: Any, card: Card) -> None:
        self.tracer = tracer
        self.card = card
        self.memory_fraction = 1.0
        self.metadata = ""  # the script's own _set_memory_metadata
        self._pools = 0

    # --- the statistics, from the requests traced so far ---

    def allocated(self) -> int:
        return self.tracer.log.allocated

    def peak_allocated(self) -> int:
        return self.tracer.log.peak_allocated

    def _reserved_warning(self, name: str) -> None:
        self.tracer.warn_once(
            "reserved", f"torch.cuda.{name}() answers the allocated bytes while tracing (the "
            "reserved ones are the allocator's: `allocsim replay` of the trace has them)")

    def memory_stats(self) -> Dict[str, Any]:
        self._reserved_warning("memory_stats")
        allocated, peak = self.allocated(), self.peak_allocated()
        stats: Dict[str, Any] = {"num_alloc_retries": 0, "num_ooms": 0, "num_sync_all_streams": 0,
                                 "num_device_alloc": 0, "num_device_free": 0}
        for kind in ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes"):
            for pool in ("all", "small_pool", "large_pool"):
                value = (allocated, peak) if pool == "all" else (0, 0)
                stats[f"{kind}.{pool}.current"] = value[0]
                stats[f"{kind}.{pool}.peak"] = value[1]
                stats[f"{kind}.{pool}.allocated"] = 0
                stats[f"{kind}.{pool}.freed"] = 0
        return stats

    def memory_stats_as_nested_dict(self) -> Dict[str, Any]:
        nested: Dict[str, Any] = {}
        for key, value in self.memory_stats().items():
            node = nested
            parts = key.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = value
        return nested

    def memory_summary(self, device: Any = None, abbreviated: bool = False) -> str:
        self._reserved_warning("memory_summary")
        return (f"allocsim.trace (a pretend {self.card.name}): {self.allocated()} bytes "
                f"allocated now, {self.peak_allocated()} at the peak; the reserved memory is "
                "the replay's (allocsim replay TRACE)\n")

    def _reset_peak(self, device: Any = None) -> None:
        self.tracer.marked(lambda m: m.reset_peak.__setitem__(0, m.reset_peak.get(0, 0) + 1),
                           "reset_peak")
        self.tracer.log.peak_allocated = self.tracer.log.allocated

    def _reset_accumulated(self, device: Any = None) -> None:
        self.tracer.marked(
            lambda m: m.reset_accumulated.__setitem__(0, m.reset_accumulated.get(0, 0) + 1),
            "reset_accumulated")

    def _empty_cache(self) -> None:
        self.tracer.marked(lambda m: setattr(m, "empty_cache", m.empty_cache + 1), "empty_cache")

    def _set_memory_fraction(self, fraction: float, device: Any = None) -> None:
        fraction = float(fraction)
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"invalid fraction: {fraction}. Please set within [0, 1]")
        self.memory_fraction = fraction
        self.tracer.marked(lambda m: m.memory_fraction.__setitem__(0, fraction),
                           "memory_fraction")

    # --- memory history: the script's own, answered with the trace ---

    def _record_memory_history(self, *args: Any, **kwargs: Any) -> None:
        self.tracer.warn_once("history", "the script records its own memory history: its "
                              "snapshots (_snapshot, _dump_snapshot) are the trace so far")

    def _snapshot(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        return self.tracer.snapshot()

    def _dump_snapshot(self, filename: str = "dump_snapshot.pickle") -> None:
        import pickle
        with open(filename, "wb") as f:
            pickle.dump(self.tracer.snapshot(), f)

    def _set_memory_metadata(self, metadata: str) -> None:
        self.metadata = str(metadata)

    def _set_allocator_settings(self, settings: str) -> None:
        self.tracer.allocator_settings_set(str(settings))

    # --- caching_allocator_alloc / _delete: requests of their own ---

    def _caching_allocator_alloc(self, size: int, device: Any = None, stream: Any = None) -> int:
        stream_id = stream.stream_id if isinstance(stream, PretendStream) else \
            self.tracer.stream.stream_id
        return self.tracer.log.raw_alloc(int(size), stream_id, "caching_allocator_alloc")

    def _caching_allocator_delete(self, ptr: int) -> None:
        self.tracer.log.raw_free(int(ptr), "caching_allocator_delete")

    # --- pools, streams, devices ---

    def mem_pool_class(self) -> type:
        standin = self

        class MemPool:
            """torch.cuda.MemPool's stand-in: a pool id (user pools are (0, N) in PyTorch) that
            use_mem_pool routes the requests to; its deletion empties its cache."""

            def __init__(self, allocator: Any = None, use_on_oom: bool = False,
                         *args: Any, **kwargs: Any) -> None:
                standin._pools += 1
                self.id = (0, standin._pools)
                self.allocator = allocator
                if use_on_oom:
                    standin.tracer.warn_once(
                        "use_on_oom", "MemPool(use_on_oom=True): the replay does not fall back "
                        "to the pool's cache at an OOM")

            def use_count(self) -> int:
                return 1

            def snapshot(self) -> List[Any]:
                return []

            def __del__(self) -> None:
                tracer = standin.tracer
                if getattr(tracer, "active", False):
                    tracer.marked(lambda m: m.pool_freed(self.id, 0), None)
        return MemPool

    @contextlib.contextmanager
    def use_mem_pool(self, pool: Any, device: Any = None) -> Iterator[None]:
        self.tracer.marked(lambda m: m.pool_began(0, pool.id), None)
        try:
            yield
        finally:
            self.tracer.marked(lambda m: m.pool_ended(0, pool.id), None)

    def stream_class(self) -> type:
        standin = self

        class Stream(PretendStream):
            def __new__(cls, *args: Any, **kwargs: Any) -> "Stream":
                return PretendStream.__new__(cls)

            def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
                super().__init__(standin.tracer.new_stream_id(), standin)
                self.priority = priority
        return Stream

    @contextlib.contextmanager
    def stream(self, stream: Any) -> Iterator[None]:
        if stream is None:
            yield
            return
        tracer = self.tracer
        previous = tracer.stream
        tracer.stream = stream
        try:
            yield
        finally:
            tracer.stream = previous

    def set_stream(self, stream: Any) -> None:
        if stream is not None:
            self.tracer.stream = stream

    def stream_context_class(self) -> type:
        """torch.cuda.StreamContext's stand-in (a class: libraries annotate with it)."""
        standin = self

        class StreamContext:
            def __init__(self, stream: Any) -> None:
                self.stream = stream
                self._context = standin.stream(stream)

            def __enter__(self) -> Any:
                self._context.__enter__()
                return self.stream

            def __exit__(self, *exc: Any) -> None:
                self._context.__exit__(*exc)
        return StreamContext

    def refused(self, name: str, what: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise TraceError(f"torch.cuda.{name}: {what}")
        return refuse

    def refused_class(self, name: str, what: str) -> type:
        """A class (libraries name torch.cuda's classes in annotations, `CUDAGraph | None`)
        whose instances are refused."""
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise TraceError(f"torch.cuda.{name}: {what}")
        return type(name, (), {"__new__": refuse, "__doc__": f"Refused while tracing: {what}"})

    def unmodelled(self, module: str, name: str) -> Callable[..., Any]:
        def answer(*args: Any, **kwargs: Any) -> Any:
            self.tracer.warn_once(f"unmodelled {module}.{name}",
                                  f"{module}.{name}() is not modelled by the trace: it answered "
                                  "None (what it does on a GPU is not in the trace)")
            return None
        return answer

    def rng_state(self, device: Any = None) -> torch.Tensor:
        # a CUDA generator's state: its seed and offset, 16 bytes, on the host
        return torch.zeros(16, dtype=torch.uint8)

    def answers(self) -> Dict[str, Any]:
        """Every name answered, by its name in torch.cuda's modules."""
        card, tracer = self.card, self.tracer
        properties = SimpleNamespace(
            name=card.name, major=card.major, minor=card.minor, total_memory=card.total_memory,
            multi_processor_count=card.multi_processor_count, is_integrated=False,
            is_multi_gpu_board=False, L2_cache_size=card.l2_cache_bytes,
            max_threads_per_multi_processor=card.threads_per_multiprocessor,
            warp_size=32, regs_per_multiprocessor=65536, gcnArchName="NVIDIA CUDA",
            uuid="allocsim-trace", pci_bus_id=0, pci_device_id=0, pci_domain_id=0)
        graphs = ("CUDA graphs are not traced (a capture's private pool and its replays are the "
                  "GPU's): trace the script's eager steps (without the capture), or record it on "
                  "a GPU with allocsim.torch.record_memory_history and replay that")
        allocator = ("a trace is of PyTorch's caching allocator: trace the script without "
                     "changing the allocator")
        fraction = self._set_memory_fraction
        Stream = self.stream_class()
        return {
            "is_available": lambda: True,
            "is_initialized": lambda: True,
            "init": lambda: None,
            "_lazy_init": lambda: None,
            "_is_compiled": lambda: True,
            "device_count": lambda: 1,
            "current_device": lambda: 0,
            "set_device": lambda device: None,
            "device": _OneDevice,
            "device_of": _OneDevice,
            "_exchange_device": lambda device: 0,
            "_maybe_exchange_device": lambda device: 0,
            "get_device_name": lambda device=None: card.name,
            "get_device_capability": lambda device=None: (card.major, card.minor),
            "get_device_properties": lambda device=None: properties,
            "get_arch_list": lambda: [f"sm_{card.major}{card.minor}"],
            "get_gencode_flags": lambda: f"-gencode compute=compute_{card.major}{card.minor},"
                                         f"code=sm_{card.major}{card.minor}",
            "is_bf16_supported": lambda including_emulation=True: card.major >= 8,
            "is_tf32_supported": lambda: card.major >= 8,
            "can_device_access_peer": lambda device, peer: True,
            "synchronize": lambda device=None: None,
            "ipc_collect": lambda: None,
            "get_sync_debug_mode": lambda: 0,
            "set_sync_debug_mode": lambda mode: None,
            "current_blas_handle": lambda: 0,
            "current_solver_handle": lambda: 0,
            "is_current_stream_capturing": lambda: False,
            # RNG: torch.manual_seed seeds the CUDA generators through these; the CPU's is
            # seeded already.
            "manual_seed": lambda seed: None,
            "manual_seed_all": lambda seed: None,
            "seed": lambda: None,
            "seed_all": lambda: None,
            "initial_seed": lambda: torch.initial_seed(),
            "get_rng_state": self.rng_state,
            "get_rng_state_all": lambda: [self.rng_state()],
            "set_rng_state": lambda state, device="cuda": None,
            "set_rng_state_all": lambda states: None,
            "_get_rng_state_offset": lambda device="cuda": 0,
            "_set_rng_state_offset": lambda offset, device="cuda": None,
            # streams and events
            "current_stream": lambda device=None: tracer.stream,
            "default_stream": lambda device=None: tracer.default_stream,
            "Stream": Stream,
            "ExternalStream": Stream,
            "get_stream_from_external": lambda data_ptr, device=None: Stream(),
            "Event": PretendEvent,
            "stream": self.stream,
            "StreamContext": self.stream_context_class(),
            "set_stream": self.set_stream,
            "_set_stream_by_id": lambda stream_id, device_index, device_type: None,
            # memory
            "empty_cache": self._empty_cache,
            "memory_allocated": lambda device=None: self.allocated(),
            "max_memory_allocated": lambda device=None: self.peak_allocated(),
            "memory_reserved": lambda device=None: (self._reserved_warning("memory_reserved"),
                                                    self.allocated())[1],
            "max_memory_reserved": lambda device=None: (
                self._reserved_warning("max_memory_reserved"), self.peak_allocated())[1],
            "memory_cached": lambda device=None: self.allocated(),
            "max_memory_cached": lambda device=None: self.peak_allocated(),
            "memory_stats": lambda device=None: self.memory_stats(),
            "memory_stats_as_nested_dict": lambda device=None: self.memory_stats_as_nested_dict(),
            "memory_summary": self.memory_summary,
            "memory_snapshot": lambda *a, **k: self.tracer.snapshot()["segments"],
            "list_gpu_processes": lambda device=None: "no processes are running (a trace)",
            "mem_get_info": lambda device=None: (card.total_memory - self.allocated(),
                                                 card.total_memory),
            "device_memory_used": lambda device=None: self.allocated(),
            "reset_peak_memory_stats": self._reset_peak,
            "reset_max_memory_allocated": self._reset_peak,
            "reset_max_memory_cached": self._reset_peak,
            "reset_accumulated_memory_stats": self._reset_accumulated,
            "set_per_process_memory_fraction": fraction,
            "get_per_process_memory_fraction": lambda device=None: self.memory_fraction,
            "caching_allocator_alloc": self._caching_allocator_alloc,
            "caching_allocator_delete": self._caching_allocator_delete,
            "get_allocator_backend": lambda: "native",
            "host_memory_stats": lambda: {},
            "host_memory_stats_as_nested_dict": lambda: {},
            "reset_accumulated_host_memory_stats": lambda: None,
            "reset_peak_host_memory_stats": lambda: None,
            "MemPool": self.mem_pool_class(),
            "use_mem_pool": self.use_mem_pool,
            "_record_memory_history": self._record_memory_history,
            "_snapshot": self._snapshot,
            "_dump_snapshot": self._dump_snapshot,
            "_set_memory_metadata": self._set_memory_metadata,
            "_get_memory_metadata": lambda: self.metadata,
            "_set_allocator_settings": self._set_allocator_settings,
            "change_current_allocator": self.refused("change_current_allocator", allocator),
            "CUDAPluggableAllocator": self.refused_class("CUDAPluggableAllocator", allocator),
            # CUDA graphs
            "CUDAGraph": self.refused_class("CUDAGraph", graphs),
            "graph": self.refused_class("graph", graphs),
            "make_graphed_callables": self.refused("make_graphed_callables", graphs),
            "graph_pool_handle": self.refused("graph_pool_handle", graphs),
            # nvtx: no profiler, no ranges
            "range_push": lambda msg: 0,
            "range_pop": lambda: 0,
            "range_start": lambda msg: 0,
            "range_end": lambda range_id: None,
            "mark": lambda msg: None,
            "range": _nvtx_range,
            # what the driver reports of the card at work
            "utilization": lambda device=None: 0,
            "memory_usage": lambda device=None: 0,
            "temperature": lambda device=None: 0,
            "power_draw": lambda device=None: 0,
            "clock_rate": lambda device=None: 0,
        }

    def install(self, stack: contextlib.ExitStack, patched: Callable[..., Any]) -> None:
        """Patches the answers into torch.cuda's modules, and every other public function of
        them with one that warns (a function of a later release included)."""
        answers = self.answers()
        for module_name in _MODULES:
            module = sys.modules.get(module_name)
            if module is None:
                continue
            for name, value in list(vars(module).items()):
                if name in answers:
                    stack.enter_context(patched(module, name, answers[name]))
                elif (not name.startswith("_") and inspect.isfunction(value) and
                      name not in _PURE and _defined_in_cuda(value)):
                    stack.enter_context(patched(module, name,
                                                self.unmodelled(module_name, name)))
        # torch.cuda.memory's use_mem_pool and the recorder call these by their names there
        for name in answers:
            if name in ("MemPool", "use_mem_pool") and hasattr(torch.cuda, name):
                stack.enter_context(patched(torch.cuda, name, answers[name]))
        self._install_accelerator(stack, patched, answers)

    def _install_accelerator(self, stack: contextlib.ExitStack, patched: Callable[..., Any],
                             answers: Dict[str, Any]) -> None:
        """torch.accelerator (what device-agnostic code, the optimizers' graph-capture check
        among it, asks), answered as torch.cuda is."""
        accelerator: Optional[ModuleType] = getattr(torch, "accelerator", None)
        if accelerator is None:
            return
        for submodule in (accelerator, getattr(accelerator, "memory", None)):
            if submodule is None:
                continue
            own = {
                "is_available": lambda: True,
                "device_count": lambda: 1,
                "current_accelerator": lambda check_available=False: torch.device("cuda"),
                "current_device_index": lambda: 0,
                "current_device_idx": lambda: 0,
                "set_device_index": lambda device: None,
                "set_device_idx": lambda device: None,
                "device_index": _device_index_context,
                "current_stream": answers["current_stream"],
                "set_stream": answers["set_stream"],
                "synchronize": answers["synchronize"],
                "get_memory_info": answers["mem_get_info"],
            }
            for name, value in list(vars(submodule).items()):
                if name.startswith("_") or not callable(value):
                    continue
                if name in own:
                    stack.enter_context(patched(submodule, name, own[name]))
                elif name in answers and inspect.isfunction(value):
                    stack.enter_context(patched(submodule, name, answers[name]))


class _OneDevice:
    """torch.cuda.device / device_of: the one pretend device is current whatever is asked."""

    def __init__(self, device: Any = None) -> None:
        self.idx = 0

    def __enter__(self) -> "_OneDevice":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


def _defined_in_cuda(value: Any) -> bool:
    module = getattr(value, "__module__", "") or ""
    return module.startswith("torch.cuda")


@contextlib.contextmanager
def _nvtx_range(msg: str, *args: Any, **kwargs: Any) -> Iterator[None]:
    yield


@contextlib.contextmanager
def _device_index_context(device: Any, /) -> Iterator[None]:
    yield


def refused_process_group(init: Callable[..., Any]) -> Callable[..., Any]:
    """torch.distributed.init_process_group for a trace: NCCL (named, or the default on CUDA)
    refused with what to do instead; any other backend (the fake one, gloo) as it is."""

    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        name = str(backend if backend is not None else kwargs.get("backend") or "").lower()
        if backend is None and "backend" in kwargs:
            backend = kwargs.pop("backend")
        if name in ("", "nccl", "cuda:nccl", "cpu:gloo,cuda:nccl") or "nccl" in name:
            raise TraceError(
                f"torch.distributed.init_process_group({backend!r}): NCCL needs GPUs; trace one "
                "rank on PyTorch's fake process group instead: "
                "dist.init_process_group('fake', store=FakeStore(), rank=RANK, "
                "world_size=WORLD_SIZE) with FakeStore from "
                "torch.testing._internal.distributed.fake_pg (docs/trace.md)")
        return init(backend, *args, **kwargs)
    return init_process_group


def record_stream_method(tracer: Any) -> Tuple[Any, str, Any]:
    """Tensor.record_stream for a trace: PyTorch's argument parser takes no pretend stream, so
    the method itself is replaced (a warning says what the trace leaves out)."""

    def record_stream(tensor: torch.Tensor, stream: Any) -> None:
        tracer.stream_recorded(tensor, stream)
    return (torch.Tensor, "record_stream", record_stream)
