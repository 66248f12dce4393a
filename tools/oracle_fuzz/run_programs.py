"""Runs allocation programs (programs.py) through PyTorch's real CUDA caching allocator and records
each: NAME.pickle.gz (the memory snapshot with its history) and NAME.json (PyTorch's statistics and
OOMs), in the layout of workloads/ (workloads/README.md).

One process serves many programs under the PYTORCH_CUDA_ALLOC_CONF it was started with: it reads one
JSON request a line from stdin ({"name", "program", "cap", "outdir"}) and answers one JSON line.
Between programs every tensor and graph is dropped, the cache emptied and the statistics and history
reset, so each recording starts from an empty allocator. A process that has set a cap keeps one
(PyTorch cannot unset it): the driver runs capped and uncapped programs in separate processes.

usage: python3 run_programs.py   (requests on stdin)
"""
import gc, gzip, json, os, pickle, sys, warnings

import torch

warnings.filterwarnings("ignore")
torch.cuda.init()
FREE0, TOTAL = torch.cuda.mem_get_info()
STREAMS = [torch.cuda.default_stream()] + [torch.cuda.Stream() for _ in range(3)]
# Counters that reset_accumulated_memory_stats() may leave: a recording's are taken from here.
ACCUMULATED = ("allocated", "freed", "num_")


def start_history():
    try:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                 clear_history=True)
    except TypeError:
        torch.cuda.memory._record_memory_history(enabled=None)
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python")


def run(program, cap):
    """Runs `program`; returns the OOMs ({"op", "message"}) and the empty_cache() calls that gave
    nothing back to the device (they leave no trace entry, yet count a synchronisation)."""
    tensors, graphs, capturing = {}, {}, None
    ooms, silent_empty_caches = [], 0
    for i, op in enumerate(program):
        kind = op[0]
        if kind == "alloc":
            _, tid, size, s = op
            stream = STREAMS[capturing[1] if capturing else s]
            try:
                with torch.cuda.stream(stream):
                    tensors[tid] = torch.empty(size, dtype=torch.uint8, device="cuda")
            except torch.OutOfMemoryError as e:
                ooms.append({"op": i, "message": str(e)})
                for victim in sorted(tensors)[::2]:  # the job's recovery: half of what it holds
                    del tensors[victim]
        elif kind == "free":
            tensors.pop(op[1], None)
        elif kind == "record":
            t = tensors.get(op[1])
            if t is not None and capturing is None:
                t.record_stream(STREAMS[op[2]])
        elif kind == "empty_cache":
            before = torch.cuda.memory_stats().get("num_device_free", 0)
            torch.cuda.empty_cache()
            if torch.cuda.memory_stats().get("num_device_free", 0) == before:
                silent_empty_caches += 1
        elif kind == "capture":
            _, gid, s, share = op
            g = torch.cuda.CUDAGraph()
            pool = graphs[share].pool() if share in graphs else None
            with torch.cuda.stream(STREAMS[s]):
                g.capture_begin(pool=pool) if pool is not None else g.capture_begin()
            graphs[gid] = g
            capturing = (gid, s)
        elif kind == "end_capture":
            if capturing:
                with torch.cuda.stream(STREAMS[capturing[1]]):
                    graphs[capturing[0]].capture_end()
            capturing = None
        elif kind == "drop_graph":
            graphs.pop(op[1], None)
    return tensors, graphs, ooms, silent_empty_caches


def record(req):
    name, program, cap, outdir = req["name"], req["program"], req["cap"], req["outdir"]
    if cap:
        torch.cuda.set_per_process_memory_fraction(cap / TOTAL)
    start = torch.cuda.memory_stats()
    start_history()
    tensors, graphs, ooms, silent = run(program, cap)
    snap = torch.cuda.memory._snapshot()
    stats = torch.cuda.memory_stats()
    summary = torch.cuda.memory_summary()
    torch.cuda.memory._record_memory_history(enabled=None)
    # counters as if the allocator had started with this program
    stats = {k: v - start.get(k, 0) if any(a in k for a in ACCUMULATED) else v
             for k, v in stats.items()}
    meta = {"name": name, "program": program, "cap_bytes": cap, "total_bytes": TOTAL,
            "free_bytes_at_start": FREE0, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "torch": torch.__version__, "device": torch.cuda.get_device_name(),
            "memory_stats": stats, "memory_summary": summary,
            "oom": ooms[-1]["message"] if ooms else None, "ooms": ooms,
            "empty_cache_calls_without_trace_entry": silent}
    # back to an empty allocator for the next program
    del tensors, graphs
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_accumulated_memory_stats()
    meta["clean_after"] = torch.cuda.memory_reserved() == 0
    os.makedirs(outdir, exist_ok=True)
    with gzip.open(os.path.join(outdir, name + ".pickle.gz"), "wb", compresslevel=6) as f:
        pickle.dump(snap, f)
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1)
    return {"name": name, "ooms": len(ooms), "clean_after": meta["clean_after"]}


def main():
    for line in sys.stdin:
        req = json.loads(line)
        try:
            answer = record(req)
        except Exception as e:  # the driver lists it and goes on
            answer = {"name": req["name"], "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
