"""The choices a script makes of CUDA's kernels, read where a kernel is chosen, as PyTorch reads
them: the attention backends it allows and their order (torch.nn.attention.sdpa_kernel,
torch.backends.cuda.enable_flash_sdp / enable_mem_efficient_sdp / enable_math_sdp /
enable_cudnn_sdp), cuDNN's switches (torch.backends.cudnn.enabled / benchmark / deterministic)
and deterministic algorithms (torch.use_deterministic_algorithms, which makes cuBLAS refuse to
run without a CUBLAS_WORKSPACE_CONFIG of its own)."""

from __future__ import annotations

import os
from typing import Any, Dict, List

import torch

# PyTorch's SDPBackend values, as torch._C._get_sdp_priority_order() lists them
_BACKENDS = {0: "math", 1: "flash", 2: "efficient", 3: "cudnn"}
# Its default order (sdp_utils.cpp) where the release does not say
_DEFAULT_ORDER = (1, 2, 0, 3)
_ENABLED = {"flash": "_get_flash_sdp_enabled", "efficient": "_get_mem_efficient_sdp_enabled",
            "math": "_get_math_sdp_enabled", "cudnn": "_get_cudnn_sdp_enabled"}
# The configurations under which cuBLAS is deterministic (PyTorch's checkCuBLASConfigDeterministic)
_DETERMINISTIC_CUBLAS = (":4096:8", ":16:8")


class UserChoices:
    """What the script chose, asked by the kernels' rules; `finish()` adds the warnings of what
    the trace followed only in part."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.attention: Dict[str, int] = {}

    def attention_backends(self, prefers_cudnn: bool = False) -> List[str]:
        """The attention backends allowed, in the order PyTorch tries them; `prefers_cudnn`: on
        a card where PyTorch moves cuDNN's to the front of its default order."""
        order = [int(v) for v in
                 getattr(torch._C, "_get_sdp_priority_order", lambda: _DEFAULT_ORDER)()]
        if prefers_cudnn and tuple(order[:4]) == _DEFAULT_ORDER and 3 in order:
            order = [3] + [v for v in order if v != 3]
        allowed = []
        for value in order:
            name = _BACKENDS.get(int(value))
            getter = getattr(torch._C, _ENABLED.get(name or "", ""), None)
            if name is not None and (getter is None or getter()):
                allowed.append(name)
        return allowed

    def attention_ran(self, backend: str) -> None:
        self.attention[backend] = self.attention.get(backend, 0) + 1

    def math_reduces_in_low_precision(self) -> bool:
        """torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True): the math path keeps
        half inputs as they are instead of computing in float32."""
        getter = getattr(torch._C, "_get_math_sdp_allow_fp16_bf16_reduction", None)
        return bool(getter()) if getter is not None else False

    def convolution_table_applies(self) -> bool:
        """Whether the convolutions run cuDNN's heuristics' choice, which the table holds; the
        warning says what the trace leaves out otherwise."""
        cudnn = torch.backends.cudnn
        if not cudnn.enabled:
            self.tracer.warn_once(
                "cudnn disabled", "torch.backends.cudnn.enabled = False: convolutions run "
                "CUDA's own kernels, whose buffers (im2col columns) the trace leaves out")
            return False
        if cudnn.benchmark:
            self.tracer.warn_once(
                "cudnn benchmark", "torch.backends.cudnn.benchmark = True: at each new shape "
                "cuDNN tries its algorithms, each with its workspace, and keeps the fastest; the "
                "trace has the workspaces of the heuristics' choice (benchmark off)")
        if cudnn.deterministic or torch.are_deterministic_algorithms_enabled():
            self.tracer.warn_once(
                "cudnn deterministic", "deterministic cuDNN convolutions: the algorithms, and "
                "their workspaces, may differ from the heuristics' choice the trace has")
        return True

    def check_cublas(self, op: str) -> None:
        """use_deterministic_algorithms(True) makes a cuBLAS product raise, as on a GPU, without
        a deterministic CUBLAS_WORKSPACE_CONFIG (warn_only: a warning)."""
        if not torch.are_deterministic_algorithms_enabled():
            return
        if os.environ.get("CUBLAS_WORKSPACE_CONFIG", "") in _DETERMINISTIC_CUBLAS:
            return
        message = (f"{op}: deterministic algorithms are enabled and cuBLAS is deterministic "
                   "only with CUBLAS_WORKSPACE_CONFIG=:4096:8 or :16:8 (PyTorch raises this on "
                   "a GPU too)")
        if torch.is_deterministic_algorithms_warn_only_enabled():
            self.tracer.warn_once("deterministic cublas", message)
            return
        raise RuntimeError(message)

    def finish(self) -> None:
        """Warnings for the kernels chosen whose allocations the trace has only in part."""
        cudnn_calls = self.attention.get("cudnn", 0)
        if cudnn_calls and not self.tracer.card.prefers_cudnn_attention:
            self.tracer.warn_once(
                "cudnn attention", f"{cudnn_calls} attention call(s) ran cuDNN's attention "
                "(the script's choice of backends): its outputs are traced, its workspace as "
                "measured on sm90 cards, not on this one")
