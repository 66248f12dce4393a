"""Python-level replay of a trace's request stream on a GPU: each alloc is a torch.empty of its size
(uint8), each free_completed drops the tensor, as a training script's tensors come and go. Timed
around the loop only; the peer allocsim's replay is compared with in
docs/gpu_confirmation.md.
usage: python_replay_bench.py TRACE.pickle.gz [TRACE.pickle.gz ...]
Prints one JSON line per trace: its requests (alloc / free_completed / oom, as
replay_through_pytorch.py takes them) and trace events (events/s counts these, as allocsim's
benchmarks do), and the best of three passes each from an empty cache (cold: PyTorch pays every
cudaMalloc) and on the cache the pass before left (warm)."""
import gc
import gzip
import json
import os
import pickle
import sys
import time

import torch


def requests(path):
    """The trace's requests, and how many events the trace holds in all (allocsim's events/s count
    every event, free_requested and segment events included)."""
    with gzip.open(path) as f:
        trace = pickle.load(f)["device_traces"][0]
    return [(e["action"], e["addr"], e["size"]) for e in trace
            if e["action"] in ("alloc", "free_completed", "oom")], len(trace)


def one_pass(events):
    live = {}
    start = time.perf_counter()
    for action, addr, size in events:
        if action == "alloc":
            live[addr] = torch.empty(size, dtype=torch.uint8, device="cuda")
        elif action == "free_completed":
            live.pop(addr, None)
        else:  # an OOM the recorded run had: asked for again, and dropped
            try:
                del_me = torch.empty(size, dtype=torch.uint8, device="cuda")
                del del_me
            except torch.OutOfMemoryError:
                pass
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    live.clear()
    return seconds


def main():
    torch.cuda.init()
    gc.disable()  # the passes make no cycles; a collection inside one would time Python, not PyTorch
    for path in sys.argv[1:]:
        events, trace_events = requests(path)
        cold, warm = [], []
        for _ in range(3):
            torch.cuda.empty_cache()
            cold.append(one_pass(events))
            warm.append(one_pass(events))
        print(json.dumps({"trace": os.path.basename(path), "requests": len(events),
                          "trace_events": trace_events,
                          "cold_seconds": min(cold), "cold_events_per_s": trace_events / min(cold),
                          "warm_seconds": min(warm), "warm_events_per_s": trace_events / min(warm),
                          "torch": torch.__version__, "device": torch.cuda.get_device_name()}),
              flush=True)


if __name__ == "__main__":
    main()
