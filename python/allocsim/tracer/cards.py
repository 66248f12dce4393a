"""The GPUs a traced program may pretend to run on: what PyTorch reads of the card to choose its
kernels and the sizes of the buffers they allocate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class Card:
    name: str  # as torch.cuda.get_device_name() writes it
    major: int  # compute capability
    minor: int
    total_memory: int  # bytes
    multi_processor_count: int

    @property
    def cublas_workspace(self) -> int:
        """cuBLAS's workspace per handle and stream (PyTorch's default: 32 MiB on sm90, else
        4096 KiB x 2 + 16 KiB x 8), unless CUBLAS_WORKSPACE_CONFIG says otherwise."""
        return 32 * 2**20 if (self.major, self.minor) == (9, 0) else 4096 * 1024 * 2 + 16 * 1024 * 8


CARDS: Dict[str, Card] = {
    "h100": Card("NVIDIA H100 80GB HBM3", 9, 0, 85_045_526_528, 132),
    "h200": Card("NVIDIA H200", 9, 0, 150_109_880_320, 132),
    "a100": Card("NVIDIA A100-SXM4-80GB", 8, 0, 85_097_693_184, 108),
    "a100-40gb": Card("NVIDIA A100-SXM4-40GB", 8, 0, 42_505_273_344, 108),
    "l4": Card("NVIDIA L4", 8, 9, 23_580_639_232, 58),
    "rtx4090": Card("NVIDIA GeForce RTX 4090", 8, 9, 25_282_281_472, 128),
    "rtx3090": Card("NVIDIA GeForce RTX 3090", 8, 6, 25_438_126_080, 82),
    "a10g": Card("NVIDIA A10G", 8, 6, 23_836_557_312, 80),
}


def card_named(name: str) -> Card:
    try:
        return CARDS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown card {name!r}: one of {', '.join(sorted(CARDS))}") from None
