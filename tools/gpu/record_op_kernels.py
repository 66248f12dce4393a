"""Records what CUDA kernels allocate through PyTorch's caching allocator on this GPU, over
random shapes of each op family, for fitting the tracer's kernel rules on shapes rather than on
networks: convolutions (1d/2d/3d, transposed, grouped and depthwise, strides, dilations,
channels_last, float32/float16/bfloat16, with and without bias, each backward output mask),
norms (layer, group, batch, RMS), reductions and softmax, embedding backward, cross_entropy,
index and scatter ops, sorting, attention (each SDPA backend, masks, dropout, grouped-query
heads) and the optimizers (for-each and fused). For every aten op a configuration runs, the
allocations and frees made between the op's entry and exit (the allocator's own trace, in
order: ["a", bytes] and ["f", index of the allocation freed]) and the bytes of its outputs.

usage: record_op_kernels.py OUT.json.gz [CONFIGS_PER_FAMILY] [SEED] [FAMILY ...]
"""
import contextlib
import gzip
import json
import random
import sys

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode


def describe(x):
    if isinstance(x, torch.Tensor):
        return {"shape": list(x.shape), "stride": list(x.stride()),
                "dtype": str(x.dtype).replace("torch.", "")}
    if isinstance(x, (list, tuple)):
        return [describe(v) for v in x]
    if isinstance(x, (int, float, bool, type(None))):
        return x
    return str(x)


def flat_tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in flat_tensors(v)]
    return []


