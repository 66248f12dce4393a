#!/usr/bin/env python3
"""A real model trains a few steps twice on the GPU: once on PyTorch's own caching allocator, once
on allocsim's (liballocsim_torch.so through CUDAPluggableAllocator). Compares the two segment
sequences, and replays allocsim's recorded trace on the simulator to compare the peaks.

usage: tools/gpu/pluggable_demo.py BUILD_DIR OUT_DIR [--steps N] [--alloc-conf CONF]
Each run is its own process: an allocator can only be chosen before CUDA memory is used.
"""

import argparse
import json
import os
import pickle
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from allocsim import compact_trace  # noqa: E402
from allocsim import pluggable as allocsim_torch  # noqa: E402


def train(steps):
    """A small GPT-like model (embedding, 6 transformer layers, LM head) with AdamW, in bf16
    autocast: the request stream of a typical training step."""
    import torch

    torch.manual_seed(0)
    vocab, width, seq, batch = 8192, 512, 256, 16
    model = torch.nn.Sequential(
        torch.nn.Embedding(vocab, width),
        torch.nn.TransformerEncoder(
            torch.nn.TransformerEncoderLayer(width, 8, 4 * width, batch_first=True,
                                             norm_first=True), 6),
        torch.nn.Linear(width, vocab)).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    generator = torch.Generator(device="cuda").manual_seed(0)
    losses = []
    for _ in range(steps):
        tokens = torch.randint(0, vocab, (batch, seq + 1), device="cuda", generator=generator)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab),
                                                     tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    torch.cuda.synchronize()
    return losses


def worker(kind, build, out, steps):
    import torch

    result = {"kind": kind, "torch": torch.__version__, "device": None}
    if kind == "allocsim":
        lib = allocsim_torch.install(os.path.join(build, "liballocsim_torch.so"))
        result["losses"] = train(steps)
        trace = os.path.join(out, "allocsim_job.atrace")
        lib.save_trace(trace)
        stats = lib.stats()
        _, events = compact_trace.read_compact_trace(trace)
        result["device_ops"] = compact_trace.device_ops(events)
        result["peak_allocated_bytes"] = stats["memory_stats"]["allocated_bytes.all.peak"]
        result["peak_reserved_bytes"] = stats["memory_stats"]["reserved_bytes.all.peak"]
        result["events"] = stats["events"]
        result["device"] = stats["device"]
    else:
        torch.cuda.memory._record_memory_history(max_entries=10_000_000)
        result["losses"] = train(steps)
        snapshot = torch.cuda.memory._snapshot()
        with open(os.path.join(out, "native_job.pickle"), "wb") as f:
            pickle.dump(snapshot, f)
        result["device_ops"] = [(e["action"], e["size"]) for e in snapshot["device_traces"][0]
                                if e["action"] in allocsim_torch.DEVICE_OPS]
        result["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        result["events"] = len(snapshot["device_traces"][0])
        result["device"] = torch.cuda.get_device_name()
    with open(os.path.join(out, kind + ".json"), "w") as f:
        json.dump(result, f)


def replay_peaks(build, trace):
    report = subprocess.run([os.path.join(build, "allocsim"), "replay", trace, "--json", "-"],
                            capture_output=True, text=True)
    if report.returncode not in (0, 3):
        sys.exit(f"allocsim replay {trace} failed: {report.stderr.strip()}")
    stats = json.loads(report.stdout)["memory_stats"]
    return stats["allocated_bytes.all.peak"], stats["reserved_bytes.all.peak"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--alloc-conf", default="",
                        help="PYTORCH_CUDA_ALLOC_CONF for both runs (allocsim reads it too)")
    parser.add_argument("--worker", choices=["native", "allocsim"])
    args = parser.parse_args()
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = args.alloc_conf
    os.makedirs(args.out, exist_ok=True)
    if args.worker:
        worker(args.worker, args.build, args.out, args.steps)
        return 0
    for kind in ("native", "allocsim"):
        subprocess.run([sys.executable, __file__, args.build, args.out, "--steps",
                        str(args.steps), "--alloc-conf", args.alloc_conf, "--worker", kind],
                       check=True)
    runs = {}
    for kind in ("native", "allocsim"):
        with open(os.path.join(args.out, kind + ".json")) as f:
            runs[kind] = json.load(f)
    native, ours = runs["native"], runs["allocsim"]
    same_ops = native["device_ops"] == ours["device_ops"]
    first_diff = next((i for i, (a, b) in enumerate(zip(native["device_ops"], ours["device_ops"]))
                       if a != b), min(len(native["device_ops"]), len(ours["device_ops"])))
    replayed = replay_peaks(args.build, os.path.join(args.out, "allocsim_job.atrace"))
    native_replayed = replay_peaks(args.build, os.path.join(args.out, "native_job.pickle"))
    # The native request stream, small, beside allocsim's: to compare them request by request.
    subprocess.run([os.path.join(args.build, "allocsim"), "convert",
                    os.path.join(args.out, "native_job.pickle"),
                    os.path.join(args.out, "native_job.atrace")], check=True,
                   capture_output=True)
    summary = {
        "device": native["device"],
        "torch": native["torch"],
        "alloc_conf": args.alloc_conf,
        "steps": args.steps,
        "losses_equal": native["losses"] == ours["losses"],
        "segment_ops": {"native": len(native["device_ops"]), "allocsim": len(ours["device_ops"]),
                        "identical": same_ops,
                        "first_difference": None if same_ops else first_diff},
        "peaks": {
            "native": [native["peak_allocated_bytes"], native["peak_reserved_bytes"]],
            "allocsim_plugin": [ours["peak_allocated_bytes"], ours["peak_reserved_bytes"]],
            "allocsim_trace_replayed": list(replayed),
            "native_snapshot_replayed": list(native_replayed),
        },
    }
    summary["peaks_equal"] = len({tuple(p) for p in summary["peaks"].values()}) == 1
    with open(os.path.join(args.out, "pluggable_demo.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    return 0 if same_ops and summary["peaks_equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
