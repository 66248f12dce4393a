"""The request stream a traced program makes of the CUDA caching allocator: one allocation per
device storage when it is born, one free when it dies, in the order the program makes them."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

def storage_of(t):
    """A tensor's untyped storage (its key: the StorageImpl's address), or None for a tensor
    without one."""
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None


# The stream requests go to when the program names none: PyTorch's snapshots write the default
# stream as 0.
DEFAULT_STREAM = 0
# PyTorch rounds every allocation up to 512 bytes (kMinBlockSize): its allocated bytes count so.
_BLOCK_ROUND = 512
# Where the trace's blocks are said to be: identifiers only (the replay places the segments).
ADDRESS_BASE = 0x7F0000000000


def _rounded(size: int) -> int:
    return (size + _BLOCK_ROUND - 1) // _BLOCK_ROUND * _BLOCK_ROUND


@dataclass
class Request:
    action: str  # "alloc" or "free"
    addr: int  # an identifier shared by an allocation and its free
    size: int
    stream: int
    what: str  # the op or rule that made it, for messages and tests
    meta: str = ""  # the recorder's marks in force (allocsim.recorder's user_metadata)
    # where the size is not known: the most it may be (`size` is the least); None: known
    upper: Optional[int] = None

    def size_in(self, bound: str) -> int:
        """The request's bytes in the trace of that bound: "lower" or "upper"."""
        return self.upper if bound == "upper" and self.upper is not None else self.size


@dataclass
class _Block:
    addr: int  # 0 for a storage of no bytes: on the device, but no allocation
    size: int  # the allocation's bytes
    stream: int
    what: str
    nbytes: int  # the storage's bytes (the allocation's, unless a kernel allocates otherwise)


@dataclass
class RequestLog:
    """Requests in order, and the device storages alive (by their StorageImpl's address)."""
    requests: List[Request] = field(default_factory=list)
    live: Dict[int, _Block] = field(default_factory=dict)
    next_addr: int = 1
    # Called with a device storage's key when it dies (what is kept about it goes with it).
    on_death: List[Callable[[int], None]] = field(default_factory=list)
    # The recorder's marks in force: every request from now on carries them.
    meta: str = ""
    # Bytes allocated now and at the peak (since the last reset), rounded as PyTorch counts them.
    allocated: int = 0
    peak_allocated: int = 0
    # Allocations made outside any tensor (caching_allocator_alloc): their sizes by address.
    raw: Dict[int, _Block] = field(default_factory=dict)
    # The storage each allocation of a storage was made for, by the allocation's address.
    storage_keys: Dict[int, int] = field(default_factory=dict)

    def key_of(self, addr: int) -> Optional[int]:
        """The storage an allocation was made for (None: a kernel's own)."""
        return self.storage_keys.get(addr)

    def alive(self, addr: int) -> bool:
        """Whether the allocation at `addr` is not freed yet."""
        key = self.storage_keys.get(addr)
        block = self.live.get(key) if key is not None else None
        return block is not None and block.addr == addr

    def alloc(self, size: int, stream: int, what: str, upper: Optional[int] = None) -> int:
        addr = self.next_addr
        self.next_addr += 1
        self.requests.append(Request("alloc", addr, size, stream, what, self.meta, upper))
        self.allocated += _rounded(size)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return addr

    def free(self, addr: int, size: int, stream: int, what: str,
             upper: Optional[int] = None) -> None:
        self.requests.append(Request("free", addr, size, stream, what, self.meta, upper))
        self.allocated -= _rounded(size)

    def raw_alloc(self, size: int, stream: int, what: str) -> int:
        """An allocation no tensor holds; its address (a pretend pointer) for raw_free."""
        addr = self.alloc(size, stream, what)
        pointer = ADDRESS_BASE + addr * 512
        self.raw[pointer] = _Block(addr, size, stream, what, size)
        return pointer

    def raw_free(self, pointer: int, what: str) -> None:
        block = self.raw.pop(pointer, None)
        if block is None:
            raise ValueError(f"{what}: {pointer:#x} is no allocation of caching_allocator_alloc")
        self.free(block.addr, block.size, block.stream, what)

    def is_device(self, storage) -> bool:
        return storage._cdata in self.live

    def add_storage(self, storage, stream: int, what: str, size: Optional[int] = None) -> None:
        """`storage` (a torch.UntypedStorage) is on the device: an allocation of its bytes unless
        it has one (storages of no bytes take none, as in PyTorch); its free is logged when the
        storage dies. `size` where the kernel allocates other than the storage's bytes."""
        key = storage._cdata
        if key in self.live:
            return
        nbytes = storage.nbytes()
        size = nbytes if size is None else size
        addr = self.alloc(size, stream, what) if size else 0
        if addr:
            self.storage_keys[addr] = key
        self.live[key] = _Block(addr, size, stream, what, nbytes)
        weakref.finalize(storage, self._storage_died, key)

    def resized(self, storage, what: str) -> None:
        """A device storage whose bytes changed in place (resize_, set_): the allocator gave it a
        new block and freed the old one."""
        block = self.live.get(storage._cdata)
        size = storage.nbytes()
        if block is None or size == block.nbytes:
            return
        addr = self.alloc(size, block.stream, what) if size else 0
        if addr:
            self.storage_keys[addr] = storage._cdata
        if block.addr:
            self.free(block.addr, block.size, block.stream, block.what)
        block.addr, block.size, block.what, block.nbytes = addr, size, what, size

    def _storage_died(self, key: int) -> None:
        block = self.live.pop(key, None)
        for forget in self.on_death:
            forget(key)
        if block is not None and block.addr:
            self.free(block.addr, block.size, block.stream, block.what)
