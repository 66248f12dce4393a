"""What CUDA's kernels allocate that the ops' outputs do not show, and the kernels CUDA chooses
where the CPU would choose others: cuBLAS's and cuBLASLt's workspaces (one each per thread and
stream, made at the first matrix product there and kept), the attention kernels SDPA picks on a
GPU (flash or memory-efficient, with the logsumexp rows they keep for the backward), and their
random-number state, which stays on the host when no graph is being captured."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

from .cards import Card
from .cuda_reductions import reduction_staging

aten = torch.ops.aten

# The products cuBLAS computes: the first on a thread and stream sets up its handle's workspace.
_CUBLAS = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
           aten.addbmm.default, aten.mv.default, aten.addmv.default, aten.dot.default,
           aten.vdot.default, aten._addmm_activation.default, aten.addr.default}
CUBLASLT_WORKSPACE = 1024 * 1024  # CUBLASLT_WORKSPACE_SIZE's default, 1024 KiB


def _uses_cublaslt(func, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """addmm with a bias vector goes through cuBLASLt's fused epilogue (PyTorch's
    addmm_out_cuda_impl: a 1-D contiguous bias as wide as the output, beta 1, both matrices
    wider than one, float types)."""
    if func is aten._addmm_activation.default:
        return True
    if func is not aten.addmm.default:
        return False
    bias, m1, m2 = args[:3]
    beta = kwargs.get("beta", args[3] if len(args) > 3 else 1)
    return (bias.dim() == 1 and bias.is_contiguous() and m1.dim() == 2 and m2.dim() == 2 and
            bias.shape[0] == m2.shape[1] and beta == 1 and m2.shape[0] > 1 and m2.shape[1] > 1
            and bias.dtype == m1.dtype and m1.dtype in (torch.float32, torch.float16,
                                                      torch.bfloat16, torch.float64))


class HiddenAllocations:
    """The allocations a kernel makes beside its outputs, by the rules above."""

    def __init__(self, card: Card) -> None:
        self.card = card
        self.cublas: Dict[Tuple[str, int], bool] = {}
        self.cublaslt: Dict[Tuple[str, int], bool] = {}

    def transient(self, func, args) -> List[Tuple[int, str]]:
        """The allocations made after `func`'s outputs and freed before it returns (in the
        reverse order): (size, what)."""
        return [(size, "reduction staging") for size in
                reduction_staging(func, args, self.card.multi_processor_count)]

    def after(self, func, args, kwargs, thread: str, stream: int) -> List[Tuple[int, str]]:
        """The persistent allocations made after `func`'s outputs: (size, what)."""
        made: List[Tuple[int, str]] = []
        if func in _CUBLAS:
            key = (thread, stream)
            if key not in self.cublas:
                self.cublas[key] = True
                made.append((self.card.cublas_workspace, "cuBLAS workspace"))
            if key not in self.cublaslt and _uses_cublaslt(func, args, kwargs):
                self.cublaslt[key] = True
                made.append((CUBLASLT_WORKSPACE, "cuBLASLt workspace"))
        return made


# Outputs of the attention kernels that are not device allocations on a GPU: the random-number
# seed and offset, made on the host unless a CUDA graph is being captured.
HOST_OUTPUTS = {
    aten._scaled_dot_product_flash_attention.default: (6, 7),
    aten._scaled_dot_product_efficient_attention.default: (2, 3),
}


# Outputs a CUDA kernel allocates in another order than it returns them: native_dropout makes its
# mask before its output.
OUTPUT_ORDER = {aten.native_dropout.default: (1, 0)}


def output_bytes(func, index: int, t: torch.Tensor) -> Optional[int]:
    """An output's bytes where the CUDA kernel allocates other than the meta kernel's shape:
    memory-efficient attention's logsumexp has its rows padded to 32."""
    if func is aten._scaled_dot_product_efficient_attention.default and index == 1:
        if t.dim() == 3 and t.shape[2] > 0:
            rows = (t.shape[2] + 31) // 32 * 32
            return t.shape[0] * t.shape[1] * rows * t.element_size()
    return None


def _flash_ok(q, k, v, attn_mask, card: Card) -> bool:
    return (attn_mask is None and q.dtype in (torch.float16, torch.bfloat16) and
            q.dtype == k.dtype == v.dtype and card.major >= 8 and q.shape[-1] <= 256 and
            q.shape[-1] % 8 == 0 and q.dim() == 4)


def _efficient_ok(q, k, v) -> bool:
    return (q.dtype in (torch.float32, torch.float16, torch.bfloat16) and
            q.dtype == k.dtype == v.dtype and q.dim() == 4 and q.shape[-1] % 4 == 0)


class KernelChoice:
    """The composite ops whose CUDA path differs from the CPU's, run as CUDA runs them:
    scaled_dot_product_attention by the flash kernel where its constraints allow, else the
    memory-efficient kernel, else the math path (PyTorch's sdp_utils priority order); dropout by
    the fused kernel; softmax and log_softmax of half to float without converting first."""

    def __init__(self, card: Card) -> None:
        self.card = card
        self._lib = None

    def install(self) -> None:
        import warnings
        self._lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._lib.impl("scaled_dot_product_attention", self._sdpa,
                           "CompositeImplicitAutograd")
            self._lib.impl("dropout", self._dropout, "CompositeImplicitAutograd")
            self._lib.impl("softmax.int", self._softmax, "CompositeImplicitAutograd")
            self._lib.impl("log_softmax.int", self._log_softmax, "CompositeImplicitAutograd")

    @staticmethod
    def _softmax(input, dim, dtype=None):
        """softmax of half to float on CUDA: the kernel reads half and writes float
        (half_to_float); elsewhere the input is converted first, as on the CPU."""
        if input.dtype == torch.float16 and dtype == torch.float32:
            return aten._softmax(input, dim, True)
        return aten._softmax(input.to(dtype) if dtype is not None else input, dim, False)

    @staticmethod
    def _log_softmax(input, dim, dtype=None):
        if input.dtype == torch.float16 and dtype == torch.float32:
            return aten._log_softmax(input, dim, True)
        return aten._log_softmax(input.to(dtype) if dtype is not None else input, dim, False)

    @staticmethod
    def _dropout(input, p, train):
        """dropout as on CUDA: the fused kernel (a bool mask, then the output) wherever
        PyTorch's is_fused_kernel_acceptable holds for a CUDA tensor; the CPU composes it from a
        float noise tensor instead."""
        if not train or p == 0 or input.numel() == 0:
            return input
        if p < 1:
            return aten.native_dropout(input, p, train)[0]
        return input * torch.zeros((), dtype=input.dtype, device=input.device)

    def uninstall(self) -> None:
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None

    def _sdpa(self, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False):
        if not enable_gqa and _flash_ok(q, k, v, attn_mask, self.card):
            return aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, False,
                                                            scale=scale)[0]
        if not enable_gqa and _efficient_ok(q, k, v):
            mask = attn_mask
            if mask is not None and mask.dtype == torch.bool:
                mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(
                    mask.logical_not(), float("-inf"))
            lse = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or
                                               v.requires_grad)
            return aten._scaled_dot_product_efficient_attention(
                q, k, v, mask, lse, dropout_p, is_causal, scale=scale)[0]
        return aten._scaled_dot_product_attention_math(q, k, v, attn_mask, dropout_p, is_causal,
                                                       None, scale=scale, enable_gqa=enable_gqa)[0]
