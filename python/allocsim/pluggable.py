"""Run a PyTorch job on allocsim's allocator (liballocsim_torch.so, built with the CUDA backend,
through torch.cuda.memory.CUDAPluggableAllocator); allocsim.compact_trace reads what it saves.

    import allocsim.pluggable
    lib = allocsim.pluggable.install()    # before the first CUDA tensor
    ... train ...
    lib.save_trace("job.atrace")          # then: allocsim replay job.atrace
    print(lib.stats()["memory_stats"]["reserved_bytes.all.peak"])

Standard library only, plus torch where install() runs.
"""

import ctypes
import json
import os


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
