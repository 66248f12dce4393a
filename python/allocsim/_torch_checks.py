"""What the PyTorch in this process offers allocsim: its version, and whether it can record CUDA
allocations here. Takes the torch module as an argument: it never imports torch itself."""

from __future__ import annotations

import re
from typing import Optional, Tuple

# The oldest PyTorch whose allocator calls allocsim.torch and allocsim.pluggable make:
# _record_memory_history(enabled=..., stacks=..., max_entries=...), the out-of-memory observer
# and CUDAPluggableAllocator are all there from 2.1 on.
MINIMUM_TORCH = (2, 1)


def parse_version(text: str) -> Tuple[int, int, int]:
    """(major, minor, patch) of a PyTorch version string: '2.13.0+cpu', '2.14.0a0+git5f3e1b2',
    '2.1' (patch 0). Pre-releases count as their release, as PyTorch's own checks do."""
    m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        raise ValueError(f"not a PyTorch version: {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def require_torch(torch, caller: str) -> Tuple[int, int, int]:
    """The version of `torch`; RuntimeError where it is older than MINIMUM_TORCH."""
    version = parse_version(torch.__version__)
    if version[:2] < MINIMUM_TORCH:
        raise RuntimeError(f"{caller} needs PyTorch {MINIMUM_TORCH[0]}.{MINIMUM_TORCH[1]} or "
                           f"later; this is {torch.__version__}")
    return version


def cuda_missing(torch) -> Optional[str]:
    """Why `torch` cannot allocate CUDA memory in this process, or None where it can."""
    build = getattr(torch, "version", None)
    if getattr(build, "cuda", None) is None and getattr(build, "hip", None) is None:
        return f"PyTorch {torch.__version__} is a build without CUDA"
    if not torch.cuda.is_available():
        return f"PyTorch {torch.__version__} sees no CUDA device"
    return None
