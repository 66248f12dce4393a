"""allocsim's compact traces (.atrace): what liballocsim_torch.so saves (allocsim.pluggable)
and `allocsim convert` writes. The format is described in sim/trace/compact_trace.hpp.

    trace = allocsim.compact_trace.read_compact_trace("job.atrace")
    trace.alloc_conf, len(trace.events)

Standard library only.
"""

from __future__ import annotations

from typing import List, NamedTuple, Tuple, TypedDict

ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "other")
DEVICE_OPS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap")
MAGIC = b"ATRACE1\n"


class _CompactEventAlways(TypedDict):
    action: str  # one of ACTIONS
    addr: int
    size: int
    stream: int
    time_us: int


class CompactEvent(_CompactEventAlways, total=False):
    device_free: int  # an oom's only: the device's free memory then


class CompactTrace(NamedTuple):
    alloc_conf: str  # the PYTORCH_CUDA_ALLOC_CONF the run had
    events: List[CompactEvent]


class TraceFormatError(ValueError):
    """The file is not a whole compact trace; the message names the byte offset."""


def _varint(data: bytes, pos: int, path: str) -> Tuple[int, int]:
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


def _unzigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def read_compact_trace(path: str) -> CompactTrace:
    """The trace in `path`: its PYTORCH_CUDA_ALLOC_CONF and events. TraceFormatError, naming the
    byte offset, where the file is not a whole compact trace."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(MAGIC):
        raise TraceFormatError(f"{path}: byte offset 0: expected the magic ATRACE1")
    pos = len(MAGIC)
    n, pos = _varint(data, pos, path)
    conf = data[pos:pos + n].decode()
    pos += n
    count, pos = _varint(data, pos, path)
    events: List[CompactEvent] = []
    addr, time_us = 0, 0
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
        event: CompactEvent = {"action": ACTIONS[action], "addr": addr, "size": size, "stream": stream,
                 "time_us": time_us}
        if ACTIONS[action] == "oom":
            event["device_free"], pos = _varint(data, pos, path)
        events.append(event)
    return CompactTrace(conf, events)


def device_ops(events: List[CompactEvent]) -> List[Tuple[str, int]]:
    """The (action, size) sequence of segment operations, as allocsim replay --json lists them."""
    return [(e["action"], e["size"]) for e in events if e["action"] in DEVICE_OPS]


def _put_varint(out: bytearray, value: int) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def compact_trace_bytes(trace: CompactTrace) -> bytes:
    """`trace` in the compact format (events without an oom's device_free)."""
    out = bytearray(MAGIC)
    conf = trace.alloc_conf.encode()
    _put_varint(out, len(conf))
    out += conf
    _put_varint(out, len(trace.events))
    addr, time_us = 0, 0
    for e in trace.events:
        out.append(ACTIONS.index(e["action"]))
        _put_varint(out, _zigzag(e["addr"] - addr))
        _put_varint(out, e["size"])
        _put_varint(out, e["stream"])
        _put_varint(out, _zigzag(e["time_us"] - time_us))
        if e["action"] == "oom":
            _put_varint(out, e.get("device_free", 0))
        addr, time_us = e["addr"], e["time_us"]
    return bytes(out)
