"""What CUDA's kernels allocate that the ops' outputs do not show, and the kernels CUDA chooses
where the CPU would choose others: cuBLAS's and cuBLASLt's workspaces (one each per thread and
stream, made at the first matrix product there and kept), the attention kernels SDPA picks on a
GPU (flash or memory-efficient, with the logsumexp rows they keep for the backward), and their
random-number state, which stays on the host when no graph is being captured; the temporaries of
layer and group norm, the embedding backward, sums into another type, the softmax backward, the
safe softmax, isin, and the metadata FSDP2's copy kernels pack on the device (`kernel_script`)."""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from .cards import Card
from .cuda_reductions import reduction_staging, staging_bytes

aten = torch.ops.aten

# The products cuBLAS computes: the first on a thread and stream sets up its handle's workspace.
CUBLAS_OPS = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
           aten.addbmm.default, aten.mv.default, aten.addmv.default, aten.dot.default,
           aten.vdot.default, aten._addmm_activation.default, aten.addr.default}


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
                reduction_staging(func, args, self.card.multi_processor_count,
                                  self.card.threads_per_multiprocessor)]

    def after(self, func, args, kwargs, thread: str, stream: int) -> List[Tuple[int, str]]:
        """The persistent allocations made after `func`'s outputs: (size, what)."""
        made: List[Tuple[int, str]] = []
        if func in CUBLAS_OPS:
            key = (thread, stream)
            if key not in self.cublas:
                self.cublas[key] = True
                made.append((self.card.cublas_workspace, "cuBLAS workspace"))
            if key not in self.cublaslt and _uses_cublaslt(func, args, kwargs):
                self.cublaslt[key] = True
                made.append((self.card.cublaslt_workspace(), "cuBLASLt workspace"))
        return made


# How an op's kernel allocates, where it differs from "each output in order": a script of steps,
# ("output", i, bytes or None: the output's own), ("alloc", name, bytes) and ("free", name) for
# the kernel's temporaries. Sizes measured on H100 and H200 recordings (PyTorch 2.11).
Script = List[Tuple]


