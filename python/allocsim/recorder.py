"""A job's allocator history, recorded so that allocsim replays it exactly: a drop-in for
torch.cuda.memory._record_memory_history that also marks what PyTorch's trace leaves out.

    import allocsim.torch
    allocsim.torch.record_memory_history(max_entries=1_000_000)
    ... train ...
    allocsim.torch.dump_snapshot("job.pickle")          # then: allocsim replay job.pickle

A PyTorch trace records every allocation, free and segment operation, but not the calls that change
what the allocator does next: torch.cuda.empty_cache() (its releases read the same as a malloc's
own retry, and one that frees nothing leaves no entry), set_per_process_memory_fraction (a cap
changed mid-run), reset_peak_memory_stats / reset_accumulated_memory_stats, which private pool a
CUDA graph capture or a torch.cuda.use_mem_pool block allocates from, when a torch.cuda.MemPool
is deleted (its destructor empties that pool's cache), the options a MemPool is made with
(use_on_oom, no_split), and the allocator settings set at run time
(torch._C._accelerator_setAllocatorSettings, torch.cuda.memory._set_allocator_settings). Nor
what was in force when recording started: the recorder notes the cap
(get_per_process_memory_fraction: a cap set at start-up, the usual order) and the settings then.
While recording, the recorder wraps those
calls and keeps their counts in the trace entries' user_metadata
(torch.cuda.memory._set_memory_metadata; the format: sim/trace/recorder_marks.hpp), so the replay
makes each call where the run made it. A call shows in the first entry recorded after it; the
snapshot of snapshot() and dump_snapshot() also carries the counts where the history started and at
its end ("allocsim_recorder": {"start", "end", "max_entries", "freed_pools", "settings",
"start_settings", "pool_options", "device_memory"}), so that calls before
the first entry and after the last count too (torch.cuda.memory._snapshot() leaves those out).
Calls through names bound before the first record_memory_history() (`from torch.cuda import
empty_cache`) are not seen; the metadata is the recorder's while it records.
"""

from __future__ import annotations

import pickle
import sys
import threading
from typing import Dict, List, Optional, Tuple

import torch

from ._torch_checks import require_torch

# The calls wrapped, where PyTorch exports them: torch.cuda re-exports torch.cuda.memory's.
_MODULES = ("torch.cuda", "torch.cuda.memory")


# The calls' kinds as the marks' "recent" field writes them, one letter each, and after the letter
# of a call of one device the device's index where it is not 0: with the count of all calls
# ("calls"), the order of up to RECENT calls made between two entries is known, device by device.
_KIND_LETTERS = {"empty_cache": "e", "memory_fraction": "f", "reset_peak": "p",
                 "reset_accumulated": "a", "pool_freed": "d", "settings": "s"}

# Where PyTorch's allocator settings are set at run time: torch.cuda.memory._set_allocator_settings
# calls the first (2.13 on) or the second (before) by its name in torch._C.
_SETTINGS_ENTRIES = ("_accelerator_setAllocatorSettings",
                     "_cuda_cudaCachingAllocator_set_allocator_settings")
RECENT = 16


