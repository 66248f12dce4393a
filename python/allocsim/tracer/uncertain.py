"""What the trace does not know, kept as bounds instead of a silent figure: each op whose CUDA
kernel allocates through the caching allocator in ways no rule here models (cuDNN's RNNs and
convolutions outside the table, cub's sorts and scans, cuSOLVER's and cuFFT's workspaces) is
traced with what is known (its outputs: the lower bound), and its temporaries' upper bound is
kept beside it, so that the trace has an upper-bound twin (Tracer.save_upper). Where no bound is
known the cause is said to be unbounded. Each cause becomes one warning with its calls and the
bytes at stake."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import torch

aten = torch.ops.aten

# The largest cuDNN convolution workspace per byte of the convolution's tensors (input, weight
# and output) among the 10,640 convolutions of the sm90 table (cudnn_workspaces_sm90.json.gz,
# recorded on an H200): 33.9, a 4-channel stem convolution. A measured maximum, not cuDNN's.
CONVOLUTION_WORKSPACE_PER_BYTE = 34
_MiB = 2**20


def _nbytes(t: Any) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


def _tensor_bytes(values: Any) -> int:
    from torch.utils._pytree import tree_leaves
    return sum(_nbytes(t) for t in tree_leaves(values) if isinstance(t, torch.Tensor))


def _cub(args: Tuple[Any, ...], outputs: Tuple[Any, ...]) -> int:
    """cub's sorts, scans and selections: keys and their int64 positions copied,
    double-buffered, and their histograms: at most twice that, and a MiB (0: nothing to sort)."""
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    n = first.numel() if first is not None else 0
    return 2 * (n * 8 + _nbytes(first)) + _MiB if n > 0 else 0


def _index_put(args: Tuple[Any, ...], outputs: Tuple[Any, ...]) -> int:
    """index_put with accumulate=True sorts its indices on CUDA; without, it allocates nothing."""
    accumulate = len(args) > 3 and bool(args[3])
    if not accumulate:
        return 0
    indices = [t for t in (args[1] if len(args) > 1 else []) if isinstance(t, torch.Tensor)]
    return _cub((indices[0],), outputs) if indices else 0


@dataclass(frozen=True)
class Cause:
    name: str  # what is not modelled, for the warning
    what: str  # what it allocates on a GPU
    traced: str = "their outputs alone"  # what the trace has of them


# ops by overload packet name -> (cause, upper bound of their temporaries; None: unbounded)
_CUB = Cause("cub's temporary storage", "sorts, scans and selections of large tensors")
_SOLVER = Cause("cuSOLVER's and cuBLAS's workspaces of linear algebra",
                "factorizations and solves")
_FFT = Cause("cuFFT's plan workspaces", "Fourier transforms")
RNN = Cause("cuDNN's recurrent kernels", "GRU, LSTM and RNN layers: cuDNN's workspace and the "
            "reserve it keeps for the backward, bounded by envelopes measured on an H100",
            "the CPU kernel's tensors instead")
_CONVOLUTION = Cause("cuDNN's convolution workspaces", "convolutions the table does not hold, "
                     "bounded by the largest workspace per byte of tensors it holds")
OPS: Dict[str, Tuple[Cause, Any]] = {}
for _name in ("sort", "argsort", "topk", "unique", "_unique", "_unique2", "unique_dim",
              "unique_consecutive", "cumsum", "cumprod", "logcumsumexp", "randperm",
              "searchsorted", "bincount", "histc", "median", "nanmedian", "kthvalue", "mode",
              "multinomial", "embedding_bag", "_embedding_bag", "_embedding_bag_backward"):
    OPS[_name] = (_CUB, _cub)
for _name in ("index_put", "index_put_", "_index_put_impl_"):
    OPS[_name] = (_CUB, _index_put)
for _name in ("linalg_cholesky_ex", "linalg_lu_factor_ex", "linalg_qr", "linalg_eigh",
              "linalg_eig", "linalg_svd", "_linalg_svd", "linalg_solve_ex", "_linalg_solve_ex",
              "linalg_inv_ex", "_linalg_eigh", "linalg_lstsq", "triangular_solve",
              "linalg_solve_triangular", "_linalg_det", "_linalg_slogdet", "cholesky_solve",
              "geqrf", "ormqr", "linalg_householder_product", "lu_unpack", "linalg_lu"):
    OPS[_name] = (_SOLVER, None)
for _name in ("_fft_r2c", "_fft_c2r", "_fft_c2c"):
    OPS[_name] = (_FFT, None)


@dataclass
class _Tally:
    calls: int = 0
    largest: int = 0  # the largest upper bound of one call
    unbounded: bool = False
    first: str = ""  # where the first call was made


class Uncertainties:
    """The causes met while tracing, with their calls and bounds."""

    def __init__(self) -> None:
        self.tallies: Dict[Cause, _Tally] = {}

    def convolution(self, args: Tuple[Any, ...],
                    outputs: Tuple[Any, ...]) -> Tuple[Cause, Optional[int]]:
        """A convolution without its workspaces (outside the table, or not cuDNN's heuristics):
        up to CONVOLUTION_WORKSPACE_PER_BYTE times its tensors' bytes."""
        io = _tensor_bytes(args) + _tensor_bytes(outputs)
        return _CONVOLUTION, CONVOLUTION_WORKSPACE_PER_BYTE * io

    def upper_of(self, func, args: Tuple[Any, ...], outputs: Tuple[Any, ...],
                 modelled: bool) -> Optional[Tuple[Cause, Optional[int]]]:
        """For an op no rule models whose kernel allocates beside its outputs: its cause and its
        temporaries' upper bound (None: unbounded); None for any other op."""
        if modelled:
            return None
        name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else ""
        entry = OPS.get(name)
        if entry is None:
            return None
        cause, bound = entry
        if bound is None:
            return cause, None
        upper = bound(args, outputs)
        return (cause, upper) if upper else None

    def note(self, cause: Cause, upper: Optional[int], where: str) -> None:
        tally = self.tallies.setdefault(cause, _Tally())
        tally.calls += 1
        if upper is None:
            tally.unbounded = True
        else:
            tally.largest = max(tally.largest, upper)
        if not tally.first:
            tally.first = where

    @property
    def bounded(self) -> bool:
        """Whether every cause has an upper bound (the twin trace is an upper bound)."""
        return not any(t.unbounded for t in self.tallies.values())

    def warnings(self) -> List[str]:
        lines = []
        for cause, tally in self.tallies.items():
            bound = ("no upper bound is known" if tally.unbounded else
                     f"up to {tally.largest} bytes a call in the upper-bound trace")
            lines.append(f"{cause.name} not modelled ({cause.what}): {tally.calls} call(s), the "
                         f"first at {tally.first}; the trace has {cause.traced}, {bound}")
        return lines

    def summary(self) -> List[Dict[str, Any]]:
        """The causes as the JSON reports them."""
        return [{"cause": cause.name, "calls": tally.calls,
                 "largest_upper_bytes": None if tally.unbounded else tally.largest,
                 "first": tally.first} for cause, tally in self.tallies.items()]