def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def kernel_script(func, args: Tuple[Any, ...], outputs: Tuple[Any, ...],
                  multiprocessors: int = 132,
                  kwargs: Optional[Dict[str, Any]] = None,
                  threads_per_multiprocessor: int = 2048) -> Optional[Script]:
    if func is aten._scaled_dot_product_flash_attention.default:
        # The random-number seed and offset (8 bytes each, on the device) first; after the
        # output and its logsumexp a 256-byte scratch the kernel frees.
        return [("output", 6, 8), ("output", 7, 8), ("output", 0, None), ("output", 1, None),
                ("alloc", "scratch", 256), ("free", "scratch")]
    if func is aten._scaled_dot_product_flash_attention_backward.default:
        # The gradients, then one workspace: float32 dq accumulators and the softmax row sums,
        # (B, H, T, D + 1), and 256 bytes.
        b, h, t, d = args[1].shape
        work = b * h * t * (d + 1) * 4 + 256
        return [("output", 0, None), ("output", 1, None), ("output", 2, None),
                ("alloc", "workspace", work), ("free", "workspace")]
    if func is aten._scaled_dot_product_cudnn_attention.default:
        # As flash: the random-number seed and offset first, the output and its logsumexp, a
        # 256-byte scratch freed (H100, PyTorch 2.11, over random shapes).
        return [("output", 6, 8), ("output", 7, 8), ("output", 0, None), ("output", 1, None),
                ("alloc", "scratch", 256), ("free", "scratch")]
    if func is aten._scaled_dot_product_cudnn_attention_backward.default:
        # The gradients, then a workspace: float32 accumulators of dq's shape (twice that with
        # fewer key and value heads than query heads), the softmax row sums, 256 bytes.
        q, k = args[1], args[2]
        b, h, t, d = q.shape
        accumulators = 2 if k.shape[1] != h else 1
        work = accumulators * b * h * t * d * 4 + b * h * t * 4 + 256
        return [("output", 0, None), ("output", 1, None), ("output", 2, None),
                ("alloc", "workspace", work), ("free", "workspace")]
    if func is aten._scaled_dot_product_efficient_attention_backward.default:
        # A contiguous copy of the output's gradient before the gradients; two float32 row
        # buffers (B, H, T padded to 32); the copy freed before a float32 dq accumulator with a
        # quarter byte per row more (GPT-2 at 1024 tokens and BERT at 512 on an H200).
        q = args[1]
        b, h, t, d = q.shape
        rows = b * h * _round_up(t, 32) * 4
        return [("alloc", "grad_out", q.numel() * q.element_size()), ("output", 0, None),
                ("output", 1, None), ("output", 2, None), ("output", 3, None),
                ("alloc", "delta", rows), ("alloc", "delta2", rows), ("free", "delta"),
                ("free", "grad_out"), ("alloc", "accum", b * h * t * d * 4 + b * h * t // 4),
                ("free", "delta2"), ("free", "accum")]
    if func is aten._scaled_dot_product_efficient_attention.default:
        # The logsumexp's rows padded to 32; the random-number seed and offset on the host.
        steps: Script = [("output", 0, None)]
        lse = outputs[1]
        if isinstance(lse, torch.Tensor) and lse.dim() == 3 and lse.shape[2] > 0:
            steps.append(("output", 1, lse.shape[0] * lse.shape[1] * _round_up(lse.shape[2], 32)
                          * lse.element_size()))
        return steps
    if func is aten.native_layer_norm.default:
        # A contiguous copy of a non-contiguous input first (expect_contiguous), freed on return.
        x = args[0]
        if x.is_contiguous():
            return None
        return [("alloc", "input", x.numel() * x.element_size())] + [
            ("output", i, None) for i in range(3)] + [("free", "input")]
    if func is aten.native_layer_norm_backward.default:
        # The input's contiguous copy before the gradients, the output gradient's after them;
        # over more than 64Ki rows of fewer than 2,048 features, gamma's and beta's gradients
        # in two stages: partial sums per 32 rows, then each summed (a reduction of its own).
        dy, x = args[0], args[1]
        steps: Script = []
        if not x.is_contiguous():
            steps.append(("alloc", "input", x.numel() * x.element_size()))
        steps += [("output", i, None) for i in range(3)]
        if not dy.is_contiguous():
            steps += [("alloc", "grad", dy.numel() * dy.element_size()), ("free", "grad")]
        n = 1
        for d in args[2]:
            n *= int(d)
        m = x.numel() // max(n, 1)
        if m > 64 * 1024 and n < 2048 and isinstance(outputs[1], torch.Tensor):
            rows = (m + 31) // 32
            staging = staging_bytes(n, rows, False, 4, multiprocessors,
                                    threads_per_multiprocessor=threads_per_multiprocessor)
            steps += [("alloc", "gamma_parts", rows * n * 4), ("alloc", "beta_parts", rows * n * 4)]
            for name in ("gamma", "beta"):
                steps.append(("alloc", name, n * 4))
                if staging:
                    steps += [("alloc", "staging", staging[0]), ("alloc", "semaphores", staging[1]),
                              ("free", "semaphores"), ("free", "staging")]
                steps.append(("free", name))
            steps += [("free", "beta_parts"), ("free", "gamma_parts")]
        if not x.is_contiguous():
            steps.append(("free", "input"))
        return steps
    if func is aten.native_group_norm.default:
        # After the output, mean and rstd: the per-channel scale and shift (N, C) in float32,
        # freed on return.
        n, c = int(args[3]), int(args[4])
        return [("output", i, None) for i in range(3)] + [
            ("alloc", "a", n * c * 4), ("alloc", "b", n * c * 4), ("free", "b"), ("free", "a")]
    if func is aten.native_group_norm_backward.default:
        # After the gradients: the per-channel sums (N, C), the per-group coefficients (N, G)
        # and a broadcast of (N, C), all float32, freed on return.
        n, c, g = int(args[5]), int(args[6]), int(args[8])
        return [("output", i, None) for i in range(3)] + [
            ("alloc", "ds", n * c * 4), ("alloc", "db", n * c * 4), ("alloc", "c2", n * g * 4),
            ("alloc", "c3", n * g * 4), ("alloc", "t", n * c * 4), ("free", "c3"), ("free", "c2"),
            ("free", "t"), ("free", "db"), ("free", "ds")]
    if func is aten.native_dropout.default:
        return [("output", 1, None), ("output", 0, None)]  # the mask before the output
    if func is aten.embedding_dense_backward.default:
        return _embedding_backward(args[0], args[1], int(args[2]))
    # FSDP2 calls these kernels through custom ops of its own (fsdp::split_with_sizes_copy,
    # fsdp::chunk_cat), which return nothing: their out= is the output.
    name = func.name() if hasattr(func, "name") else ""
    if func is aten.split_with_sizes_copy.out or name == "fsdp::split_with_sizes_copy":
        meta = _split_copy_metadata(args, multiprocessors, threads_per_multiprocessor)
        return [("alloc", "metadata", meta), ("free", "metadata")] if meta else None
    if name == "fsdp::chunk_cat":
        outputs = ((kwargs or {}).get("out"),)
    if func in (aten._chunk_cat.out, aten._chunk_cat.default) or name == "fsdp::chunk_cat":
        meta = _chunk_cat_metadata(args, outputs)
        if not meta:
            return None
        steps: Script = [("output", 0, None)] if func is aten._chunk_cat.default else []
        return steps + [("alloc", "metadata", meta), ("free", "metadata")]
    if func in (aten.sum.default, aten.sum.dim_IntList):
        # A sum into another type reduces a converted copy of its input (ATen's
        # make_reduction_from_out_ty), made after the output and freed on return; on CUDA half
        # and bfloat16 into float32 are read as they are (a bool mask's sum, GPT-2's generation).
        x, out = args[0], outputs[0]
        if (isinstance(x, torch.Tensor) and isinstance(out, torch.Tensor) and
                x.dtype != out.dtype and x.numel() and
                not (x.dtype in (torch.float16, torch.bfloat16) and out.dtype == torch.float32)):
            return [("output", 0, None), ("alloc", "converted", x.numel() * out.element_size()),
                    ("free", "converted")]
    if func is aten._softmax_backward_data.default:
        # CUDA's softmax backward multiplies the gradient by the output into a temporary first
        # (after the gradient it returns; freed on return: T5's attention on an H200).
        grad, out = args[0], args[1]
        size = grad.numel() * max(grad.element_size(), out.element_size())
        return [("output", 0, None), ("alloc", "product", size), ("free", "product")]
    if func is aten._safe_softmax.default:
        # The math attention path's softmax that zeroes fully masked rows: after the output, the
        # input's -inf mask, its fully masked rows and a 0-dim zero, freed last first (T5's
        # attention with its position bias on an H200).
        x = args[0]
        dim = int(args[1]) % max(x.dim(), 1) if len(args) > 1 else x.dim() - 1
        rows = x.numel() // max(int(x.shape[dim]), 1) if x.dim() else 1
        out = outputs[0]
        zero = out.element_size() if isinstance(out, torch.Tensor) else 4
        return [("output", 0, None), ("alloc", "masked", x.numel()), ("alloc", "rows", rows),
                ("alloc", "zero", zero), ("free", "zero"), ("free", "rows"), ("free", "masked")]
    if func is aten.isin.Tensor_Tensor:
        # Against few test values (numpy's heuristic, as ATen's isin applies it) CUDA compares
        # each element with each and reduces: after the output, a boolean (elements, tests) and
        # one (elements), freed last first (GPT-2's generation, one test value, on an H200).
        elements, tests = args[0], args[1]
        n = elements.numel()
        if n and tests.numel() < int(10.0 * float(n) ** 0.145):
            return [("output", 0, None), ("alloc", "compare", n * tests.numel()),
                    ("alloc", "any", n), ("free", "any"), ("free", "compare")]
    return None


_COPY_BLOCK_BYTES = 128 * 16  # the copy kernels' threads per block × bytes per thread


def _dense(t: Any) -> bool:
    """Non-overlapping and dense, as far as the trace tells it: contiguous or channels-last."""
    if not isinstance(t, torch.Tensor):
        return False
    return t.is_contiguous() or (t.dim() == 4 and
                                 t.is_contiguous(memory_format=torch.channels_last))


def _split_copy_metadata(args: Tuple[Any, ...], multiprocessors: int,
                         threads_per_multiprocessor: int = 2048) -> int:
    """split_with_sizes_copy.out's fast path on CUDA (FSDP2's all-gather copy-out): the
    destination and source addresses, chunk sizes and block cumulative sums of its splits and each
    block's split, int64s packed and copied to the device for the kernel; 0 off the fast path."""
    self, split_sizes = args[0], [int(v) for v in args[1]]
    dim = int(args[2]) if len(args) > 2 else 0
    if not _dense(self) or self.dim() == 0:
        return 0
    dim %= self.dim()
    item = self.element_size()
    chunk_bytes = [size * self.stride(dim) * item for size in split_sizes]
    chunks = self.numel()
    for d in range(dim, self.dim()):
        chunks //= max(int(self.shape[d]), 1)
    blocks = sum(-(-b // _COPY_BLOCK_BYTES) for b in chunk_bytes)
    max_blocks = int(multiprocessors * threads_per_multiprocessor / 128 * 2.0)
    factor = -(-(blocks * chunks) // max_blocks)
    per_block = min(math.ceil(math.sqrt(factor)), chunks)
    iters = -(-factor // max(per_block, 1))
    grid = sum(-(-b // (_COPY_BLOCK_BYTES * iters)) for b in chunk_bytes)
    splits = len(split_sizes)
    return 8 * (3 * splits + grid + splits + 1)


def _chunk_cat_metadata(args: Tuple[Any, ...], outputs: Tuple[Any, ...]) -> int:
    """_chunk_cat's fast path on CUDA (FSDP2's reduce-scatter copy-in): per tensor its source,
    sizes, offsets and blocks, and each block's tensor, int64s packed and copied to the device;
    sizes from FSDP2's gradients on an H200 (six per tensor, two more, one per block)."""
    tensors, dim, chunks = list(args[0]), int(args[1]), int(args[2])
    out = outputs[0] if outputs else None
    if not tensors or not all(_dense(t) for t in tensors) or not isinstance(out, torch.Tensor):
        return 0
    if not (out.dtype == tensors[0].dtype or
            (tensors[0].dtype == torch.bfloat16 and out.dtype == torch.float32)):
        return 0
    dim %= max(tensors[0].dim(), 1)
    blocks = 0
    for t in tensors:
        trailing = 1
        for d in t.shape[dim + 1:]:
            trailing *= int(d)
        padded = -(-int(t.shape[dim]) // chunks) * chunks
        blocks += -(-(padded * trailing * out.element_size() // chunks) // _COPY_BLOCK_BYTES)
    return 8 * (6 * len(tensors) + 2 + blocks)


def _embedding_backward(grad: torch.Tensor, indices: torch.Tensor, num_weights: int) -> Script:
    """embedding_dense_backward_cuda: up to 3,072 indices the gradient alone (after a contiguous
    copy of the indices where they are not); more are sorted (cub's radix sort: sorted and original
    positions, a range, its temporary storage), then the weight's gradient, then the segments'
    offsets and count and a cub scan's temporary storage. Then, sized by their bounds rather than
    by how many distinct indices there are: per segment its partial segments and their offsets
    (at most min(indices, rows) segments), another scan, and per partial segment (at most one per
    10 indices, plus one per segment) its offset and a float32 row of partial sums (BERT's and
    GPT-2's word embeddings on an H200). Where there are fewer rows than indices (BERT's token
    types), the partial sums measured are not that bound's: left out, their offsets kept."""
    n = indices.numel()
    size = n * indices.element_size()
    steps: Script = []
    if not indices.is_contiguous():
        steps.append(("alloc", "indices", size))
    if n <= 3072:  # few indices: one kernel straight into the gradient, no sort
        return steps + [("output", 0, None)] + ([("free", "indices")] if steps else [])
    segments = min(n, num_weights)
    partials = n // 10 + segments  # NROWS_PER_THREAD rows per partial segment
    width = grad.shape[-1] if grad.dim() else 1
    steps += [("alloc", "sorted", size), ("alloc", "positions", size), ("alloc", "range", size),
              ("alloc", "sort", (65 * n + 3) // 4 + 16895), ("free", "sort"), ("free", "range"),
              ("output", 0, None),
              ("alloc", "offsets", size), ("alloc", "count", 8), ("alloc", "ends", size),
              ("alloc", "scan", 1279), ("free", "scan"), ("free", "ends"),
              ("alloc", "per_segment", segments * indices.element_size()),
              ("alloc", "per_segment_offsets", segments * indices.element_size()),
              ("alloc", "scan2", 1279), ("free", "scan2"), ("alloc", "partial_count", 8),
              ("alloc", "partial_offsets", partials * indices.element_size())]
    if segments == n:
        steps += [("alloc", "partial_sums", partials * width * 4), ("free", "partial_sums")]
    steps += [("free", "partial_offsets"), ("free", "partial_count"),
              ("free", "per_segment_offsets"), ("free", "per_segment"), ("free", "count"),
              ("free", "offsets"), ("free", "positions"), ("free", "sorted")]
    if not indices.is_contiguous():
        steps.append(("free", "indices"))
    return steps


def _boolean_mask_to_float(mask, dtype):
    """ATen's convert_boolean_attn_mask: where the mask is False, -inf; else 0 (on the mask's
    device: a 0-dim zero there, the -inf a number made a tensor beside it)."""
    zero = torch.zeros((), dtype=dtype, device=mask.device)
    return torch.where(mask.logical_not(), float("-inf"), zero)


def _math_attention(q, k, v, mask, dropout_p, is_causal, scale, enable_gqa, low_precision):
    """ATen's math attention (_scaled_dot_product_attention_math) as CUDA runs it: half inputs
    computed in float32 (unless the script allows half reductions), q and k scaled before their
    product, a causal mask made on the device, grouped-query heads repeated, a float mask added
    to the scores in place (ATen adds it out of place for tensor subclasses such as a trace's
    fake tensors: T5's position bias, one (B, H, T, T) buffer fewer in the forward, one more in
    the backward, on an H200), then the safe softmax."""
    origin = q.dtype
    if mask is not None and mask.dtype == torch.bool:
        mask = _boolean_mask_to_float(mask, origin)
    if origin in (torch.float16, torch.bfloat16) and not low_precision:
        q, k, v = q.float(), k.float(), v.float()
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    factor = math.sqrt(abs(scale))
    if is_causal:
        causal = torch.ones((q.shape[-2], k.shape[-2]), dtype=torch.bool, device=q.device).tril()
        mask = _boolean_mask_to_float(causal, q.dtype)
    if enable_gqa and q.dim() >= 3 and k.shape[-3] != q.shape[-3]:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], -3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], -3)
    # the scaled q and k freed once multiplied (T5's attention on an H200)
    scores = torch.matmul(q * (-factor if scale < 0 else factor), k.transpose(-2, -1) * factor)
    if mask is not None:
        scores.add_(mask)
    attn = aten._safe_softmax(scores, -1)
    if dropout_p > 0.0:
        attn = torch.dropout(attn, dropout_p, True)
    return torch.matmul(attn, v).to(origin)


def _flash_ok(q, k, v, attn_mask, card: Card, dropout_p: float = 0.0) -> bool:
    head = q.shape[-1] if q.dim() == 4 else 0
    if card.flash_training_head_limits and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in (q, k, v)) and \
            (192 < head <= 224 or (head > 224 and dropout_p > 0.0)):
        return False  # its backward has no kernel for these on sm86 to sm89
    return (attn_mask is None and q.dtype in (torch.float16, torch.bfloat16) and
            q.dtype == k.dtype == v.dtype and card.major >= 8 and head <= 256 and
            head % 8 == 0 and q.dim() == 4)


def _cudnn_ok(q, k, v, attn_mask, card: Card) -> bool:
    # Head sizes to 256 on sm90 (recorded on an H100), to 128 elsewhere.
    largest = 256 if card.major == 9 else 128
    return (q.dtype in (torch.float16, torch.bfloat16) and q.dtype == k.dtype == v.dtype and
            card.major >= 8 and q.dim() == 4 and q.shape[-1] <= largest and
            q.shape[-1] % 8 == 0 and _mask_ok(q, k, attn_mask))


def _efficient_ok(q, k, v, attn_mask) -> bool:
    return (q.dtype in (torch.float32, torch.float16, torch.bfloat16) and
            q.dtype == k.dtype == v.dtype and q.dim() == 4 and q.shape[-1] % 4 == 0 and
            _mask_ok(q, k, attn_mask))


def _mask_ok(q, k, mask) -> bool:
    """PyTorch's check_attn_mask_shape: no mask, or one that needs no gradient (T5's learned
    position bias falls to the math path) and broadcasts over batch and heads as the kernel
    reads it."""
    if mask is None:
        return True
    if mask.requires_grad:
        return False
    if mask.shape[-2] not in (q.shape[2], 1) or mask.shape[-1] not in (k.shape[2], 1):
        return False
    if mask.dim() == 2:
        return True
    return (mask.dim() == 4 and mask.shape[0] in (1, q.shape[0]) and
            mask.shape[1] in (1, q.shape[1]))


def _pack_padded_sequence(input, lengths, batch_first):
    """ATen's _pack_padded_sequence, which reads the lengths (on the host) to size its output:
    per run of sequences of one length, their steps copied contiguous, then all concatenated
    (fake tensors cannot size it: the lengths are values)."""
    if batch_first:
        input = input.transpose(0, 1)
    lengths = [int(v) for v in lengths.tolist()]
    batch = int(input.shape[1])
    steps, sizes, previous = [], [], 0
    for i in range(batch):
        length = lengths[batch - 1 - i]
        if length > previous:
            current = batch - i
            steps.append(input[previous:length, :current].contiguous().view(
                -1, *input.shape[2:]))
            sizes += [current] * (length - previous)
            previous = length
    return torch.cat(steps), _host_tensor(sizes)


def _pad_packed_sequence(data, batch_sizes, batch_first, padding_value, total_length):
    """ATen's _pad_packed_sequence: a (steps, batch, ...) tensor of the padding value, each
    step's rows copied in, and the lengths on the host."""
    sizes = [int(v) for v in batch_sizes.tolist()]
    steps = max(len(sizes), int(total_length))
    batch = sizes[0]
    output = torch.full((steps, batch, *data.shape[1:]), padding_value, dtype=data.dtype,
                        device=data.device)
    offset = 0
    lengths = [0] * batch
    for t, size in enumerate(sizes):
        output[t, :size].copy_(data[offset:offset + size])
        offset += size
        for b in range(size):
            lengths[b] += 1
    if batch_first:
        output = output.transpose(0, 1)
    return output, _host_tensor(lengths)


def _host_tensor(values):
    """A real int64 tensor on the host, as ATen makes the batch sizes and lengths (the trace's
    modes would make a fake one)."""
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        return torch.tensor(values, dtype=torch.int64)


class KernelChoice:
    """The composite ops whose CUDA path differs from the CPU's, run as CUDA runs them:
    scaled_dot_product_attention by the flash kernel where its constraints allow, else the
    memory-efficient kernel, else the math path (PyTorch's sdp_utils priority order); dropout by
    the fused kernel; softmax and log_softmax of half to float without converting first; linear
    with its bias added in place; where with a number, the number on the device."""

    def __init__(self, card: Card,
                 device_beside: Callable[[torch.Tensor], torch.device], choices: Any) -> None:
        self.card = card
        self.choices = choices
        # Where a tensor made beside another goes: the device while the trace records, the
        # host inside the fake mode's own decompositions (shapes only).
        self.device_beside = device_beside
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
            self._lib.impl("linear", self._linear, "CompositeImplicitAutograd")
            self._lib.impl("log_softmax.int", self._log_softmax, "CompositeImplicitAutograd")
            self._lib.impl("where.ScalarSelf", self._where_scalar_self,
                           "CompositeImplicitAutograd")
            self._lib.impl("where.ScalarOther", self._where_scalar_other,
                           "CompositeImplicitAutograd")
            # (at Autograd: the ops have derivatives of their own, which these composites of
            # differentiable ops replace)
            self._lib.impl("_pack_padded_sequence", _pack_padded_sequence, "Autograd")
            self._lib.impl("_pad_packed_sequence", _pad_packed_sequence, "Autograd")

    @staticmethod
    def _linear(input, weight, bias=None):
        """ATen's linear: addmm for 2-D inputs and contiguous ones flattened to 2-D, else matmul
        and the bias added in place — which ATen does out of place for a tensor subclass such as
        the fake tensors of a trace."""
        if bias is not None and input.dim() == 2:
            return aten.addmm(bias, input, weight.t())
        if bias is not None and input.is_contiguous() and (input.dim() == 3 or bias.dim() == 1):
            flat = input.reshape(-1, input.shape[-1])
            out = aten.addmm(bias, flat, weight.t())
            return out.view(*input.shape[:-1], out.shape[1])
        out = aten.matmul(input, weight.t())
        if bias is not None:
            out.add_(bias)
        return out

    def _where_scalar_self(self, condition, number, other):
        """ATen's where with a number: the number made a 0-dim tensor on the other argument's
        device (4 bytes of the GPU's for a float), which the CPU keeps on the host."""
        result_type = torch.result_type(other, number)
        other = other.to(result_type)
        number = aten.scalar_tensor(number, dtype=result_type, device=self.device_beside(other))
        return aten.where.self(condition, number, other)

    def _where_scalar_other(self, condition, tensor, number):
        result_type = torch.result_type(tensor, number)
        tensor = tensor.to(result_type)
        number = aten.scalar_tensor(number, dtype=result_type, device=self.device_beside(tensor))
        return aten.where.self(condition, tensor, number)

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
        """The first backend the script allows (PyTorch's priority order) whose constraints the
        call meets: flash, memory-efficient, math or cuDNN's."""
        same_heads = q.shape[-3] == k.shape[-3] == v.shape[-3] if q.dim() == 4 else True
        grouped = (q.dim() == 4 and k.shape[-3] == v.shape[-3] and
                   q.shape[-3] % k.shape[-3] == 0)
        allowed = self.choices.attention_backends(self.card.prefers_cudnn_attention)
        for backend in allowed:
            # Flash runs grouped-query attention itself; the memory-efficient kernel only with
            # as many key and value heads as query heads.
            if backend == "flash" and (same_heads or (enable_gqa and grouped)) and \
                    _flash_ok(q, k, v, attn_mask, self.card, dropout_p):
                self.choices.attention_ran("flash")
                return aten._scaled_dot_product_flash_attention(
                    q, k, v, dropout_p, is_causal, False, scale=scale)[0]
            if backend == "efficient" and same_heads and _efficient_ok(q, k, v, attn_mask):
                self.choices.attention_ran("efficient")
                mask = attn_mask
                if mask is not None and mask.dtype == torch.bool:
                    mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill_(
                        mask.logical_not(), float("-inf"))
                lse = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or
                                                   v.requires_grad)
                return aten._scaled_dot_product_efficient_attention(
                    q, k, v, mask, lse, dropout_p, is_causal, scale=scale)[0]
            if backend == "math":
                self.choices.attention_ran("math")
                return _math_attention(q, k, v, attn_mask, dropout_p, is_causal, scale,
                                       enable_gqa, self.choices.math_reduces_in_low_precision())
            if backend == "cudnn" and (same_heads or (enable_gqa and grouped)) and \
                    _cudnn_ok(q, k, v, attn_mask, self.card):
                self.choices.attention_ran("cudnn")
                mask = attn_mask
                if mask is not None and mask.dtype == torch.bool:
                    # Made additive first, in the inputs' type: two scalars, then where().
                    low = torch.scalar_tensor(torch.finfo(q.dtype).min, dtype=q.dtype,
                                              device=q.device)
                    zero = torch.scalar_tensor(0.0, dtype=q.dtype, device=q.device)
                    mask = torch.where(mask, zero, low)
                lse = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or
                                                   v.requires_grad)
                return aten._scaled_dot_product_cudnn_attention(
                    q, k, v, mask, lse, dropout_p, is_causal, False, scale=scale)[0]
        raise RuntimeError(f"No available kernel. Aborting execution. (scaled_dot_product_"
                           f"attention: the backends allowed, {allowed or 'none'}, do not take "
                           "these inputs)")
