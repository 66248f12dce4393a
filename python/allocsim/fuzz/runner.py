"""Runs allocation programs (programs.py) through PyTorch's real CUDA caching allocator and records
each: NAME.pickle.gz (the memory snapshot with its history) and NAME.json (PyTorch's statistics and
OOMs), in the layout of workloads/ (workloads/README.md).

One process serves many programs under the PYTORCH_CUDA_ALLOC_CONF it was started with: it reads one
JSON request a line from stdin ({"name", "program", "cap", "outdir"}) and answers one JSON line.
Between programs every tensor and graph is dropped, the cache emptied and the statistics and history
reset, so each recording starts from an empty allocator. A process that has set a cap keeps one
(PyTorch cannot unset it): the driver runs capped and uncapped programs in separate processes.

usage: python -m allocsim.fuzz.runner   (requests on stdin; the driver starts it)
"""
import gc, gzip, inspect, json, os, pickle, random, sys, warnings

import torch

from ..recorder import record_memory_history, snapshot

warnings.filterwarnings("ignore")
torch.cuda.init()
FREE0, TOTAL = torch.cuda.mem_get_info()
DEVICES = torch.cuda.device_count()
# Each device's default stream and three side streams: STREAMS[device][stream].
STREAMS = [[torch.cuda.default_stream(d)] + [torch.cuda.Stream(d) for _ in range(3)]
           for d in range(DEVICES)]
# Counters that reset_accumulated_memory_stats() may leave: a recording's are taken from here.
ACCUMULATED = ("allocated", "freed", "num_")


def start_history():
    """Through allocsim's recorder: every empty_cache(), limit change, stats reset and capture's
    pool is marked in the trace entries' user_metadata (compare.py --without-marks replays the
    same recording as PyTorch's own recorder would have written it)."""
    record_memory_history(enabled="all", context=None, stacks="python", clear_history=True)


# Under a cap, PyTorch's malloc during a capture may free segments (release_available_cached_blocks
# with max_split_size_mb, garbage collection), which a capture does not permit: the capture fails.
# A job avoids that by capturing well below its cap; so do these programs, where the settings free so.
CONF = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")


def frees_in_malloc(conf):
    return "max_split_size_mb" in conf or "garbage_collection_threshold" in conf


FREES_IN_MALLOC = [frees_in_malloc(CONF)]  # as the settings in force now have it


def set_allocator_settings(text):
    """The allocator settings set at run time, through the release's own entry point (the
    recorder wraps both)."""
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    if setter is None:
        setter = torch.cuda.memory._set_allocator_settings
    setter(text)
    FREES_IN_MALLOC[0] = frees_in_malloc(text)


# The settings each program starts from: the process's own, with expandable segments as the
# environment set them (a string that does not name them leaves them as they were).
START_SETTINGS = CONF if "expandable_segments" in CONF else \
    ",".join(filter(None, [CONF, "expandable_segments:False"]))


def device_frees(d):
    return torch.cuda.memory_stats(d).get("num_device_free", 0)


def device_allocs(d):
    return torch.cuda.memory_stats(d).get("num_device_alloc", 0)


def devices_used(program):
    """The devices a program's requests may reach: device 0 and every one it switches to."""
    return sorted({0} | {op[1] for op in program if op[0] == "device"})


def device_of(tensor):
    return tensor.device_index if isinstance(tensor, RawBlock) else tensor.device.index


def stream_of(tensor, s):
    """Stream `s` of the device `tensor` lives on."""
    return STREAMS[device_of(tensor)][s]


