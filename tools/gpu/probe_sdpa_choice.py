"""Which attention kernel PyTorch's scaled_dot_product_attention chooses on this GPU under each
of the user's switches (torch.backends.cuda.enable_*_sdp, sdpa_kernel), over dtypes, head sizes,
masks and grouped-query heads: torch._fused_sdp_choice's answer, and what the kernel allocates.
usage: probe_sdpa_choice.py OUT.json"""
import itertools
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

# a pybind11 enum in some releases (not iterable), an Enum in others: both have __members__
NAMES = {int(v): k for k, v in SDPBackend.__members__.items()}


def main():
    results = []
    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
                SDPBackend.CUDNN_ATTENTION]
    for dtype, head, mask, gqa, grad in itertools.product(
            ["float16", "bfloat16", "float32"], [64, 128, 256, 96], ["none", "bool", "float"],
            [False, True], [False, True]):
        dt = getattr(torch, dtype)
        b, h, t = 2, 8, 256
        q = torch.randn(b, h, t, head, device="cuda", dtype=dt, requires_grad=grad)
        kvh = 2 if gqa else h
        k = torch.randn(b, kvh, t, head, device="cuda", dtype=dt, requires_grad=grad)
        v = torch.randn(b, kvh, t, head, device="cuda", dtype=dt, requires_grad=grad)
        m = None
        if mask == "bool":
            m = torch.ones(t, t, device="cuda", dtype=torch.bool).tril()
        elif mask == "float":
            m = torch.zeros(b, 1, t, t, device="cuda", dtype=dt)
        for enabled in itertools.chain.from_iterable(
                itertools.combinations(backends, n) for n in range(1, 5)):
            with sdpa_kernel(list(enabled)):
                try:
                    choice = torch._fused_sdp_choice(q, k, v, m, 0.0, False, enable_gqa=gqa)
                    choice = NAMES.get(int(choice), str(choice))
                except Exception as e:
                    choice = f"error: {type(e).__name__}"
            results.append({"dtype": dtype, "head": head, "mask": mask, "gqa": gqa, "grad": grad,
                            "enabled": [x.name for x in enabled], "choice": choice})
    with open(sys.argv[1], "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                   "order": list(torch._C._get_sdp_priority_order()), "results": results}, f)
    print(f"{sys.argv[1]}: {len(results)} choices")


if __name__ == "__main__":
    main()
