"""The staging buffers of CUDA's reduction kernels: where a sum or mean splits each output's
inputs across several blocks, the kernel allocates room for their partial results and a semaphore
per column of blocks, and frees both when it returns. Their sizes follow PyTorch's
setReduceConfig (ATen/native/cuda/Reduce.cuh), computed here for the shapes a contiguous tensor
reduced over its leading or trailing dimensions gives; other reductions are left out."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch

aten = torch.ops.aten
REDUCTIONS = {aten.sum.dim_IntList, aten.sum.default, aten.mean.dim, aten.mean.default}
_MAX_THREADS = 512  # mnt_wrapper<T>::MAX_NUM_THREADS for real types
_MAX_THREADS_PER_SM = 2048  # sm80 and sm90
_VT0 = 4  # input_vec_size


def _last_pow2(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _div_up(a: int, b: int) -> int:
    return -(-a // b)


def staging_bytes(outputs: int, inputs: int, on_fastest: bool, accumulate_bytes: int,
                  multiprocessors: int) -> Optional[Tuple[int, int]]:
    """(buffer, semaphores) bytes of one reduction of `inputs` values into each of `outputs`,
    over the fastest-moving dimension or not; None where the kernel reduces without them."""
    output_vec = 1
    if on_fastest:
        dim0, dim1 = inputs, outputs
        if dim0 >= 128:
            dim0 //= _VT0
    else:
        dim0, dim1 = outputs, inputs
        output_vec = 4
        while outputs % output_vec:
            output_vec //= 2
        dim0 //= output_vec
    max_threads = _MAX_THREADS // output_vec
    dim0_pow2 = _last_pow2(dim0) if dim0 < max_threads else max_threads
    dim1_pow2 = _last_pow2(dim1) if dim1 < max_threads else max_threads
    width = min(dim0_pow2, 32)
    height = min(dim1_pow2, max_threads // width)
    width = min(dim0_pow2, max_threads // height)
    threads = width * height
    step_input = step_output = 1
    if on_fastest:
        step_input *= width
    else:
        step_output *= width
    split_across_warps = _div_up(inputs, step_input) >= min(height * 16, 256)
    if split_across_warps:
        step_input *= height
    else:
        step_output *= height
    grid_x = _div_up(outputs // output_vec, step_output)
    target = multiprocessors * (_MAX_THREADS_PER_SM // threads)
    values = _div_up(inputs, step_input)
    if not (split_across_warps and values >= 256 and grid_x <= target):
        return None
    ctas = max(min(_div_up(target, grid_x), _div_up(values, 16)), _div_up(values, 256))
    if ctas <= 1:
        return None
    size = accumulate_bytes * outputs * ctas
    if not on_fastest:
        size *= width * output_vec
    return size, 4 * grid_x


def reduction_staging(func, args: Sequence, multiprocessors: int) -> List[int]:
    """The staging allocations (buffer, semaphores) of `func` on its arguments, in the order the
    kernel makes them; empty where there are none or the shape is not one modelled."""
    if func not in REDUCTIONS:
        return []
    x = args[0]
    if not isinstance(x, torch.Tensor) or not x.is_contiguous() or x.numel() == 0:
        return []
    if not (x.is_floating_point() or x.dtype in (torch.int32, torch.int64)):
        return []
    dims = args[1] if len(args) > 1 and args[1] is not None else list(range(x.dim()))
    dims = [d % max(x.dim(), 1) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
    if not dims:
        dims = list(range(x.dim()))
    shape = [(s, i in dims) for i, s in enumerate(x.shape) if s != 1]
    reduced = [r for _, r in shape]
    if not any(reduced):
        return []
    k = reduced.index(True)
    last = len(reduced) - 1 - reduced[::-1].index(True)
    if not all(reduced[k:last + 1]):
        return []  # reduced dimensions with kept ones between: not modelled
    inputs = 1
    outputs = 1
    for s, r in shape:
        if r:
            inputs *= s
        else:
            outputs *= s
    if k == 0 and last == len(reduced) - 1:
        on_fastest = True  # every dimension
    elif last == len(reduced) - 1:
        on_fastest = True
    elif k == 0:
        on_fastest = False
    else:
        return []
    accumulate = 8 if x.dtype in (torch.float64, torch.int64, torch.int32) else 4
    sizes = staging_bytes(outputs, inputs, on_fastest, accumulate, multiprocessors)
    return list(sizes) if sizes else []
