"""The GPUs a traced program may pretend to run on: what PyTorch reads of the card to choose its
kernels and the sizes of the buffers they allocate."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class Card:
    name: str  # as torch.cuda.get_device_name() writes it
    major: int  # compute capability
    minor: int
    total_memory: int  # bytes: the H100's and H200's as their recordings report it; the others'
    # nominal capacity (what PyTorch reports on one is a few hundred MiB less)
    multi_processor_count: int
    l2_cache_bytes: int = 50 * 2**20  # what get_device_properties() reports
    threads_per_multiprocessor: int = 2048

    @property
    def cublas_workspace(self) -> int:
        """cuBLAS's workspace per handle and stream: CUBLAS_WORKSPACE_CONFIG's (":SIZE_KiB:COUNT"
        pairs, summed, as PyTorch parses it), else PyTorch's default: 32 MiB on sm90, else
        4096 KiB x 2 + 16 KiB x 8."""
        config = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "")
        parts = [p for p in config.split(":") if p]
        if parts and len(parts) % 2 == 0 and all(p.isdigit() for p in parts):
            return sum(int(parts[i]) * 1024 * int(parts[i + 1]) for i in range(0, len(parts), 2))
        return 32 * 2**20 if (self.major, self.minor) == (9, 0) else 4096 * 1024 * 2 + 16 * 1024 * 8

    @property
    def prefers_cudnn_attention(self) -> bool:
        """Whether PyTorch tries cuDNN's attention first in its default order on this card (as
        recorded on an H100 with PyTorch 2.11: every float16 and bfloat16 call of the default
        order ran cuDNN's, any head size to 256, masks, dropout and grouped-query heads among
        them); TORCH_CUDNN_SDPA_PREFERRED=0 turns it off."""
        if os.environ.get("TORCH_CUDNN_SDPA_PREFERRED", "").strip().lower() in ("0", "false"):
            return False
        return (self.major, self.minor) == (9, 0)


CARDS: Dict[str, Card] = {
    "h100": Card("NVIDIA H100 80GB HBM3", 9, 0, 85_017_493_504, 132),
    "h200": Card("NVIDIA H200", 9, 0, 150_109_880_320, 132),
    "a100": Card("NVIDIA A100-SXM4-80GB", 8, 0, 80 * 2**30, 108, 40 * 2**20),
    "a100-40gb": Card("NVIDIA A100-SXM4-40GB", 8, 0, 40 * 2**30, 108, 40 * 2**20),
    "l4": Card("NVIDIA L4", 8, 9, 24 * 2**30, 58, 48 * 2**20, 1536),
    "rtx4090": Card("NVIDIA GeForce RTX 4090", 8, 9, 24 * 2**30, 128, 72 * 2**20, 1536),
    "rtx3090": Card("NVIDIA GeForce RTX 3090", 8, 6, 24 * 2**30, 82, 6 * 2**20, 1536),
    "a10g": Card("NVIDIA A10G", 8, 6, 24 * 2**30, 80, 6 * 2**20, 1536),
}


def card_named(name: str) -> Card:
    try:
        return CARDS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown card {name!r}: one of {', '.join(sorted(CARDS))}") from None