class RecorderMarks:
    """The counts the recorder keeps, and the metadata string that carries them."""

    def __init__(self) -> None:
        # Reentrant: a MemPool the garbage collector deletes while the recorder holds the lock
        # marks itself from inside.
        self.lock = threading.RLock()
        self.recording = False
        self.empty_cache = 0
        self.memory_fraction: Dict[int, float] = {}
        self.reset_peak: Dict[int, int] = {}
        self.reset_accumulated: Dict[int, int] = {}
        # empty_cache() calls made while a capture or a use_mem_pool block routed a device's
        # requests to a private pool (PyTorch then releases only the private pools' cache there),
        # by device
        self.empty_cache_in_pool: Dict[int, int] = {}
        self.capture_pool: Optional[Tuple[int, int]] = None
        # The use_mem_pool blocks open, in the order they began: (device, pool id), and whether
        # each began inside the capture.
        self.mem_pools: List[Tuple[int, Tuple[int, int]]] = []
        self.in_capture: List[bool] = []
        # MemPools deleted, in order: their ids and, where known, the device each was made on
        self.freed_pools: List[Tuple[int, ...]] = []
        self.start_pools_freed = 0
        # MemPools made with options that change the allocator (use_on_oom, no_split), in the
        # order made since the recorder was installed: id, device, use_on_oom, no_split
        self.pool_options: List[Tuple[int, int, int, bool, bool]] = []
        # Each device's memory as cudaMemGetInfo reports its total (what a memory fraction is
        # a fraction of), by device: read where recording starts and at each snapshot
        self.device_memory: Dict[int, int] = {}
        # The allocator settings strings set, in order, and how many were set when the history
        # started; the allocator_settings in force then.
        self.settings: List[str] = []
        self.start_settings_count = 0
        self.start_settings: Optional[dict] = None
        self.in_settings_call = threading.local()
        self.last = ""  # the call made last: orders the calls made between two entries
        self.calls = 0  # every call counted, of any kind
        # the kinds of the last RECENT calls, oldest first: a letter each, and the device
        self.recent: List[str] = []
        self.start = ""  # the metadata when the history started
        self.max_entries = sys.maxsize

    def metadata(self) -> str:
        fields = ["allocsim_recorder=1", f"empty_cache={self.empty_cache}"]
        if self.freed_pools:
            fields.append(f"pool_freed={len(self.freed_pools)}")
        if self.settings:
            fields.append(f"settings={len(self.settings)}")
        for d in sorted(set(self.memory_fraction) | set(self.reset_peak) |
                        set(self.reset_accumulated) | set(self.empty_cache_in_pool)):
            if d in self.memory_fraction:
                fields.append(f"memory_fraction.{d}={self.memory_fraction[d]!r}")
            if self.reset_peak.get(d):
                fields.append(f"reset_peak.{d}={self.reset_peak[d]}")
            if self.reset_accumulated.get(d):
                fields.append(f"reset_accumulated.{d}={self.reset_accumulated[d]}")
            if self.empty_cache_in_pool.get(d):
                fields.append(f"empty_cache_in_pool.{d}={self.empty_cache_in_pool[d]}")
        if self.last:
            fields.append(f"last={self.last}")
        if self.calls:
            fields.append(f"calls={self.calls};recent={''.join(self.recent)}")
        # The pools that serve requests, the capture's and the innermost block's, in the order they
        # began: PyTorch routes by the one begun last (its allocator searches captures_underway
        # from the end).
        routes = []
        if self.capture_pool is not None:
            routes.append(f"cuda_graph_pool={self.capture_pool[0]},{self.capture_pool[1]}")
        if self.mem_pools:
            device, pool = self.mem_pools[-1]
            routes.insert(len(routes) if self.in_capture[-1] else 0,
                          f"mem_pool={pool[0]},{pool[1]}@{device}")
        return ";".join(fields + routes)

    def pool_began(self, device: int, pool: Tuple[int, int]) -> None:
        """A use_mem_pool block began: the thread's requests on `device` go to `pool`."""
        self.mem_pools.append((int(device), (int(pool[0]), int(pool[1]))))
        self.in_capture.append(self.capture_pool is not None)

    def pool_ended(self, device: int, pool: Tuple[int, int]) -> None:
        """A use_mem_pool block ended (the innermost of that pool on that device)."""
        key = (int(device), (int(pool[0]), int(pool[1])))
        if key in self.mem_pools:
            i = len(self.mem_pools) - 1 - self.mem_pools[::-1].index(key)
            del self.mem_pools[i], self.in_capture[i]

    def pool_freed(self, pool: Tuple[int, int], device: Optional[int]) -> None:
        """A MemPool deleted (made on `device`; None: not known)."""
        self.freed_pools.append((int(pool[0]), int(pool[1])) +
                                ((int(device),) if device is not None else ()))
        self.made("pool_freed", device)

    def made(self, kind: str, device: Optional[int] = None) -> None:
        """A call of `kind` (of `device`, for a call of one device) counted: the last one made,
        and the newest of the recent ones."""
        self.last = kind
        self.calls += 1
        self.recent = (self.recent + [_KIND_LETTERS[kind] + (str(device) if device else "")])
        del self.recent[:-RECENT]

    def publish(self) -> None:
        """The counts into every trace entry recorded from now on (while recording)."""
        if self.recording:
            torch.cuda.memory._set_memory_metadata(self.metadata())


_marks = RecorderMarks()
_originals: Dict[str, object] = {}


