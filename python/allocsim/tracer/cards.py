"""The GPUs a traced program may pretend to run on: what PyTorch reads of the card to choose its
kernels and the sizes of the buffers they allocate."""

from __future__ import annotations

import os
import re
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
        pairs, summed, as PyTorch's regular expression finds them), else PyTorch's default: 32 MiB
        on compute capability majors 9 to 12 (Hopper and Blackwell: PyTorch 2.14's
        parseChosenWorkspaceSize; earlier releases name fewer majors, 9 among them), else
        4096 KiB x 2 + 16 KiB x 8."""
        pairs = re.findall(r":([0-9]+):([0-9]+)", os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""))
        if pairs:
            return sum(int(size) * 1024 * int(count) for size, count in pairs)
        return 32 * 2**20 if 9 <= self.major <= 12 else 4096 * 1024 * 2 + 16 * 1024 * 8

    @staticmethod
    def cublaslt_workspace() -> int:
        """cuBLASLt's workspace per handle and stream: CUBLASLT_WORKSPACE_SIZE KiB (a value
        PyTorch cannot read as an integer leaves its default), else 1024 KiB."""
        text = os.environ.get("CUBLASLT_WORKSPACE_SIZE", "").strip()
        if re.fullmatch(r"[+-]?[0-9]+", text) and 0 <= int(text) < 2**31:
            return int(text) * 1024
        return 1024 * 1024

    @property
    def flash_training_head_limits(self) -> bool:
        """Whether flash attention refuses training with head sizes over 192 (to 224, or over
        224 with dropout) on this card: sm86 to sm89 (PyTorch's
        check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89)."""
        return self.major == 8 and 6 <= self.minor <= 9

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