def run(program, cap, used):
    """Runs `program`. Returns its tensors and graphs, its OOMs ({"op", "message", "device"}) and
    two counts of empty_cache() calls the trace cannot tell, by device (each call empties every
    device's cache): those that gave nothing back to the device (no trace entry there, yet a
    synchronisation), and those whose releases came right before an allocation that took a new
    segment or ran out of memory (the malloc's own retry frees the same). `used`: the devices
    the program reaches (devices_used)."""
    tensors, graphs, pools, capturing = {}, {}, {}, None
    mem_pools, in_pool = {}, None  # MemPools by pid; the use_mem_pool block open
    # The device each graph was captured on and each MemPool made on: a pool serves its own
    # device's requests (PyTorch 2.11 asserts where a pool handle goes to another device's
    # capture, or a MemPool to another device's use_mem_pool, more than once).
    graph_device, pool_device = {}, {}
    caps = {}  # the cap each device has now, where the program set one
    ooms, silent, like_a_retry = [], {}, {}
    # the devices whose last trace entry was an empty_cache()'s release
    released_just_before = set()
    recovery, rng, calls = "every_second", random.Random(0), {}
    refusals = [0]  # retries and OOMs, whatever reset_accumulated_memory_stats() zeroed
    dev = 0  # the current device
    reset_on = set()  # the devices whose accumulated statistics the program reset
    torch.cuda.set_device(0)
    if cap:
        caps = {d: cap for d in used}
    for i, op in enumerate(program):
        kind = op[0]
        if kind != "alloc" and kind in CALLS:
            calls[kind] = calls.get(kind, 0) + 1
        if kind == "alloc":
            tid, size, s = op[1:4]
            stream = STREAMS[dev][capturing[1] if capturing else s]
            if capturing and caps.get(dev) and FREES_IN_MALLOC[0] and \
                    torch.cuda.memory_reserved(dev) + 2 * size + 64 * 2**20 > caps[dev] // 3:
                continue
            before = device_allocs(dev) if dev in released_just_before else None
            try:
                with torch.cuda.stream(stream):
                    tensors[tid] = RawBlock(size, stream, dev) if op[4:] == ["raw"] else \
                        torch.empty(size, dtype=torch.uint8, device=f"cuda:{dev}")
                if before is not None and device_allocs(dev) != before:
                    like_a_retry[dev] = like_a_retry.get(dev, 0) + 1
            except (torch.OutOfMemoryError, RawBlock.OutOfMemory) as e:
                if before is not None:
                    like_a_retry[dev] = like_a_retry.get(dev, 0) + 1
                ooms.append({"op": i, "message": str(e), "device": dev})
                for victim in recover(recovery, sorted(tensors), rng):
                    del tensors[victim]
            released_just_before.discard(dev)
        elif kind == "device":
            dev = op[1]
            torch.cuda.set_device(dev)
        elif kind == "recovery":
            recovery, rng = op[1], random.Random(op[2])
        elif kind == "sync":
            if capturing is None:  # a capture does not permit it
                torch.cuda.synchronize(dev)
        elif kind == "wait":
            if capturing is None:
                STREAMS[dev][op[1]].wait_stream(STREAMS[dev][op[2]])
        elif kind == "settings":
            if capturing is None:
                set_allocator_settings(op[1])
        elif kind == "set_cap":
            if capturing is None:
                torch.cuda.set_per_process_memory_fraction(op[1] / TOTAL, dev)
                caps[dev] = op[1]
        elif kind == "reset_peak":
            torch.cuda.reset_peak_memory_stats(dev)
        elif kind == "reset_accumulated":
            refusals[0] += retries_and_ooms(dev)  # counted before the reset zeroes them
            reset_on.add(dev)
            torch.cuda.reset_accumulated_memory_stats(dev)
        elif kind == "free":
            if op[1] in tensors:
                released_just_before.discard(device_of(tensors.pop(op[1])))
        elif kind == "record":
            # No local name for the tensor: one would keep it alive past its "free".
            if op[1] in tensors and capturing is None and \
                    hasattr(tensors[op[1]], "record_stream"):
                tensors[op[1]].record_stream(stream_of(tensors[op[1]], op[2]))
        elif kind == "empty_cache":
            before = {d: device_frees(d) for d in used}
            torch.cuda.empty_cache()
            for d in used:
                if device_frees(d) == before[d]:
                    silent[d] = silent.get(d, 0) + 1
                else:
                    released_just_before.add(d)
        elif kind == "capture":
            _, gid, s, share = op
            # The pool by a handle made first (a live graph's to share it), so that its id is
            # known while the capture is underway (CUDAGraph.pool() answers only after it).
            pools[gid] = pools[share] if share in graphs and graph_device[share] == dev \
                else torch.cuda.graph_pool_handle()
            graph_device[gid] = dev
            # No local name for the graph: one would keep it alive past its "drop_graph". The
            # recorder marks the capture's pool (its capture_begin names it in the metadata).
            graphs[gid] = torch.cuda.CUDAGraph()
            released_just_before.clear()
            try:
                with torch.cuda.stream(STREAMS[dev][s]):
                    graphs[gid].capture_begin(pool=pools[gid])
            except torch.OutOfMemoryError as e:
                # capture_begin registers the graph with the RNG before it allocates the seed
                # and offset that ran out: deleting such a graph aborts the process
                # (~CUDAGraph), so it is kept until the worker exits. The capture's requests
                # run outside any capture.
                UNDELETABLE.append(graphs.pop(gid))
                ooms.append({"op": i, "message": str(e), "device": dev})
                for victim in recover(recovery, sorted(tensors), rng):
                    del tensors[victim]
                continue
            capturing = (gid, s)
        elif kind == "end_capture":
            if capturing:
                with torch.cuda.stream(STREAMS[dev][capturing[1]]):
                    graphs[capturing[0]].capture_end()
            capturing = None
        elif kind == "drop_graph":
            graphs.pop(op[1], None)
            released_just_before.clear()
        elif kind == "mem_pool":
            options = {k: v for k, v in (op[2] if op[2:] else {}).items() if k in MEM_POOL_OPTIONS}
            for k in options:
                calls[k] = calls.get(k, 0) + 1
            mem_pools[op[1]] = torch.cuda.MemPool(**options)
            pool_device[op[1]] = dev
        elif kind == "use_pool":
            if op[1] in mem_pools and in_pool is None and capturing is None:
                # on the pool's device: the requests of another device in it go to its own pools
                in_pool = torch.cuda.use_mem_pool(mem_pools[op[1]], device=pool_device[op[1]])
                in_pool.__enter__()
                released_just_before.clear()
        elif kind == "end_use_pool":
            if in_pool is not None:
                in_pool.__exit__(None, None, None)
                in_pool = None
        elif kind == "drop_pool":
            # No other name for the pool: its destructor runs here (the recorder marks it).
            mem_pools.pop(op[1], None)
            released_just_before.clear()
    if in_pool is not None:
        in_pool.__exit__(None, None, None)
    calls["retries_and_ooms"] = refusals[0] + sum(retries_and_ooms(d) for d in range(DEVICES))
    calls["reset_accumulated_on"] = sorted(reset_on)
    torch.cuda.set_device(0)
    return (tensors, graphs, mem_pools), ooms, silent, like_a_retry, calls