def _device_index(device) -> int:
    if device is None:
        return torch.cuda.current_device()
    return torch.cuda._utils._get_device_index(device)


def _empty_cache() -> None:
    with _marks.lock:
        # Counted before the call: the releases it records carry the new count.
        _marks.empty_cache += 1
        in_pool = {d for d, _ in _marks.mem_pools}
        if _marks.capture_pool is not None:  # a capture is its current device's
            in_pool.add(torch.cuda.current_device())
        for d in in_pool:
            _marks.empty_cache_in_pool[d] = _marks.empty_cache_in_pool.get(d, 0) + 1
        _marks.made("empty_cache")
        _marks.publish()
        _originals["empty_cache"]()


def _set_per_process_memory_fraction(fraction, device=None) -> None:
    with _marks.lock:
        _originals["set_per_process_memory_fraction"](fraction, device)
        d = _device_index(device)
        _marks.memory_fraction[d] = float(fraction)
        _marks.made("memory_fraction", d)
        _marks.publish()


def _count_reset(counts: Dict[int, int], kind: str, device) -> None:
    """A stats reset of `device`, counted before it is made (under the lock)."""
    d = _device_index(device)
    counts[d] = counts.get(d, 0) + 1
    _marks.made(kind, d)
    _marks.publish()


def _reset_peak_memory_stats(device=None) -> None:
    with _marks.lock:
        _count_reset(_marks.reset_peak, "reset_peak", device)
        _originals["reset_peak_memory_stats"](device)


def _reset_accumulated_memory_stats(device=None) -> None:
    with _marks.lock:
        _count_reset(_marks.reset_accumulated, "reset_accumulated", device)
        _originals["reset_accumulated_memory_stats"](device)


def _begin_allocate_current_thread_to_pool(device, pool) -> None:
    """use_mem_pool's start: the thread's requests go to `pool` from here."""
    _originals["begin_mem_pool"](device, pool)
    with _marks.lock:
        _marks.pool_began(device, pool)
        _marks.publish()


def _end_allocate_to_pool(device, pool) -> None:
    """use_mem_pool's end (its pool's use is released right after)."""
    with _marks.lock:
        _marks.pool_ended(device, pool)
        _marks.publish()
    _originals["end_mem_pool"](device, pool)


def _mem_pool_deleted(pool) -> None:
    """Runs as a torch.cuda.MemPool is deleted, before its destructor releases the pool's use
    and empties that pool's cache: the releases it records carry the new count."""
    original = _originals.get("mem_pool_del")
    with _marks.lock:
        if _marks.recording:
            try:
                # A MemPool belongs to the device current when it was made: its destructor
                # releases it there (the other devices' caches are left alone). One made before
                # the recorder was installed names no device.
                _marks.pool_freed(pool.id, getattr(pool, "_allocsim_device", None))
                _marks.publish()
            except Exception:  # a MemPool half made: nothing to mark
                pass
    if original is not None:
        original(pool)


# torch.cuda.MemPool's constructor's arguments, in order (no_split from 2.10 or so on).
_MEM_POOL_ARGS = ("allocator", "use_on_oom", "no_split")


def _mem_pool_made(pool, *args, **kwargs) -> None:
    """torch.cuda.MemPool's constructor, which notes the device it is made on and the options
    that change what the allocator does with the pool: use_on_oom (a request about to run out
    of memory outside any pool takes a free block of it) and no_split (its blocks are never
    split)."""
    _originals["mem_pool_init"](pool, *args, **kwargs)
    try:
        device = torch.cuda.current_device()
        pool._allocsim_device = device
    except Exception:  # an object without attributes of its own: its deletion asks then
        return
    given = dict(zip(_MEM_POOL_ARGS, args))
    given.update(kwargs)
    use_on_oom, no_split = bool(given.get("use_on_oom")), bool(given.get("no_split"))
    if use_on_oom or no_split:
        with _marks.lock:
            a, b = pool.id
            _marks.pool_options.append((int(a), int(b), int(device), use_on_oom, no_split))


