"""Records what cuDNN's recurrent kernels allocate through PyTorch's caching allocator on this
GPU, over random shapes: for each configuration (GRU, LSTM with and without projections, tanh
and ReLU RNNs; layers, directions, batch_first, dropout, packed sequences, float32, float16 and
bfloat16, training and inference), a forward and a backward, with every allocation and free made
inside each cuDNN op (_cudnn_rnn, _cudnn_rnn_backward, _cudnn_rnn_flatten_weight,
_cudnn_init_dropout_state) and the op's outputs' sizes.

usage: record_rnn_kernels.py OUT.json [CONFIGS] [SEED]
"""
import json
import random
import sys

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
OPS = {"_cudnn_rnn", "_cudnn_rnn_backward", "_cudnn_rnn_flatten_weight",
       "_cudnn_init_dropout_state"}


def trace_length():
    return len(torch.cuda.memory._snapshot()["device_traces"][0])


def nbytes(t):
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else None


class Capture(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in OPS:
            return func(*args, **(kwargs or {}))
        torch.cuda.synchronize()
        start = trace_length()
        out = func(*args, **(kwargs or {}))
        torch.cuda.synchronize()
        entries = torch.cuda.memory._snapshot()["device_traces"][0][start:]
        outs = out if isinstance(out, (tuple, list)) else (out,)
        flat = []
        for o in outs:
            flat.extend(o if isinstance(o, (list, tuple)) else [o])
        self.calls.append({
            "op": name,
            "events": [[e["action"], e["size"], e["addr"]] for e in entries
                       if e["action"] in ("alloc", "free_requested")],
            "outputs": [nbytes(o) for o in flat],
            "args": [list(a.shape) if isinstance(a, torch.Tensor) else
                     (a if isinstance(a, (int, float, bool, type(None))) else
                      ([list(x.shape) if isinstance(x, torch.Tensor) else x for x in a]
                       if isinstance(a, (list, tuple)) else str(a))) for a in args]})
        return out


def config(rng):
    mode = rng.choice(["GRU", "LSTM", "LSTM", "RNN_TANH", "RNN_RELU"])
    c = {"mode": mode, "input": rng.choice([16, 32, 64, 100, 128, 256, 512]),
         "hidden": rng.choice([32, 64, 96, 128, 200, 256, 512, 768, 1024]),
         "layers": rng.choice([1, 1, 2, 2, 3, 4]), "bidirectional": rng.random() < 0.4,
         "batch_first": rng.random() < 0.5, "seq": rng.choice([1, 5, 16, 33, 64, 128, 256]),
         "batch": rng.choice([1, 2, 7, 16, 32, 64, 128]),
         "dtype": rng.choice(["float32", "float32", "float16", "bfloat16"]),
         "train": rng.random() < 0.75, "packed": rng.random() < 0.2, "proj": 0, "dropout": 0.0}
    if mode == "LSTM" and rng.random() < 0.3:
        c["proj"] = rng.choice([16, 32, 64])
        c["proj"] = min(c["proj"], c["hidden"] - 1)
    if c["layers"] > 1 and rng.random() < 0.4:
        c["dropout"] = 0.1
    return c


def run(c):
    cls = {"GRU": nn.GRU, "LSTM": nn.LSTM}.get(c["mode"], nn.RNN)
    kwargs = dict(num_layers=c["layers"], bidirectional=c["bidirectional"],
                  batch_first=c["batch_first"], dropout=c["dropout"])
    if c["mode"].startswith("RNN_"):
        kwargs["nonlinearity"] = c["mode"][4:].lower()
    if c["proj"]:
        kwargs["proj_size"] = c["proj"]
    dtype = getattr(torch, c["dtype"])
    torch.cuda.memory._record_memory_history(context=None, max_entries=1000000,
                                             clear_history=True)
    capture = Capture()
    with capture:
        m = cls(c["input"], c["hidden"], **kwargs).to("cuda", dtype)
        m.train(c["train"])
        shape = (c["batch"], c["seq"], c["input"]) if c["batch_first"] else \
            (c["seq"], c["batch"], c["input"])
        x = torch.randn(shape, device="cuda", dtype=dtype, requires_grad=c["train"])
        if c["packed"]:
            lengths = sorted({max(1, c["seq"] - 3 * i) for i in range(c["batch"])}, reverse=True)
            lengths = (lengths * c["batch"])[:c["batch"]]
            lengths.sort(reverse=True)
            x = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=c["batch_first"])
        with torch.set_grad_enabled(c["train"]):
            y, _ = m(x)
            if c["packed"]:
                y = y.data
            if c["train"]:
                y.float().sum().backward()
    torch.cuda.memory._record_memory_history(enabled=None)
    del m, x, y
    return capture.calls


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    results = []
    for i in range(count):
        c = config(rng)
        try:
            calls = run(c)
        except Exception as e:  # a configuration PyTorch refuses: kept, with why
            calls = None
            c["error"] = f"{type(e).__name__}: {e}"[:300]
        results.append({"config": c, "calls": calls})
        torch.cuda.empty_cache()
    with open(out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "results": results}, f)
    print(f"{out}: {len(results)} configurations")


if __name__ == "__main__":
    main()