class Capture(TorchDispatchMode):
    """Each aten op with the allocator's trace entries made while it ran."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if DEVICE == "cpu":
            return func(*args, **kwargs)
        torch.cuda.synchronize()
        start = len(torch.cuda.memory._snapshot()["device_traces"][0])
        out = func(*args, **kwargs)
        torch.cuda.synchronize()
        entries = torch.cuda.memory._snapshot()["device_traces"][0][start:]
        events, index = [], {}
        for e in entries:
            if e["action"] == "alloc":
                index[e["addr"]] = sum(1 for x in events if x[0] == "a")
                events.append(["a", e["size"]])
            elif e["action"] == "free_requested" and e["addr"] in index:
                events.append(["f", index.pop(e["addr"])])
        self.calls.append({"op": str(func), "args": describe(list(args)),
                           "kwargs": {k: describe(v) for k, v in kwargs.items()},
                           "events": events,
                           "outputs": [t.untyped_storage().nbytes() for t in flat_tensors(out)
                                       if t.device.type == "cuda"]})
        return out


DTYPES = ["float32", "float32", "float16", "bfloat16"]
# Without a GPU the configurations still run (on the CPU, nothing recorded): a check of the
# generator and the runners before a GPU is spent on them.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
LIMIT = 2**27  # elements of the largest tensor a configuration makes


def fit(shape, limit=LIMIT):
    """`shape` with its first dimension halved until the tensor has at most `limit` elements."""
    shape = list(shape)
    while shape[0] > 1 and _numel(shape) > limit:
        shape[0] //= 2
    return shape


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def pick(rng, values):
    return rng.choice(values)


def conv(rng):
    dim = pick(rng, [1, 2, 2, 2, 3])
    transposed = rng.random() < 0.2
    cin = pick(rng, [1, 3, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512])
    cout = pick(rng, [8, 16, 32, 64, 96, 128, 256, 384, 512])
    groups = 1
    r = rng.random()
    if r < 0.2:
        groups, cout = cin, cin * pick(rng, [1, 1, 2])  # depthwise
    elif r < 0.3 and cin % 4 == 0 and cout % 4 == 0:
        groups = pick(rng, [2, 4])
    kernel = pick(rng, [1, 3, 3, 5, 7]) if dim < 3 else pick(rng, [1, 3])
    stride = pick(rng, [1, 1, 2])
    dilation = pick(rng, [1, 1, 1, 2])
    padding = (kernel // 2) * dilation
    size = {1: [16, 50, 100, 256, 1000, 3000], 2: [7, 14, 28, 32, 56, 64, 112, 224],
            3: [4, 8, 16, 32]}[dim]
    spatial = [pick(rng, size)] * dim
    if dim == 2 and rng.random() < 0.3:
        spatial[1] = pick(rng, size)
    batch = fit([pick(rng, [1, 2, 4, 8, 16, 32, 64]), max(cin, cout)] + spatial, LIMIT // 4)[0]
    return {"family": "conv", "dim": dim, "transposed": transposed, "in": cin, "out": cout,
            "groups": groups, "kernel": kernel, "stride": stride, "dilation": dilation,
            "padding": padding, "spatial": spatial, "batch": batch, "dtype": pick(rng, DTYPES),
            "bias": rng.random() < 0.6, "channels_last": dim > 1 and rng.random() < 0.3,
            "input_grad": rng.random() < 0.8, "weight_grad": rng.random() < 0.9,
            "train": rng.random() < 0.8}


def run_conv(c):
    dtype = getattr(torch, c["dtype"])
    x = torch.randn([c["batch"], c["in"]] + c["spatial"], device=DEVICE, dtype=dtype)
    if c["channels_last"]:
        x = x.to(memory_format=torch.channels_last if c["dim"] == 2 else
                 torch.channels_last_3d)
    if c["transposed"]:
        w = torch.randn([c["in"], c["out"] // c["groups"]] + [c["kernel"]] * c["dim"],
                        device=DEVICE, dtype=dtype)
    else:
        w = torch.randn([c["out"], c["in"] // c["groups"]] + [c["kernel"]] * c["dim"],
                        device=DEVICE, dtype=dtype)
    b = torch.randn(c["out"], device=DEVICE, dtype=dtype) if c["bias"] else None
    train = c["train"]
    x.requires_grad_(train and c["input_grad"])
    w.requires_grad_(train and c["weight_grad"])
    fn = {(False, 1): F.conv1d, (False, 2): F.conv2d, (False, 3): F.conv3d,
          (True, 1): F.conv_transpose1d, (True, 2): F.conv_transpose2d,
          (True, 3): F.conv_transpose3d}[(c["transposed"], c["dim"])]
    kwargs = dict(stride=c["stride"], padding=c["padding"], dilation=c["dilation"],
                  groups=c["groups"])
    if c["transposed"]:
        kwargs["output_padding"] = 0
    with Capture() as capture:
        y = fn(x, w, b, **kwargs)
        if x.requires_grad or w.requires_grad:
            y.backward(torch.ones_like(y))
    return capture.calls


def norm(rng):
    kind = pick(rng, ["layer", "group", "batch", "rms"])
    return {"family": "norm", "kind": kind, "batch": pick(rng, [1, 4, 16, 64, 256, 2048, 16384]),
            "features": pick(rng, [32, 64, 256, 768, 1024, 4096]),
            "spatial": pick(rng, [1, 7, 16, 56]) if kind in ("group", "batch") else 1,
            "groups": pick(rng, [1, 8, 32]), "dtype": pick(rng, DTYPES),
            "affine": rng.random() < 0.8, "train": rng.random() < 0.8}


def run_norm(c):
    dtype = getattr(torch, c["dtype"])
    shape = fit([c["batch"], c["features"]] + ([c["spatial"]] * 2 if c["spatial"] > 1 else []))
    c["batch"] = shape[0]
    x = torch.randn(shape, device=DEVICE, dtype=dtype, requires_grad=c["train"])
    f = c["features"]
    w = torch.randn(f, device=DEVICE, dtype=dtype, requires_grad=c["train"]) \
        if c["affine"] else None
    b = torch.randn(f, device=DEVICE, dtype=dtype, requires_grad=c["train"]) \
        if c["affine"] else None
    with Capture() as capture:
        if c["kind"] == "layer":
            y = F.layer_norm(x, x.shape[-1:], w, b)
        elif c["kind"] == "rms":
            y = F.rms_norm(x, x.shape[-1:], w)
        elif c["kind"] == "group":
            groups = c["groups"] if f % c["groups"] == 0 else 1
            y = F.group_norm(x, groups, w, b)
        else:
            mean = torch.zeros(f, device=DEVICE, dtype=dtype if dtype == torch.float32
                               else torch.float32)
            var = torch.ones_like(mean)
            y = F.batch_norm(x, mean, var, w, b, training=c["train"])
        if c["train"]:
            y.float().sum().backward()
    return capture.calls


def reduction(rng):
    return {"family": "reduction",
            "op": pick(rng, ["sum", "mean", "amax", "var", "softmax", "log_softmax", "norm",
                             "argmax", "cumsum", "logsumexp"]),
            "shape": [pick(rng, [1, 3, 64, 1000, 4096, 65536]),
                      pick(rng, [1, 7, 128, 1024, 50257, 262144])],
            "dim": pick(rng, [0, 1, None]), "dtype": pick(rng, DTYPES),
            "train": rng.random() < 0.5}


def run_reduction(c):
    dtype = getattr(torch, c["dtype"])
    c["shape"] = fit(c["shape"])
    x = torch.randn(c["shape"], device=DEVICE, dtype=dtype,
                    requires_grad=c["train"] and c["op"] not in ("argmax",))
    dim = c["dim"]
    with Capture() as capture:
        op = c["op"]
        if op in ("softmax", "log_softmax", "cumsum"):
            y = getattr(torch, op)(x, dim=1 if dim is None else dim)
        elif op == "argmax":
            y = x.argmax() if dim is None else x.argmax(dim)
        elif op == "logsumexp":
            y = x.logsumexp(dim=1 if dim is None else dim)
        elif op == "norm":
            y = x.norm() if dim is None else x.norm(dim=dim)
        else:
            y = getattr(x, op)() if dim is None else getattr(x, op)(dim)
        if x.requires_grad:
            y.float().sum().backward()
    return capture.calls


def embedding(rng):
    return {"family": "embedding", "num": pick(rng, [100, 1000, 32000, 50257, 128256]),
            "dim": pick(rng, [16, 64, 256, 768, 4096]),
            "indices": [pick(rng, [1, 8, 32, 128]), pick(rng, [1, 64, 512, 2048])],
            "dtype": pick(rng, DTYPES), "padding_idx": rng.random() < 0.2,
            "scale_grad": rng.random() < 0.1, "sparse": False}


def run_embedding(c):
    dtype = getattr(torch, c["dtype"])
    w = torch.randn(c["num"], c["dim"], device=DEVICE, dtype=dtype, requires_grad=True)
    idx = torch.randint(0, c["num"], c["indices"], device=DEVICE)
    with Capture() as capture:
        y = F.embedding(idx, w, padding_idx=0 if c["padding_idx"] else None,
                        scale_grad_by_freq=c["scale_grad"])
        y.float().sum().backward()
    return capture.calls


def cross_entropy(rng):
    return {"family": "cross_entropy", "rows": pick(rng, [1, 16, 512, 4096, 16384]),
            "classes": pick(rng, [2, 10, 1000, 32000, 50257, 128256]),
            "dtype": pick(rng, DTYPES), "smoothing": pick(rng, [0.0, 0.0, 0.1]),
            "ignore": rng.random() < 0.3, "reduction": pick(rng, ["mean", "mean", "sum", "none"])}


def run_cross_entropy(c):
    dtype = getattr(torch, c["dtype"])
    c["rows"] = fit([c["rows"], c["classes"]])[0]
    x = torch.randn(c["rows"], c["classes"], device=DEVICE, dtype=dtype, requires_grad=True)
    t = torch.randint(0, c["classes"], (c["rows"],), device=DEVICE)
    if c["ignore"]:
        t[::3] = -100
    with Capture() as capture:
        loss = F.cross_entropy(x, t, label_smoothing=c["smoothing"], reduction=c["reduction"])
        loss.float().sum().backward()
    return capture.calls


def indexing(rng):
    return {"family": "indexing",
            "op": pick(rng, ["index_select", "gather", "scatter_add", "index_add", "nonzero",
                             "masked_select", "unique", "sort", "topk", "index_put",
                             "boolean_index", "argsort", "bincount"]),
            "rows": pick(rng, [16, 1000, 65536, 1048576]), "cols": pick(rng, [1, 16, 256]),
            "dtype": pick(rng, DTYPES), "train": rng.random() < 0.5}


def run_indexing(c):
    dtype = getattr(torch, c["dtype"])
    n, m = c["rows"], c["cols"]
    x = torch.randn(n, m, device=DEVICE, dtype=dtype,
                    requires_grad=c["train"] and c["op"] in ("index_select", "gather",
                                                            "boolean_index", "topk", "sort"))
    idx = torch.randint(0, n, (max(1, n // 2),), device=DEVICE)
    op = c["op"]
    with Capture() as capture:
        if op == "index_select":
            y = x.index_select(0, idx)
        elif op == "gather":
            y = x.gather(0, idx[:, None].expand(-1, m).contiguous())
        elif op == "scatter_add":
            y = torch.zeros_like(x).scatter_add(0, idx[:, None].expand(-1, m).contiguous(),
                                                x[:idx.numel()])
        elif op == "index_add":
            y = torch.zeros_like(x).index_add(0, idx, x[:idx.numel()])
        elif op == "nonzero":
            y = (x > 0).nonzero()
        elif op == "masked_select":
            y = x.masked_select(x > 0)
        elif op == "unique":
            y = torch.unique(idx, return_counts=True)[0]
        elif op == "sort":
            y = x.sort(dim=0)[0]
        elif op == "argsort":
            y = x.argsort(dim=0)
        elif op == "topk":
            y = x.topk(min(5, n), dim=0)[0]
        elif op == "index_put":
            y = x.detach().clone().index_put_((idx,), torch.zeros(idx.numel(), m, device=DEVICE,
                                                                  dtype=dtype),
                                              accumulate=True)
        elif op == "bincount":
            y = torch.bincount(idx)
        else:
            y = x[x[:, 0] > 0]
        if x.requires_grad and y.requires_grad:
            y.float().sum().backward()
    return capture.calls


def attention(rng):
    return {"family": "attention",
            "backend": pick(rng, ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH",
                                  "CUDNN_ATTENTION", "default"]),
            "batch": pick(rng, [1, 2, 8, 32]), "heads": pick(rng, [1, 4, 8, 12, 16]),
            "seq": pick(rng, [16, 128, 512, 1024, 2048]), "kv_seq": None,
            "head_dim": pick(rng, [32, 64, 64, 80, 128, 256]),
            "dtype": pick(rng, ["float16", "bfloat16", "bfloat16", "float32"]),
            "mask": pick(rng, ["none", "none", "causal", "bool", "float"]),
            "dropout": pick(rng, [0.0, 0.0, 0.1]), "gqa": rng.random() < 0.2,
            "train": rng.random() < 0.7}


def run_attention(c):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    dtype = getattr(torch, c["dtype"])
    b, h, t, d = c["batch"], c["heads"], c["seq"], c["head_dim"]
    kvh = max(1, h // 4) if c["gqa"] and h % 4 == 0 else h
    q = torch.randn(b, h, t, d, device=DEVICE, dtype=dtype, requires_grad=c["train"])
    k = torch.randn(b, kvh, t, d, device=DEVICE, dtype=dtype, requires_grad=c["train"])
    v = torch.randn(b, kvh, t, d, device=DEVICE, dtype=dtype, requires_grad=c["train"])
    mask = None
    if c["mask"] == "bool":
        mask = torch.ones(t, t, device=DEVICE, dtype=torch.bool).tril()
    elif c["mask"] == "float":
        mask = torch.zeros(b, 1, t, t, device=DEVICE, dtype=dtype)
    chosen = contextlib.nullcontext() if c["backend"] == "default" else \
        sdpa_kernel([getattr(SDPBackend, c["backend"])])
    with chosen, Capture() as capture:
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=c["dropout"],
                                           is_causal=c["mask"] == "causal",
                                           enable_gqa=kvh != h)
        if c["train"]:
            y.backward(torch.ones_like(y))
    return capture.calls


def optimizer(rng):
    return {"family": "optimizer", "kind": pick(rng, ["Adam", "AdamW", "SGD", "Adagrad",
                                                      "RMSprop"]),
            "impl": pick(rng, ["foreach", "fused", "for-loop"]),
            "params": [pick(rng, [10, 1000, 65536, 1048576, 4194304])
                       for _ in range(pick(rng, [1, 3, 10, 40]))],
            "dtype": pick(rng, ["float32", "float32", "bfloat16"]),
            "steps": 2, "amsgrad": rng.random() < 0.1}


def run_optimizer(c):
    dtype = getattr(torch, c["dtype"])
    params = [torch.randn(n, device=DEVICE, dtype=dtype, requires_grad=True)
              for n in c["params"]]
    for p in params:  # gradients as a backward leaves them
        p.grad = torch.randn_like(p)
    kwargs = {}
    if c["impl"] == "fused" and c["kind"] in ("Adam", "AdamW", "SGD", "Adagrad"):
        kwargs["fused"] = True
    elif c["impl"] == "foreach":
        kwargs["foreach"] = True
    else:
        kwargs["foreach"] = False
    if c["kind"] in ("Adam", "AdamW") and c["amsgrad"]:
        kwargs["amsgrad"] = True
    if c["kind"] == "SGD":
        kwargs["momentum"] = 0.9
    opt = getattr(torch.optim, c["kind"])(params, lr=1e-3, **kwargs)
    with Capture() as capture:
        for _ in range(c["steps"]):
            opt.step()
    return capture.calls


FAMILIES = {"conv": (conv, run_conv), "norm": (norm, run_norm),
            "reduction": (reduction, run_reduction), "embedding": (embedding, run_embedding),
            "cross_entropy": (cross_entropy, run_cross_entropy),
            "indexing": (indexing, run_indexing), "attention": (attention, run_attention),
            "optimizer": (optimizer, run_optimizer)}


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    families = sys.argv[4:] or list(FAMILIES)
    results = []
    for family in families:
        make, run = FAMILIES[family]
        for _ in range(count):
            c = make(rng)
            if DEVICE == "cuda":
                torch.cuda.memory._record_memory_history(context=None, max_entries=1000000,
                                                         clear_history=True)
            try:
                calls = run(c)
            except Exception as e:  # a configuration PyTorch refuses: kept, with why
                calls = None
                c["error"] = f"{type(e).__name__}: {e}"[:300]
            if DEVICE == "cuda":
                torch.cuda.memory._record_memory_history(enabled=None)
                torch.cuda.empty_cache()
            results.append({"config": c, "calls": calls})
        print(f"{family}: {count} configurations", flush=True)
    card = {}
    if DEVICE == "cuda":
        props = torch.cuda.get_device_properties(0)
        card = {"device": torch.cuda.get_device_name(), "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(),
                "capability": list(torch.cuda.get_device_capability()),
                "multiprocessors": props.multi_processor_count,
                "threads_per_multiprocessor": getattr(props, "max_threads_per_multi_processor",
                                                      None)}
    with gzip.open(out, "wt") as f:
        json.dump({**card, "torch": torch.__version__, "results": results}, f)
    print(f"{out}: {len(results)} configurations")


if __name__ == "__main__":
    main()