def _capture_begin(graph, pool=None, *args, **kwargs):
    # A capture's own pool gets its id only when it begins (CUDAGraph.pool() answers after): a
    # handle made first names it while the capture is underway. Same pool, same behaviour.
    if pool is None:
        pool = torch.cuda.graph_pool_handle()
    result = _originals["capture_begin"](graph, pool, *args, **kwargs)
    with _marks.lock:
        _marks.capture_pool = (int(pool[0]), int(pool[1]))
        _marks.publish()
    return result


def _capture_end(graph, *args, **kwargs):
    with _marks.lock:
        _marks.capture_pool = None
        _marks.publish()
    return _originals["capture_end"](graph, *args, **kwargs)


def _settings_wrapper(name):
    """The entry point `name` (of _originals) that sets allocator settings, wrapped: the string
    counted once it is taken (one PyTorch refuses changes nothing), once however many of the
    entry points it went through."""

    def set_allocator_settings(env, *args, **kwargs):
        original = _originals[name]
        flag = _marks.in_settings_call
        if getattr(flag, "on", False):
            return original(env, *args, **kwargs)
        flag.on = True
        try:
            result = original(env, *args, **kwargs)
        finally:
            flag.on = False
        with _marks.lock:
            _marks.settings.append(str(env))
            _marks.made("settings")
            _marks.publish()
        return result

    return set_allocator_settings


_WRAPPERS = {"empty_cache": _empty_cache,
             "set_per_process_memory_fraction": _set_per_process_memory_fraction,
             "reset_peak_memory_stats": _reset_peak_memory_stats,
             "reset_accumulated_memory_stats": _reset_accumulated_memory_stats}


def _install() -> None:
    """Wraps the calls, once per process."""
    if _originals:
        return
    for name, wrapper in _WRAPPERS.items():
        _originals[name] = getattr(torch.cuda.memory, name)
        for module in _MODULES:
            if getattr(sys.modules[module], name, None) is _originals[name]:
                setattr(sys.modules[module], name, wrapper)
    memory = sys.modules["torch.cuda.memory"]
    if hasattr(memory, "_cuda_beginAllocateCurrentThreadToPool"):
        # use_mem_pool calls these by their names in torch.cuda.memory.
        _originals["begin_mem_pool"] = memory._cuda_beginAllocateCurrentThreadToPool
        _originals["end_mem_pool"] = memory._cuda_endAllocateToPool
        memory._cuda_beginAllocateCurrentThreadToPool = _begin_allocate_current_thread_to_pool
        memory._cuda_endAllocateToPool = _end_allocate_to_pool
    mem_pool = getattr(memory, "MemPool", None)
    if mem_pool is not None:
        _originals["mem_pool_del"] = getattr(mem_pool, "__del__", None)
        mem_pool.__del__ = _mem_pool_deleted
        _originals["mem_pool_init"] = mem_pool.__init__
        mem_pool.__init__ = _mem_pool_made
    for name in _SETTINGS_ENTRIES:
        if hasattr(torch._C, name):
            _originals[name] = getattr(torch._C, name)
            setattr(torch._C, name, _settings_wrapper(name))
    python_entry = getattr(memory, "_set_allocator_settings", None)
    if python_entry is not None:  # the outer one, should it hold a C name bound at its import
        _originals["_set_allocator_settings"] = python_entry
        wrapped = _settings_wrapper("_set_allocator_settings")
        for module in _MODULES:
            if getattr(sys.modules[module], "_set_allocator_settings", None) is python_entry:
                setattr(sys.modules[module], "_set_allocator_settings", wrapped)
    graph = torch.cuda.CUDAGraph
    _originals["capture_begin"] = graph.capture_begin
    _originals["capture_end"] = graph.capture_end
    graph.capture_begin = _capture_begin
    graph.capture_end = _capture_end


def _note_starting_caps() -> None:
    """The caps set before recording started (set_per_process_memory_fraction at start-up, the
    usual order), read from the allocator: the replay starts from them. Asked of the current
    device and those that hold memory already (asking another would make its context)."""
    get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    if get is None:
        return
    devices = {torch.cuda.current_device()}
    devices.update(d for d in range(torch.cuda.device_count())
                   if torch.cuda.memory_reserved(d) > 0)
    for d in sorted(devices):
        if d in _marks.memory_fraction:
            continue  # set through the recorder: its own value, as given
        fraction = float(get(d))
        # 1.0 is also what an allocator without a cap answers: no cap to replay.
        if fraction != 1.0:
            _marks.memory_fraction[d] = fraction


