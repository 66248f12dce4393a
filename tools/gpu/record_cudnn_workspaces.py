"""Records what the convolutions of the sweep jobs (tools/sweep_jobs.py) allocate through
PyTorch's caching allocator on this GPU, for allocsim.trace's table of cuDNN workspaces: each
convolution op a job's step calls (forward, and backward with its output mask), captured once,
then run alone at every batch size asked for under the allocator's memory history — the first
call at that shape and a second — its allocations and frees in order.

usage: record_cudnn_workspaces.py OUTDIR MODEL:LOW-HIGH [MODEL:LOW-HIGH ...]
  writes OUTDIR/MODEL.json for each model as it is done
"""
import json
import os
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sweep_jobs import make_job  # noqa: E402

aten = torch.ops.aten
CONVOLUTIONS = {aten.convolution.default: "convolution",
                aten.convolution_backward.default: "convolution_backward"}


def describe(x):
    if isinstance(x, torch.Tensor):
        return {"shape": list(x.shape), "stride": list(x.stride()),
                "dtype": str(x.dtype).replace("torch.", "")}
    return x


class Capture(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in CONVOLUTIONS:
            call = [CONVOLUTIONS[func], [describe(a) for a in args]]
            self.calls.setdefault(json.dumps(call), call)
        return func(*args, **(kwargs or {}))


def _contiguous_strides(shape):
    strides, n = [], 1
    for d in reversed(shape):
        strides.insert(0, n)
        n *= d
    return strides


def _channels_last_strides(shape):
    n, c, h, w = shape
    return [h * w * c, 1, w * c, c]


def batched(arg, batch):
    """The tensor of `arg`'s description with its first dimension `batch`, its layout kept
    (contiguous, channels-last, or a view's strides as they were)."""
    shape = [batch] + arg["shape"][1:]
    dtype = getattr(torch, arg["dtype"])
    if arg["stride"] == _contiguous_strides(arg["shape"]):
        stride = _contiguous_strides(shape)
    elif len(shape) == 4 and arg["stride"] == _channels_last_strides(arg["shape"]):
        stride = _channels_last_strides(shape)
    else:  # a view (a slice of channels): its strides, the batch's too, are its base's
        stride = arg["stride"]
    return torch.empty_strided(shape, stride, dtype=dtype, device="cuda")


def measure(func, args):
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(context=None, max_entries=100000, clear_history=True)
    out = func(*args)
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    del out
    events, index = [], {}
    for e in snapshot["device_traces"][0]:
        if e["action"] == "alloc":
            index[e["addr"]] = sum(1 for x in events if x[0] == "a")
            events.append(["a", e["size"]])
        elif e["action"] == "free_requested" and e["addr"] in index:
            events.append(["f", index.pop(e["addr"])])
    return events


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for spec in sys.argv[2:]:
        entries = []
        model_name, batches = spec.split(":")
        low, high = (int(v) for v in batches.split("-"))
        torch.manual_seed(0)
        job = make_job(model_name, "batch", 2)
        job.prepare()
        capture = Capture()
        with capture:
            job.step()
        calls = list(capture.calls.values())
        print(f"{model_name}: {len(calls)} convolution calls", flush=True)
        for batch in range(low, high + 1):
            for name, described in calls:
                func = getattr(aten, name).default
                args = []
                for i, a in enumerate(described):
                    batch_dim = isinstance(a, dict) and (name == "convolution" and i == 0 or
                                                         name == "convolution_backward" and i < 2)
                    if isinstance(a, dict):
                        args.append(batched(a, batch) if batch_dim else
                                    batched(a, a["shape"][0]))
                    else:
                        args.append(a)
                key_args = [describe(a) for a in args]
                first = measure(func, args)
                again = measure(func, args)
                entries.append({"op": name, "args": key_args, "first": first, "again": again})
                del args
        with open(os.path.join(outdir, f"{model_name}.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "entries": entries}, f)
        print(f"{model_name}: batches {low}..{high} measured", flush=True)
        del job, capture
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
