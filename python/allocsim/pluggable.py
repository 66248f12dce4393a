"""Run a PyTorch job on allocsim's allocator (liballocsim_torch.so, built with the CUDA backend,
through torch.cuda.memory.CUDAPluggableAllocator), and read allocsim's compact traces.

    import allocsim.pluggable
    lib = allocsim.pluggable.install()    # before the first CUDA tensor
    ... train ...
    lib.save_trace("job.atrace")          # then: allocsim replay job.atrace
    print(lib.stats()["memory_stats"]["reserved_bytes.all.peak"])

    conf, events = allocsim.pluggable.read_compact_trace("job.atrace")

Standard library only, plus torch where install() runs.
"""

import ctypes
import json
import os

ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "other")
DEVICE_OPS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")
MAGIC = b"ATRACE1\n"


class Allocsim:
    """The loaded liballocsim_torch.so: the calls PyTorch's pluggable interface does not make."""

    def __init__(self, path):
        # The same path gives the same handle as the one PyTorch opened: one allocator.
        self._lib = ctypes.CDLL(path)
        self._lib.allocsim_save_trace.argtypes = [ctypes.c_char_p]
        self._lib.allocsim_save_trace.restype = ctypes.c_int
        self._lib.allocsim_stats_json.restype = ctypes.c_char_p

    def save_trace(self, path):
        if self._lib.allocsim_save_trace(str(path).encode()) != 0:
            raise OSError(f"{path}: allocsim could not write the trace")

    def stats(self):
        return json.loads(self._lib.allocsim_stats_json().decode())

    def empty_cache(self):
        """torch.cuda.empty_cache() does not reach a pluggable allocator."""
        self._lib.allocsim_empty_cache()


def library() -> str:
    """The liballocsim_torch.so installed with this package ($ALLOCSIM_TORCH_LIBRARY first)."""
    path = os.environ.get("ALLOCSIM_TORCH_LIBRARY") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "lib", "liballocsim_torch.so")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no liballocsim_torch.so (it is built where the CUDA "
                                "Toolkit is; set ALLOCSIM_TORCH_LIBRARY to one built elsewhere)")
    return path


def install(path=None):
    """Makes allocsim's allocator PyTorch's CUDA allocator; call before any CUDA allocation.
    path: the liballocsim_torch.so to load (by default library()). Returns the loaded Allocsim.
    RuntimeError, with nothing changed, where PyTorch is older than 2.1 or has no CUDA here."""
    import torch

    from ._torch_checks import cuda_missing, require_torch

    require_torch(torch, "allocsim.pluggable.install")
    reason = cuda_missing(torch)
    if reason is not None:
        raise RuntimeError(f"allocsim.pluggable.install: {reason}")
    path = path or library()

    allocator = torch.cuda.memory.CUDAPluggableAllocator(str(path), "allocsim_malloc",
                                                         "allocsim_free")
    torch.cuda.memory.change_current_allocator(allocator)
    return Allocsim(str(path))


class TraceFormatError(ValueError):
    pass


def _varint(data, pos, path):
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise TraceFormatError(f"{path}: byte offset {pos}: the trace ends early")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 64:
            raise TraceFormatError(f"{path}: byte offset {pos}: a number longer than 64 bits")


def _unzigzag(v):
    return (v >> 1) ^ -(v & 1)


def read_compact_trace(path):
    """Returns (PYTORCH_CUDA_ALLOC_CONF, events); each event a dict with action, addr, size,
    stream, time_us and, for oom, device_free. The format is described in sim/trace/compact_trace.hpp."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        raise TraceFormatError(f"{path}: byte offset 0: expected the magic ATRACE1")
    pos = len(MAGIC)
    n, pos = _varint(data, pos, path)
    conf = data[pos:pos + n].decode()
    pos += n
    count, pos = _varint(data, pos, path)
    events, addr, time_us = [], 0, 0
    for _ in range(count):
        if pos >= len(data):
            raise TraceFormatError(f"{path}: byte offset {pos}: the trace ends early")
        action = data[pos]
        if action >= len(ACTIONS):
            raise TraceFormatError(f"{path}: byte offset {pos}: unknown action {action}")
        pos += 1
        delta, pos = _varint(data, pos, path)
        size, pos = _varint(data, pos, path)
        stream, pos = _varint(data, pos, path)
        dt, pos = _varint(data, pos, path)
        addr = (addr + _unzigzag(delta)) & (2**64 - 1)
        time_us += _unzigzag(dt)
        event = {"action": ACTIONS[action], "addr": addr, "size": size, "stream": stream,
                 "time_us": time_us}
        if ACTIONS[action] == "oom":
            event["device_free"], pos = _varint(data, pos, path)
        events.append(event)
    return conf, events


def device_ops(events):
    """The (action, size) sequence of segment operations, as allocsim replay --json lists them."""
    return [(e["action"], e["size"]) for e in events if e["action"] in DEVICE_OPS]