def _note_device_memory() -> None:
    """The total memory of the current device and of those holding memory (asking another would
    make its context): a cap set as a fraction is a fraction of it, and the replay's device is
    that large."""
    devices = {torch.cuda.current_device()}
    devices.update(d for d in range(torch.cuda.device_count())
                   if torch.cuda.memory_reserved(d) > 0)
    for d in sorted(devices - set(_marks.device_memory)):
        try:
            _marks.device_memory[d] = int(torch.cuda.mem_get_info(d)[1])
        except (RuntimeError, AssertionError):  # no such device here: its size stays unknown
            pass


def _settings_in_force() -> Optional[dict]:
    """The allocator settings in force now, as a snapshot's allocator_settings writes them (the
    replay starts from them; settings set later are replayed where they were set)."""
    try:
        return dict(torch.cuda.memory._snapshot().get("allocator_settings") or {}) or None
    except Exception:  # a PyTorch whose snapshot has none: the snapshot's final ones are used
        return None


def record_memory_history(enabled: Optional[str] = "all", context: Optional[str] = "all",
                          stacks: str = "all", max_entries: int = sys.maxsize,
                          **kwargs) -> None:
    """torch.cuda.memory._record_memory_history with the same arguments, marking every call the
    replay needs to know of (see the module's text). enabled=None stops recording and the
    marking. RuntimeError where PyTorch is older than 2.1; where this PyTorch cannot attach
    metadata to trace entries (no torch.cuda.memory._set_memory_metadata), it records unmarked
    and says so in a warning."""
    require_torch(torch, "allocsim.torch.record_memory_history")
    torch.cuda.memory._record_memory_history(enabled, context=context, stacks=stacks,
                                             max_entries=max_entries, **kwargs)
    with _marks.lock:
        if enabled is None:
            if _marks.recording:
                torch.cuda.memory._set_memory_metadata("")
            _marks.recording = False
            return
        if not hasattr(torch.cuda.memory, "_set_memory_metadata"):
            import warnings

            warnings.warn(f"allocsim.torch.record_memory_history: PyTorch {torch.__version__} "
                          "cannot attach metadata to trace entries: recording unmarked",
                          RuntimeWarning, stacklevel=2)
            return
        _install()
        _note_starting_caps()
        _note_device_memory()
        _marks.start_settings = _settings_in_force()
        _marks.recording = True
        _marks.start = _marks.metadata()
        _marks.start_pools_freed = len(_marks.freed_pools)
        _marks.start_settings_count = len(_marks.settings)
        _marks.max_entries = max_entries
        _marks.publish()


def recorder_metadata() -> str:
    """The metadata the recorder attaches to trace entries now ("" while it does not record)."""
    with _marks.lock:
        return _marks.metadata() if _marks.recording else ""


def snapshot() -> dict:
    """torch.cuda.memory._snapshot(), with the recorder's counts where its history started and
    now, and the history's bound, where it records."""
    snap = torch.cuda.memory._snapshot()
    with _marks.lock:
        if _marks.recording:
            snap["allocsim_recorder"] = {
                "start": _marks.start, "end": _marks.metadata(), "max_entries": _marks.max_entries,
                # the MemPools deleted since the history started, in order ("pool_freed"
                # counts): each pool's id and the device it was made on
                "freed_pools": [list(p) for p in _marks.freed_pools[_marks.start_pools_freed:]],
                # the settings strings set since the history started, in order ("settings"
                # counts), and the settings in force where it started
                "settings": list(_marks.settings[_marks.start_settings_count:]),
                # the MemPools made with use_on_oom or no_split, before the history or in it:
                # [id0, id1, device, use_on_oom, no_split] each
                "pool_options": [list(p) for p in _marks.pool_options]}
            _note_device_memory()
            # [device, bytes] each: the device's total memory (cudaMemGetInfo)
            snap["allocsim_recorder"]["device_memory"] = [
                [d, b] for d, b in sorted(_marks.device_memory.items())]
            if _marks.start_settings is not None:
                snap["allocsim_recorder"]["start_settings"] = _marks.start_settings
    return snap


def dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """torch.cuda.memory._dump_snapshot(filename), with the recorder's counts at its end."""
    with open(filename, "wb") as f:
        pickle.dump(snapshot(), f)
