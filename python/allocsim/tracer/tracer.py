"""Tracing a PyTorch program on the CPU as if it ran on a GPU: the requests it would make of the
CUDA caching allocator, without the GPU and without the memory (fake tensors carry shapes only).

    with Tracer(card="h100") as tracer:
        model = build().cuda()
        for _ in range(2):
            step(model)
    tracer.save("job.pickle")            # then: allocsim replay / plan / predict job.pickle
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.optim.optimizer
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import (TorchDispatchMode, _disable_current_modes,
                                          _get_current_dispatch_mode)
from torch.utils._pytree import tree_leaves

from ..compact_trace import CompactEvent, CompactTrace, compact_trace_bytes
from ..recorder import RecorderMarks
from .cards import Card, card_named
from .compiled import CompiledRegions
from .cuda_autocast import CudaAutocast
from .cuda_kernels import CUBLAS_OPS, HiddenAllocations, KernelChoice, kernel_script
from .cuda_standin import (CudaStandin, PretendStream, record_stream_method,
                           refused_process_group)
from .cudnn_rnns import CudnnRnns
from .cudnn_workspaces import CONVOLUTION_OPS, CudnnWorkspaces
from .device_values import DeviceValues
from .errors import TraceError
from .parameters import module_apply
from .patches import patched as _patched
from .pretend_cuda import (DeviceRouting, autocast_shims, fake_device_property, library_shims,
                           names_cuda)
from .requests import ADDRESS_BASE, DEFAULT_STREAM, Request, RequestLog
from .requests import storage_of as _storage
from .uncertain import Uncertainties
from .user_choices import UserChoices

aten = torch.ops.aten


def _engine_accumulation(tracer: "Tracer", args, kwargs) -> bool:
    """An add the autograd engine makes of two gradients of one input: in the backward, after a
    node ran, its new gradient (made by that node) added to an undisturbed tensor an earlier node
    made (waiting in the input buffer). An add inside a custom Function's backward (the user's
    `return g + other`) is the user's own, out of place."""
    if kwargs or len(args) != 2 or torch._C._current_graph_task_id() == -1:
        return False
    a, b = args
    if not (isinstance(a, FakeTensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and
            a.dtype == b.dtype and a.is_contiguous() and not a._is_view()):
        return False
    node = torch._C._current_autograd_node()
    s, t = _storage(a), _storage(b)
    maker = tracer.made_by.get(s._cdata) if s is not None else None
    if maker is None or maker == id(node) or t is None or tracer.made_by.get(t._cdata) != id(node):
        return False
    return not _inside_python_backward(node)


def _inside_python_backward(node: Any) -> bool:
    """Whether a custom autograd.Function's backward is running (its frame on the stack)."""
    backward = getattr(getattr(node, "_forward_cls", None), "backward", None)
    code = getattr(backward, "__code__", None)
    if code is None:
        return False
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


_PLAIN = (torch.Tensor, torch.nn.Parameter, FakeTensor)


def _where() -> str:
    """The program's line that is running (the first frame outside torch and allocsim)."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if "/torch/" not in name and "/allocsim/" not in name:
            return f"{name}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back
    return "(no frame of the program)"


def _floating_on_device(tracer: "Tracer", method):
    """`method` with the floating-point tensors it makes from nothing on the device: DDP's reducer
    makes its gradient buckets in C++ with its parameters' options, which name the CPU in a
    trace."""

    def floating_on_device(*args: Any, **kwargs: Any) -> Any:
        with tracer.routing("floating"):
            return method(*args, **kwargs)
    return floating_on_device


def _ddp_init(tracer: "Tracer", init):
    """DistributedDataParallel's constructor, which over PyTorch's fake process group (whose
    all-reduces complete with no tensor, which DDP's reducer asserts on) registers a communication
    hook doing the default one's work in place, as NCCL's all-reduce does: the bucket averaged
    over the ranks, no allocation."""

    def ddp_init(module, *args: Any, **kwargs: Any) -> None:
        init(module, *args, **kwargs)
        import torch.distributed as dist
        if dist.get_backend(module.process_group) == "fake":
            ranks = dist.get_world_size(module.process_group)

            def averaged(state, bucket):  # unannotated: DDP checks the annotations it finds
                buffer = bucket.buffer()
                buffer.div_(ranks)
                done = torch.futures.Future()
                done.set_result(buffer)
                return done
            module.register_comm_hook(None, averaged)
    return ddp_init


class _TraceFakeMode(FakeTensorMode):
    """The trace's fake mode, counting how deep it is entered: code that finds it active and
    enters it again to compute shapes only (DTensor's sharding propagation, which on a GPU runs
    in a FakeTensorMode of its own) allocates nothing on the device."""

    def __init__(self) -> None:
        super().__init__(allow_non_fake_inputs=True)
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        return super().__enter__()

    def __exit__(self, *exc):
        self.depth -= 1
        return super().__exit__(*exc)


class _Requests(TorchDispatchMode):
    """Below autograd: every op's new device storages become allocations."""

    def __init__(self, tracer: "Tracer") -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tracer = self.tracer
        if tracer.fake.depth > 1:
            return func(*args, **kwargs)  # shapes computed, nothing run
        tracer.current_op = str(func)
        if func is aten._local_scalar_dense.default:
            if isinstance(args[0], FakeTensor):
                return tracer.scalar_of(args[0])
            with _disable_current_modes():  # a host value read (a size given as a tensor)
                return func(*args, **kwargs)
        target = tracer.target
        named = kwargs.get("device")
        if named is not None and names_cuda(named):
            # CUDA named where the routing mode does not reach (the autograd engine runs
            # backward hooks, FSDP's and DDP's, without torch-function modes). A CPU named here
            # says nothing: kernels pass their inputs' device on.
            kwargs = dict(kwargs, device=torch.device("cpu"))
            if target in (None, "floating"):
                target = "device"
        inputs = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        if any(type(a) not in _PLAIN for a in inputs):
            # A tensor subclass (DTensor, FSDP's and tensor parallelism's): its own dispatch
            # runs the op on its local tensors, which come back through this mode.
            return NotImplemented
        if target == "floating" and not inputs:
            # C++ making a tensor from nothing with a device tensor's options (DDP's reducer:
            # its gradient buckets), which name the CPU in a trace; its integer ones are the
            # host's metadata, written and read there.
            dtype = kwargs.get("dtype")
            device = dtype is None or dtype.is_floating_point
        elif target in (None, "floating"):
            device = any(tracer.on_device(a) for a in inputs)
        else:
            device = target == "device"
        if device and func is aten.add.Tensor and _engine_accumulation(tracer, args, kwargs):
            # The autograd engine summing two gradients of one input: on a GPU into one of them
            # in place (InputBuffer::accumulate); a fake tensor is never summed in place.
            return aten.add_.Tensor(args[0], args[1])
        if not device and func is aten._to_copy.default and isinstance(args[0], FakeTensor):
            value = tracer.values.value_of(args[0])
            if value is not None:
                # A copy to the host of values the trace has: real, as on a GPU.
                with _disable_current_modes():
                    return func(value, *args[1:], **kwargs)
        if not device and not any(isinstance(a, FakeTensor) for a in inputs):
            # The host's work runs for real, as in the run on a GPU: its values (step counts,
            # data) are there to read.
            with _disable_current_modes():
                return func(*args, **kwargs)
        try:
            out = func(*args, **kwargs)
        except (torch._subclasses.fake_tensor.DynamicOutputShapeException,
                torch._subclasses.fake_tensor.DataDependentOutputException) as error:
            raise TraceError(f"trace: {func} needs the tensors' values (its output's size or "
                             f"value depends on the data), which a trace does not have: "
                             f"{tracer.where()}") from error
        if not device:
            return out
        log = tracer.log
        stream = tracer.stream.stream_id
        if func._schema.is_mutable:
            for a in tree_leaves((args, kwargs)):
                if isinstance(a, torch.Tensor):
                    s = _storage(a)
                    if s is not None and log.is_device(s):
                        log.resized(s, str(func))
        backward = torch._C._current_graph_task_id() != -1
        current = torch._C._current_autograd_node() if backward else None
        node = id(current) if backward else None
        first = len(log.requests)
        if not backward and tracer.made_by:
            tracer.made_by.clear()
        outputs = out if isinstance(out, (tuple, list)) else (out,)
        script = None
        if func in CONVOLUTION_OPS and tracer.choices.convolution_table_applies():
            script = tracer.cudnn.script(func, args, outputs)
        if func in CUBLAS_OPS:
            tracer.choices.check_cublas(str(func))
        if script is None:
            script = kernel_script(func, args, outputs, tracer.card.multi_processor_count,
                                   kwargs, tracer.card.threads_per_multiprocessor)
        if func in CONVOLUTION_OPS and script is None:
            unknown = tracer.uncertain.convolution(args, outputs)
        else:
            unknown = tracer.uncertain.upper_of(func, args, outputs, script is not None)
        if script is None:
            script = [("output", i, None) for i in range(len(outputs))]
        temporaries: Dict[str, Tuple[int, int]] = {}
        what = str(func)
        for step in script:
            if step[0] == "alloc":
                temporaries[step[1]] = (log.alloc(step[2], stream, what), step[2])
            elif step[0] == "free":
                addr, size = temporaries.pop(step[1])
                log.free(addr, size, stream, what)
            else:
                for leaf in tree_leaves(outputs[step[1]]):
                    if not isinstance(leaf, torch.Tensor):
                        continue
                    s = _storage(leaf)
                    if s is not None:
                        log.add_storage(s, stream, what, step[2])
                        if backward:
                            tracer.made_by[s._cdata] = node
        if unknown is not None:
            # what the kernel may allocate beside its outputs: nothing in the trace, its upper
            # bound in the upper-bound twin
            cause, upper = unknown
            tracer.uncertain.note(cause, upper, tracer.where())
            if upper:
                temporary = log.alloc(0, stream, what, upper=upper)
                log.free(temporary, 0, stream, what, upper=upper)
        staged = [(log.alloc(size, stream, what), size, what)
                  for size, what in tracer.hidden.transient(func, args)]
        for addr, size, what in reversed(staged):
            log.free(addr, size, stream, what)
        for size, what in tracer.hidden.after(func, args, kwargs, tracer.thread(), stream):
            log.alloc(size, stream, what)
        tracer.values.after(func, args, kwargs, out, log.is_device)
        tracer.compiled.op_ran(backward, current, first)
        return out


class Tracer:
    """The context that traces: see the module's docstring. `card` is the GPU to pretend (its
    compute capability chooses kernels and workspace sizes; allocsim.tracer.cards.CARDS)."""

    def __init__(self, card: str = "h100") -> None:
        self.card: Card = card_named(card)
        self.log = RequestLog()
        self.values = DeviceValues()
        self.log.on_death.append(self.values.forget)
        self.default_stream = PretendStream(DEFAULT_STREAM)
        self.stream = self.default_stream
        self._streams = 0
        self._target: List[Optional[str]] = [None]
        self.hidden = HiddenAllocations(self.card)
        self.autocast = CudaAutocast()
        self.fake = _TraceFakeMode()
        self.choices = UserChoices(self)
        self.kernels = KernelChoice(self.card, self._device_beside, self.choices)
        self.cudnn = CudnnWorkspaces(self.card.major, self.card.minor)
        self.standin = CudaStandin(self, self.card)
        self.uncertain = Uncertainties()
        self.rnns = CudnnRnns(self)
        self.compiled = CompiledRegions(self)
        self.warnings: List[str] = []
        self._warned: set = set()
        self._stack = contextlib.ExitStack()
        # In a backward: which node made each device storage (id of the node), so that the
        # engine's sums of gradients are told from a node's own.
        self.made_by: Dict[int, int] = {}
        self.pending_shims: Dict[str, List[Tuple[str, Any]]] = {}
        # The calls that reach the allocator and leave no request (empty_cache, caps, resets,
        # pools), as allocsim's recorder marks them: every request carries the marks in force.
        self.marks = RecorderMarks()
        self.marks_used = False
        self.log.meta = self.marks.metadata()
        self.start_marks = self.log.meta
        # PYTORCH_CUDA_ALLOC_CONF settings the script set before its first request, and whether
        # any came after it
        self.settings: List[str] = []
        self.active = False
        # The op being traced, for a failure's message.
        self.current_op: Optional[str] = None
        # The largest block a record_stream() call was made for.
        self.recorded_stream_bytes = 0

    # --- what the modes ask ---

    @property
    def target(self) -> Optional[str]:
        return self._target[-1]

    @contextlib.contextmanager
    def routing(self, target: Optional[str]) -> Iterator[None]:
        self._target.append(target if target is not None else self._target[-1])
        try:
            yield
        finally:
            self._target.pop()

    def on_device(self, t: Any) -> bool:
        if not isinstance(t, torch.Tensor):
            return False
        if type(t) not in _PLAIN and hasattr(t, "__tensor_flatten__"):
            # a wrapper subclass (DTensor): where its inner tensors are
            inner, _ = t.__tensor_flatten__()
            return any(self.on_device(getattr(t, name)) for name in inner)
        s = _storage(t)
        return s is not None and self.log.is_device(s)

    def _device_beside(self, t: torch.Tensor) -> torch.device:
        recording = isinstance(_get_current_dispatch_mode(), _Requests)
        return torch.device("cuda" if recording and self.on_device(t) else "cpu")

    def thread(self) -> str:
        """The thread a kernel launches from: the autograd engine runs a GPU's backward on a
        thread of its own (with cuBLAS handles of its own)."""
        return "backward" if torch._C._current_graph_task_id() != -1 else "main"

    def new_stream_id(self) -> int:
        self._streams += 1
        return self._streams

    def scalar_of(self, t: torch.Tensor) -> Any:
        value = self.values.value_of(t)
        if value is not None:
            with _disable_current_modes():
                return value.item()
        self.warn_once("item", "values read from tensors (.item(), bool(), printing) that the "
                       "trace does not have (computed from data, not filled by the program) are "
                       "0 while tracing: a program that branches on them is traced down the "
                       "branch 0 takes")
        if t.dtype == torch.bool:
            return False
        return 0 if not t.is_floating_point() else 0.0

    def warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.warnings.append(message)

    def where(self) -> str:
        return _where()

    def marked(self, change: Callable[[RecorderMarks], Any], kind: Optional[str]) -> None:
        """A call that reaches the allocator: `change` applied to the marks (and the call
        counted as `kind`, as the recorder counts it); the requests from now on carry them."""
        change(self.marks)
        if kind is not None:
            self.marks.made(kind)
        self.marks_used = True
        self.log.meta = self.marks.metadata()

    def allocator_settings_set(self, settings: str) -> None:
        """torch.cuda.memory._set_allocator_settings: before the first request it is the run's
        PYTORCH_CUDA_ALLOC_CONF; after it, the replay cannot follow it, and says so."""
        if self.log.requests:
            self.warn_once("settings", f"the allocator's settings changed during the run "
                           f"({settings!r} at {self.where()}): the trace is replayed under the "
                           "settings it starts with")
        else:
            self.settings.append(settings)

    def stream_recorded(self, tensor: torch.Tensor, stream: Any) -> None:
        """Tensor.record_stream: on a GPU the block waits for the other stream's work before it
        is reused; the trace frees it when its tensor dies (the warning counts the bytes)."""
        s = _storage(tensor)
        block = self.log.live.get(s._cdata) if s is not None else None
        self.recorded_stream_bytes = max(self.recorded_stream_bytes,
                                         block.size if block is not None else 0)

    def snapshot(self, bound: str = "lower") -> Dict[str, Any]:
        """The trace so far as a PyTorch memory snapshot (what the script's own _snapshot()
        answers, and what save() writes once the script calls the allocator): its requests, each
        carrying the recorder's marks, and the marks where the history started and now.
        `bound`: "upper" for the sizes not known at their upper bounds."""
        events = [dict(event, frames=[], user_metadata=r.meta)
                  for r, event in self._events(bound)]
        return {"segments": [], "device_traces": [events],
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": self.alloc_conf("")},
                "allocsim_recorder": {"start": self.start_marks, "end": self.log.meta,
                                      "max_entries": sys.maxsize,
                                      "freed_pools": [list(p) for p in self.marks.freed_pools]}}

    def alloc_conf(self, given: str) -> str:
        """The PYTORCH_CUDA_ALLOC_CONF of the trace: `given`, then what the script set before its
        first request (later keys win, as PyTorch's parser applies them)."""
        return ",".join(p for p in [given] + self.settings if p)

    def apply_library_shims(self) -> None:
        """Patches the libraries of `library_shims` the program has imported since."""
        for name in [n for n in self.pending_shims if n in sys.modules]:
            for attr, value in self.pending_shims.pop(name):
                self._stack.enter_context(_patched(sys.modules[name], attr, value))

    # --- the context ---

    def __enter__(self) -> "Tracer":
        release = _release_warning(torch.__version__)
        if release:
            self.warn_once("release", release)
        try:
            self._install()
        except BaseException:
            self._stack.close()  # whatever was patched before the failure is put back
            raise
        return self

    def _install(self) -> None:
        stack = self._stack
        self.pending_shims = library_shims()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.autocast.install()
            stack.callback(self.autocast.uninstall)
            self.kernels.install()
            stack.callback(self.kernels.uninstall)
        self.standin.install(stack, _patched)
        stack.enter_context(_patched(*record_stream_method(self)))
        stack.enter_context(_patched(torch.nn.Module, "_apply",
                                     module_apply({}, self.warn_once)))
        import torch.distributed as dist
        if hasattr(dist, "init_process_group"):
            stack.enter_context(_patched(dist, "init_process_group",
                                         refused_process_group(dist.init_process_group)))
        ddp = torch.nn.parallel.DistributedDataParallel
        stack.enter_context(_patched(ddp, "__init__", _ddp_init(self, ddp.__init__)))
        stack.enter_context(_patched(ddp, "_pre_forward",
                                     _floating_on_device(self, ddp._pre_forward)))
        if hasattr(torch.distributed, "Reducer"):
            stack.enter_context(_patched(torch.distributed, "Reducer",
                                         _floating_on_device(self, torch.distributed.Reducer)))
        # A device storage resized in place (FSDP frees and re-allocates its unsharded
        # parameters so) is a free and a new allocation.
        resize = torch.UntypedStorage.resize_

        def resize_storage(storage, size):
            result = resize(storage, size)
            self.log.resized(storage, "UntypedStorage.resize_")
            return result
        stack.enter_context(_patched(torch.UntypedStorage, "resize_", resize_storage))
        stack.enter_context(_patched(FakeTensor, "device", fake_device_property(self)))
        # Parameters made on the device are fake tensors: the optimizers' foreach and fused
        # paths, which CUDA takes, accept them.
        # (in place: DTensor appends itself to the same list when imported)
        supported = sys.modules["torch.optim.optimizer"]._foreach_supported_types
        if FakeTensor not in supported:
            supported.append(FakeTensor)
            stack.callback(supported.remove, FakeTensor)
        # What asks for "the accelerator" (FSDP2's default mesh, torch.accelerator) gets CUDA.
        stack.enter_context(_patched(torch._C, "_get_accelerator",
                                     lambda check=False: torch.device("cuda")))
        if hasattr(torch._C, "_accelerator_setAllocatorSettings"):
            stack.enter_context(_patched(torch._C, "_accelerator_setAllocatorSettings",
                                         self.allocator_settings_set))
        for owner, name, value in autocast_shims(self):
            stack.enter_context(_patched(owner, name, value))
        stack.enter_context(_patched(torch, "compile", self.compiled.compile))
        regions = self.compiled
        stack.enter_context(_patched(torch.nn.Module, "compile",
                                     lambda module, *a, **k: regions.module_compile(module, *a,
                                                                                    **k)))
        # A failing op's meta kernel is logged by the fake mode before it raises: the error
        # itself says it (the script's, or the trace's one line).
        fake_log = logging.getLogger("torch._subclasses.fake_tensor")
        stack.callback(fake_log.setLevel, fake_log.level)
        fake_log.setLevel(logging.CRITICAL)
        # The CPU build's own complaint at an RNN moved to "cuda" (the trace says what it
        # leaves out of cuDNN's RNNs itself)
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message="PyTorch was compiled without cuDNN")
        self.active = True
        stack.callback(setattr, self, "active", False)
        stack.enter_context(self.fake)
        stack.enter_context(_Requests(self))
        stack.enter_context(DeviceRouting(self))

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()
        if self.compiled.in_backward:
            self.compiled.backward_ended()
        missing = self.cudnn.warning(self.card.name)
        if missing:
            self.warn_once("cudnn", missing)
        if self.recorded_stream_bytes:
            self.warn_once("record_stream", "record_stream(): a block used on another stream "
                           f"(up to {self.recorded_stream_bytes} bytes each) is freed when its "
                           "tensor dies; on a GPU its reuse waits for that stream's work, which "
                           "the trace does not time")
        self.choices.finish()
        for line in self.uncertain.warnings():
            self.warn_once(line, line)

    # --- the result ---

    def requests(self, bound: str = "lower") -> List[Request]:
        """The requests of the trace (`bound` "upper": of its upper-bound twin), in order."""
        return [r for r, _ in self._sized(bound)]

    def compact_trace(self, alloc_conf: str = "", bound: str = "lower") -> CompactTrace:
        """The requests as a compact trace: each free a free_requested and its free_completed;
        `bound` "upper" for the sizes not known at their upper bounds."""
        events: List[CompactEvent] = [event for _, event in self._events(bound)]
        return CompactTrace(alloc_conf, events)

    def _events(self, bound: str) -> Iterator[Tuple[Request, CompactEvent]]:
        """The trace's events of `bound`, each with its request: an allocation, or a free as a
        free_requested and its free_completed, at the request's pretend address, one
        microsecond apart."""
        time_us = 0
        for r, size in self._sized(bound):
            addr = ADDRESS_BASE + r.addr * 512
            actions = ("alloc",) if r.action == "alloc" else ("free_requested", "free_completed")
            for action in actions:
                yield r, {"action": action, "addr": addr, "size": size, "stream": r.stream,
                          "time_us": time_us}
                time_us += 1

    def _sized(self, bound: str) -> Iterator[Tuple[Request, int]]:
        """The requests of the trace of `bound` with their sizes (a free's is its
        allocation's, which may have been found unknown since: a compiled region's internals);
        those of no bytes left out."""
        sizes: Dict[int, int] = {}
        for r in self.log.requests:
            if r.action == "alloc":
                size = sizes[r.addr] = r.size_in(bound)
            else:
                size = sizes.pop(r.addr, r.size_in(bound))
            if size:
                yield r, size

    @property
    def has_bounds(self) -> bool:
        """Whether some sizes are not known: the trace is a lower bound, save(...,
        bound="upper") its upper-bound twin (where every cause has a bound)."""
        return any(r.upper is not None for r in self.log.requests)

    def notes(self, path: str) -> List[str]:
        """What the trace at `path` could not know: the warnings, and where its upper bound is
        (or that some cause has none)."""
        notes = list(self.warnings)
        if self.has_bounds:
            notes.append(f"sizes the trace does not know are at their least here; "
                         f"{upper_bound_path(path)} has them at their most: its peaks bound "
                         "this trace's from above" + ("" if self.uncertain.bounded else
                                                      " (except for the causes with no upper "
                                                      "bound)"))
        elif not self.uncertain.bounded:
            notes.append("what the trace does not know has no upper bound: its peaks are lower "
                         "bounds")
        return notes

    def write(self, path: str, alloc_conf: str = "") -> Optional[str]:
        """save() with the notes, and the upper-bound twin beside it where the trace has one
        (its path returned; None where it has none)."""
        notes = self.notes(path)
        self.save(path, alloc_conf, notes=notes)
        if not self.has_bounds:
            return None
        upper = upper_bound_path(path)
        self.save(upper, alloc_conf, bound="upper", notes=notes)
        return upper

    def save(self, path: str, alloc_conf: str = "", bound: str = "lower",
             notes: Sequence[str] = ()) -> None:
        """Writes the trace: FILE.pickle / FILE.pickle.gz (a PyTorch memory snapshot, with
        `alloc_conf` and the settings the script set as the run's PYTORCH_CUDA_ALLOC_CONF, the
        script's calls that reach the allocator marked as allocsim's recorder marks them, and
        `notes`, what the trace could not know, which replay and plan print as warnings) or
        FILE.atrace (allocsim's compact trace, which carries neither calls nor notes:
        ValueError where the script made such calls). `bound` "upper": the sizes not known at
        their upper bounds (the upper-bound twin)."""
        alloc_conf = self.alloc_conf(alloc_conf)
        if path.endswith(".atrace"):
            if self.marks_used:
                raise ValueError(f"{path}: the script calls the allocator (empty_cache, caps, "
                                 "resets or memory pools), which only a snapshot carries: "
                                 "write FILE.pickle or FILE.pickle.gz")
            with open(path, "wb") as f:
                f.write(compact_trace_bytes(self.compact_trace(alloc_conf, bound)))
            return
        if not path.endswith((".pickle", ".pickle.gz")):
            raise ValueError(f"{path}: a trace is written as FILE.atrace, FILE.pickle or "
                             "FILE.pickle.gz")
        snapshot = self.snapshot(bound)
        snapshot["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = alloc_conf
        if notes:
            snapshot["allocsim_trace"] = {"warnings": list(notes)}
        _write_snapshot(snapshot, path)


# The releases whose kernels the rules describe: measured on 2.11, and read in the sources of each
# release to 2.14 (autocast's lists, the attention backends, the caching allocator's calls).
RELEASES = ((2, 11), (2, 14))


def _release_warning(version: str) -> Optional[str]:
    """A warning where the PyTorch running is outside RELEASES, else None."""
    from .._torch_checks import parse_version
    release = parse_version(version)[:2]
    if RELEASES[0] <= release <= RELEASES[1]:
        return None
    return (f"PyTorch {version}: the trace's kernel rules are of PyTorch "
            f"{RELEASES[0][0]}.{RELEASES[0][1]} to {RELEASES[1][0]}.{RELEASES[1][1]}; this "
            "release's kernels may allocate otherwise")


def upper_bound_path(path: str) -> str:
    """Where the upper-bound twin of the trace at `path` goes: NAME.upper.pickle.gz beside
    NAME.pickle.gz (NAME.upper.atrace, NAME.upper.pickle)."""
    for suffix in (".pickle.gz", ".pickle", ".atrace"):
        if path.endswith(suffix):
            return path[:-len(suffix)] + ".upper" + suffix
    return path + ".upper"


def _write_snapshot(snapshot: Dict[str, Any], path: str) -> None:
    """The snapshot pickled (gzip'd for .gz, with no time in its header: the same trace writes
    the same bytes)."""
    import gzip
    import pickle
    data = pickle.dumps(snapshot, protocol=4)
    with open(path, "wb") as f:
        if path.endswith(".gz"):
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as z:
                z.write(data)
        else:
            f.write(data)