class RawBlock:
    """torch.cuda.caching_allocator_alloc's memory, given back with caching_allocator_delete
    when dropped, as a tensor's is."""

    class OutOfMemory(RuntimeError):
        pass

    def __init__(self, size, stream, device):
        self.ptr, self.device_index = None, device
        try:
            self.ptr = torch.cuda.caching_allocator_alloc(size, device=device, stream=stream)
        except RuntimeError as e:  # PyTorch raises its OOM as a RuntimeError here
            if "out of memory" not in str(e):
                raise
            raise RawBlock.OutOfMemory(str(e)) from None

    def __del__(self):
        if self.ptr is not None:
            torch.cuda.caching_allocator_delete(self.ptr)


def retries_and_ooms(device):
    stats = torch.cuda.memory_stats(device)
    return stats.get("num_alloc_retries", 0) + stats.get("num_ooms", 0)


# The MemPool options this release takes (an option it lacks is left out of a program's pools).
_MEM_POOL = getattr(torch.cuda, "MemPool", None)
MEM_POOL_OPTIONS = {name for name in ("use_on_oom", "no_split")
                    if _MEM_POOL and name in inspect.signature(_MEM_POOL.__init__).parameters}

# Graphs PyTorch cannot delete (a capture_begin that ran out of memory): kept to the end.
UNDELETABLE = []

# The calls a program makes besides allocations and frees, counted in each recording's JSON.
CALLS = ("empty_cache", "sync", "wait", "set_cap", "reset_peak", "reset_accumulated", "capture",
         "mem_pool", "use_pool", "drop_pool", "device", "settings", "cap_before_recording")


