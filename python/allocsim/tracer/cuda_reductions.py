"""The staging buffers of CUDA's reduction kernels: where a sum or mean splits each output's
inputs across several blocks, the kernel allocates room for their partial results and a semaphore
per column of blocks, and frees both when it returns. Their sizes follow PyTorch's
setReduceConfig (ATen/native/cuda/Reduce.cuh) on TensorIterator's view of the reduction (its
dimensions reordered and coalesced); reductions of 2^31 elements or more, which TensorIterator
splits, are left out."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import torch

aten = torch.ops.aten
REDUCTIONS = {aten.sum.dim_IntList, aten.sum.default, aten.mean.dim, aten.mean.default}
_MAX_THREADS = 512  # mnt_wrapper<T>::MAX_NUM_THREADS for real types
_MAX_THREADS_PER_SM = 2048  # maxThreadsPerMultiProcessor on sm80, sm90 and sm100; 1536 on sm86/89
_VT0 = 4  # input_vec_size


def _last_pow2(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def _div_up(a: int, b: int) -> int:
    return -(-a // b)


def staging_bytes(outputs: int, inputs: int, on_fastest: bool, accumulate_bytes: int,
                  multiprocessors: int, vectorize: bool = True,
                  output_vec: int = 4,
                  threads_per_multiprocessor: int = _MAX_THREADS_PER_SM
                  ) -> Optional[Tuple[int, int]]:
    """(buffer, semaphores) bytes of one reduction of `inputs` values into each of `outputs`,
    over the fastest-moving dimension or not; None where the kernel reduces without them.
    `vectorize`: a reduction over the fastest dimension reads 4 values at a time (one reduced
    dimension, unit stride); `output_vec`: the outputs a thread writes at a time otherwise."""
    if on_fastest:
        dim0, dim1 = inputs, outputs
        output_vec = 1
        if vectorize and dim0 >= 128:
            dim0 //= _VT0
    else:
        dim0, dim1 = outputs, inputs
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
    target = multiprocessors * (threads_per_multiprocessor // threads)
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


def _geometry(sizes: Sequence[int], strides: Sequence[int], reduced: Sequence[bool]):
    """TensorIterator's view of a reduction: its dimensions reordered (the reduced ones first,
    each group from the fastest-moving) and coalesced; (sizes, input strides, reduced dims)."""
    dims = [d for d in range(len(sizes)) if sizes[d] != 1]
    red = sorted((d for d in dims if reduced[d]), key=lambda d: (strides[d], d))
    kept = sorted((d for d in dims if not reduced[d]), key=lambda d: -d)  # the output's order
    shape: List[List[int]] = []  # [size, input stride, output stride, reduced]
    out_stride = 1
    out_strides = {}
    for d in kept:
        out_strides[d] = out_stride
        out_stride *= sizes[d]
    for d in red + kept:
        entry = [sizes[d], strides[d], 0 if reduced[d] else out_strides[d], reduced[d]]
        if shape:
            prev = shape[-1]
            if (prev[3] == entry[3] and entry[1] == prev[0] * prev[1] and
                    entry[2] == prev[0] * prev[2]):
                prev[0] *= entry[0]
                continue
        shape.append(entry)
    return shape


def reduction_staging(func, args: Sequence, multiprocessors: int,
                      threads_per_multiprocessor: int = _MAX_THREADS_PER_SM) -> List[int]:
    """The staging allocations (buffer, semaphores) of `func` on its arguments, in the order the
    kernel makes them; empty where there are none."""
    if func not in REDUCTIONS:
        return []
    x = args[0]
    if not isinstance(x, torch.Tensor) or x.numel() == 0 or x.numel() >= 2**31:
        return []
    if not (x.is_floating_point() or x.dtype in (torch.int32, torch.int64)):
        return []
    ndim = x.dim()
    dims = args[1] if len(args) > 1 and args[1] is not None else []
    dims = [d % max(ndim, 1) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
    reduced = [not dims or d in dims for d in range(ndim)]
    shape = _geometry(list(x.shape), list(x.stride()), reduced)
    if not shape or not any(e[3] for e in shape):
        return []
    n_reduce = sum(1 for e in shape if e[3])
    inputs = 1
    outputs = 1
    for size, _, _, r in shape:
        if r:
            inputs *= size
        else:
            outputs *= size
    on_fastest = n_reduce == len(shape) or shape[0][1] < shape[n_reduce][1]
    fastest_stride = shape[0][1] if on_fastest else shape[n_reduce][1]
    vectorize = fastest_stride == 1 and n_reduce == 1
    output_vec = 1
    if not on_fastest and fastest_stride == 1:
        output_vec = 4
        for n in [shape[n_reduce][0]] + [e[1] for i, e in enumerate(shape) if i != n_reduce]:
            while n % output_vec:
                output_vec //= 2
    accumulate = 8 if x.dtype in (torch.float64, torch.int64, torch.int32) else 4
    sizes = staging_bytes(outputs, inputs, on_fastest, accumulate, multiprocessors, vectorize,
                          output_vec, threads_per_multiprocessor)
    return list(sizes) if sizes else []
