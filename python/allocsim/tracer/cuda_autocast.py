"""torch.autocast("cuda") on the CPU, cast for cast: CUDA's autocast policy (which ops run in the
lower precision, which in float32, which take float32 as their dtype, which promote) in place of
the CPU's, whose lists differ (layer_norm, softmax and sum stay in bfloat16 on the CPU; CUDA runs
them in float32). Each policy is a kernel at the AutocastCPU dispatch key, as PyTorch's are at
AutocastCUDA, with the same weight-cast cache: a float32 leaf that requires grad is cast once per
autocast region and the cast kept until the outermost region ends.

The lists are PyTorch's (ATen/autocast_mode.h, releases 2.11 to 2.14)."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import torch

LOWER_PRECISION = (
    "_convolution.deprecated", "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc",
    "conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input", "convolution",
    "prelu", "addmm", "addmv", "addr", "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear",
    "addbmm", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot", "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    "_scaled_dot_product_flash_attention", "scaled_dot_product_attention")
FLOAT32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar",
    "softplus", "layer_norm", "native_layer_norm", "rms_norm", "group_norm", "frobenius_norm.dim",
    "nuclear_norm", "nuclear_norm.dim", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "upsample_nearest1d", "_upsample_nearest_exact1d", "upsample_nearest2d",
    "_upsample_nearest_exact2d", "upsample_nearest3d", "_upsample_nearest_exact3d",
    "upsample_linear1d", "upsample_bilinear2d", "_upsample_bilinear2d_aa",
    "upsample_trilinear3d", "upsample_bicubic2d", "_upsample_bicubic2d_aa")
FLOAT32_SET_OPT_DTYPE = (
    "prod", "prod.dim_int", "softmax.int", "log_softmax.int", "cumprod", "cumsum",
    "linalg_vector_norm", "linalg_matrix_norm", "linalg_matrix_norm.str_ord", "sum",
    "sum.dim_IntList")
PROMOTE = ("addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "grid_sampler",
           "index_put", "tensordot", "scatter_add")

_KEY = torch._C.DispatchKey.AutocastCPU


def _overload(name: str):
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base)
    return getattr(packet, overload or "default")


class CudaAutocast:
    """CUDA's autocast policy in place of the CPU's while installed (install(), uninstall())."""

    def __init__(self) -> None:
        self._lib = None
        self._cache: Dict[int, Tuple[Any, torch.Tensor]] = {}
        self.nesting = 0

    def install(self) -> None:
        self._lib = torch.library.Library("aten", "IMPL")
        ours = set()
        for names, kernel in ((LOWER_PRECISION, self._lower), (FLOAT32, self._float32),
                              (FLOAT32_SET_OPT_DTYPE, self._set_opt_dtype),
                              (PROMOTE, self._promote)):
            for name in names:
                try:
                    op = _overload(name)
                except AttributeError:
                    continue  # not in this release
                self._lib.impl(name, self._wrap(kernel, op), "AutocastCPU")
                ours.add(op.name())
        # The CPU's own autocast kernels for ops CUDA's lists leave out fall through, as on CUDA.
        for name in torch._C._dispatch_get_all_op_names():
            if name in ours or not torch._C._dispatch_has_kernel_for_dispatch_key(name,
                                                                                   "AutocastCPU"):
                continue
            self._lib.impl(name.split("::", 1)[1], torch.library.fallthrough_kernel,
                           "AutocastCPU")

    def uninstall(self) -> None:
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None
        self._cache.clear()

    def region_ended(self) -> None:
        """The outermost autocast region ended: its weight casts are let go."""
        self._cache.clear()

    def _wrap(self, kernel, op):
        def run(*args, **kwargs):
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(_KEY)):
                return kernel(op, args, kwargs)
        return run

    # --- the policies ---

    @staticmethod
    def _eligible(t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64

    def _cast(self, t: Any, dtype: torch.dtype) -> Any:
        if isinstance(t, (list, tuple)):
            return type(t)(self._cast(x, dtype) for x in t)
        if not self._eligible(t) or t.dtype == dtype:
            return t
        cacheable = (dtype == torch.get_autocast_dtype("cpu") and t.dtype == torch.float32 and
                     t.requires_grad and t.is_leaf and not t._is_view() and
                     torch.is_autocast_cache_enabled())
        if not cacheable:
            return t.to(dtype)
        hit = self._cache.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        cast = t.to(dtype)
        import weakref
        self._cache[id(t)] = (weakref.ref(t), cast)
        return cast

    def _cast_all(self, args, kwargs, dtype):
        """Every argument cast, the last first: PyTorch's kernels cast them in a pack expansion
        of a call's arguments, which GCC (PyTorch's Linux builds) evaluates right to left; the
        recordings show a linear's weight cast before its input."""
        kw = {k: self._cast(v, dtype) for k, v in reversed(list(kwargs.items()))}
        cast = [self._cast(a, dtype) for a in reversed(args)]
        return list(reversed(cast)), kw

    def _lower(self, op, args, kwargs):
        args, kwargs = self._cast_all(args, kwargs, torch.get_autocast_dtype("cpu"))
        return op(*args, **kwargs)

    def _float32(self, op, args, kwargs):
        args, kwargs = self._cast_all(args, kwargs, torch.float32)
        return op(*args, **kwargs)

    def _set_opt_dtype(self, op, args, kwargs):
        first = next((a for a in list(args) + list(kwargs.values())
                      if isinstance(a, torch.Tensor)), None)
        if first is None or not self._eligible(first):
            return op(*args, **kwargs)
        schema = op._schema.arguments
        position = next(i for i, a in enumerate(schema) if a.name == "dtype")
        args = list(args)
        if position < len(args):
            if args[position] is None:
                args[position] = torch.float32
        elif kwargs.get("dtype") is None:
            kwargs = dict(kwargs, dtype=torch.float32)
        return op(*args, **kwargs)

    def _promote(self, op, args, kwargs):
        widest = torch.get_autocast_dtype("cpu")
        for a in _tensors(list(args) + list(kwargs.values())):
            if self._eligible(a):
                widest = torch.promote_types(widest, a.dtype)
        args, kwargs = self._cast_all(args, kwargs, widest)
        return op(*args, **kwargs)


def _tensors(values: List[Any]):
    for v in values:
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from _tensors(list(v))