def recover(policy, ids, rng):
    """The tensors a job frees after catching an OOM, by its recovery policy."""
    if policy == "all":
        return ids
    if policy == "newest_half":
        return ids[len(ids) // 2:]
    if policy == "random_half":
        return rng.sample(ids, len(ids) // 2)
    return ids[::2]  # every_second


def record(req):
    name, program, cap, outdir = req["name"], req["program"], req["cap"], req["outdir"]
    devices = devices_used(program)
    if devices[-1] >= DEVICES:
        raise RuntimeError(f"the program uses device {devices[-1]}; this machine has {DEVICES}")
    start = {d: torch.cuda.memory_stats(d) for d in devices}
    before = program[:1] == [["cap_before_recording"]]
    if cap and before:  # at start-up, before the history: the recorder reads it when it starts
        for d in devices:
            torch.cuda.set_per_process_memory_fraction(cap / TOTAL, d)
    start_history()
    if cap and not before:  # after the history starts: the recorder marks the cap
        for d in devices:
            torch.cuda.set_per_process_memory_fraction(cap / TOTAL, d)
    held, ooms, silent, like_a_retry, calls = run(program, cap, devices)
    snap = snapshot()  # with the recorder's counts at its end
    by_device = {d: torch.cuda.memory_stats(d) for d in devices}
    summary = torch.cuda.memory_summary()
    record_memory_history(enabled=None)
    # counters as if the allocator had started with this program (a device whose accumulated
    # statistics the program reset has its own)
    for d in devices:
        if d not in calls["reset_accumulated_on"]:
            by_device[d] = {k: v - start[d].get(k, 0) if any(a in k for a in ACCUMULATED) else v
                            for k, v in by_device[d].items()}
    stats = by_device[0]
    meta = {"name": name, "program": program, "cap_bytes": cap, "total_bytes": TOTAL,
            "free_bytes_at_start": FREE0, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "torch": torch.__version__, "device": torch.cuda.get_device_name(),
            "memory_stats": stats, "memory_summary": summary,
            "oom": ooms[-1]["message"] if ooms else None, "ooms": ooms,
            "empty_cache_calls_without_trace_entry": sum(silent.values()),
            "empty_cache_calls_like_a_retry": sum(like_a_retry.values()),
            "calls": calls, "recorder_marks": True}
    if len(devices) > 1:  # each device's statistics and counts; "memory_stats" stays device 0's
        meta["memory_stats_by_device"] = {str(d): by_device[d] for d in devices}
        for key, counts in (("empty_cache_calls_without_trace_entry", silent),
                            ("empty_cache_calls_like_a_retry", like_a_retry)):
            meta[key + "_by_device"] = {str(d): counts.get(d, 0) for d in devices}
    # back to an empty allocator, and the process's settings, for the next program
    if calls.get("settings"):
        set_allocator_settings(START_SETTINGS)
    del held
    gc.collect()
    for d in devices:
        torch.cuda.synchronize(d)
    torch.cuda.empty_cache()
    for d in devices:
        torch.cuda.reset_peak_memory_stats(d)
        torch.cuda.reset_accumulated_memory_stats(d)
    meta["clean_after"] = all(torch.cuda.memory_reserved(d) == 0 for d in devices)
    os.makedirs(outdir, exist_ok=True)
    with gzip.open(os.path.join(outdir, name + ".pickle.gz"), "wb", compresslevel=6) as f:
        pickle.dump(snap, f)
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1)
    answer = {"name": name, "ooms": len(ooms), "clean_after": meta["clean_after"]}
    if calls.get("use_on_oom"):
        # PyTorch keeps a use_on_oom pool's id for its fallback after the pool is deleted: the
        # next program gets a process of its own
        answer["worker_ends"] = True
    return answer


def main():
    for line in sys.stdin:
        req = json.loads(line)
        try:
            answer = record(req)
        except Exception as e:  # the driver lists it and goes on
            answer = {"name": req["name"], "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)
        if answer.get("worker_ends"):
            break
    # Without the interpreter's clean-up, which would delete the UNDELETABLE graphs.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
