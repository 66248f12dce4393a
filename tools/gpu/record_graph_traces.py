"""Record real traces of jobs that use CUDA graphs' private pools, or several GPUs in one process.

Each run is one process: one workload under one PYTORCH_CUDA_ALLOC_CONF. Like
tools/record_pytorch_trace.py it writes NAME.pickle.gz (the snapshot, every device) and NAME.json
(PyTorch's own statistics). For a job on several devices the JSON has `devices`: one entry per device
with its `memory_stats`, `total_bytes`, `cap_bytes` and `oom` (the message, where that device ran out);
the top-level keys are device 0's. The JSON's `markers` say where each empty_cache() and capture
happened in the trace (workloads/cuda_graph_syncs/); taking each adds a `snapshot` trace entry.

usage: python3 record_graph_traces.py RUN_NAME WORKLOAD STEPS OUTDIR
workloads:
  graph-capture     a GPT-2 forward captured with torch.cuda.graph, replayed with eager work around it
  graph-sharedpool  two captures sharing one pool (pool=g1.pool()), replayed alternately
  graph-destroy     a capture replayed, then the graph and its outputs deleted and the cache emptied
  compile-mlp-train torch.compile(mode="reduce-overhead") training of an MLP (cudagraph trees)
  compile-gpt2-infer torch.compile(mode="reduce-overhead") inference of a small GPT-2
  twogpu            an MLP split over cuda:0 and cuda:1, batch growing until cuda:1 (capped) runs out
  threegpu          an MLP split over cuda:0, cuda:1 and cuda:2, small tensors on each, the caches
                    emptied (one empty_cache(), every device's) after the third step
"""
import gzip, json, os, pickle, random, sys, time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import torch
from torch import nn

name, workload, steps, outdir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
torch.manual_seed(0)
random.seed(0)
torch.backends.cudnn.benchmark = False
ndev = {"twogpu": 2, "threegpu": 3}.get(workload, 1)
# The history from the process's first allocation on, as the shipped workloads are recorded.
# HISTORY_MAX_ENTRIES=N keeps the last N events only, as users' bounded recordings do.
max_entries = int(os.environ.get("HISTORY_MAX_ENTRIES", "0")) or sys.maxsize
torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                         max_entries=max_entries)
dev = torch.device("cuda:0")
totals = [torch.cuda.mem_get_info(d)[1] for d in range(ndev)]
caps = [0] * ndev
if workload == "twogpu":
    caps[1] = 4_000_000_000
    torch.cuda.set_per_process_memory_fraction(caps[1] / totals[1], device=1)


# Where the allocator's synchronisations and the captures happened, by trace position: the trace
# does not record them (an empty_cache() that frees nothing leaves no entry), so the JSON lists them
# as `markers` ({at: events recorded before, what, num_sync_all_streams after}) for checking what a
# replay infers. Positions come from the live snapshot, taken outside captures only.
markers = []


def trace_length():
    try:
        return len(torch.cuda.memory._snapshot()["device_traces"][0])
    except Exception:  # noqa: BLE001 - a marker without a position rather than a failed recording
        return -1


def note(what, at=None):
    markers.append({"at": trace_length() if at is None else at, "what": what,
                    "num_sync_all_streams": torch.cuda.memory_stats(0).get("num_sync_all_streams", 0)})


def hook(owner, attr, what, before=True, after=False):
    original = getattr(owner, attr, None)
    if original is None:
        return

    def wrapped(*args, **kwargs):
        if before:
            note(what + ":before")
        out = original(*args, **kwargs)
        if after:
            note(what + ":after")
        return out
    setattr(owner, attr, wrapped)


hook(torch.cuda, "empty_cache", "empty_cache", before=True, after=True)
hook(torch.cuda.memory, "empty_cache", "memory.empty_cache", before=True, after=True)
hook(torch.cuda.graphs.CUDAGraph, "capture_begin", "capture_begin", before=True)
hook(torch.cuda.graphs.CUDAGraph, "capture_end", "capture_end", before=False, after=True)
for entry in ("_cuda_beginAllocateCurrentStreamToPool", "_cuda_beginAllocateCurrentThreadToPool",
              "_cuda_beginAllocateToPool",
             "_cuda_endAllocateToPool", "_cuda_endAllocateCurrentStreamToPool", "_cuda_releasePool"):
    hook(torch._C, entry, entry, before=True)


def small_gpt2():
    import transformers as tf
    cfg = tf.GPT2Config(n_layer=4, n_embd=512, n_head=8, n_positions=512)
    return cfg, tf.GPT2LMHeadModel(cfg).to(dev).eval()


def capture(model, x, pool=None):
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g, pool=pool):
        out = model(input_ids=x, use_cache=False).logits
    return g, out


def warmup(model, xs):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for x in xs:
            for _ in range(2):
                model(input_ids=x, use_cache=False)
    torch.cuda.current_stream().wait_stream(s)


def make(workload):
    if workload in ("graph-capture", "graph-sharedpool", "graph-destroy"):
        cfg, model = small_gpt2()
        xa = torch.randint(0, cfg.vocab_size, (8, 256), device=dev)
        xb = torch.randint(0, cfg.vocab_size, (4, 256), device=dev)
        warmup(model, [xa, xb] if workload == "graph-sharedpool" else [xa])
        ga, outa = capture(model, xa)
        gb, outb = capture(model, xb, pool=ga.pool()) if workload == "graph-sharedpool" else (None, None)
        state = {"ga": ga, "outa": outa}

        def step(i):
            xa.copy_(torch.randint(0, cfg.vocab_size, xa.shape, device=dev))
            if "ga" in state:
                state["ga"].replay()
            if gb is not None and i % 2 == 1:
                xb.copy_(torch.randint(0, cfg.vocab_size, xb.shape, device=dev))
                gb.replay()
            # eager work around the graph: a forward at another shape, temporaries from the output
            with torch.no_grad():
                e = model(input_ids=torch.randint(0, cfg.vocab_size, (2, 64 + 32 * i), device=dev),
                          use_cache=False).logits
                if "outa" in state:
                    p = state["outa"].float().softmax(-1).amax(-1)
                    del p
            del e
            if workload == "graph-destroy" and i == steps // 2:
                del state["ga"], state["outa"]
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
        return step
    if workload == "compile-mlp-train":
        model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
                              nn.Linear(4096, 1024)).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        cmodel = torch.compile(model, mode="reduce-overhead")

        def step(i):
            torch.compiler.cudagraph_mark_step_begin()
            x = torch.randn(256, 1024, device=dev)
            y = torch.randn(256, 1024, device=dev)
            loss = nn.functional.mse_loss(cmodel(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step
    if workload == "compile-gpt2-infer":
        cfg, model = small_gpt2()
        cmodel = torch.compile(model, mode="reduce-overhead")

        def step(i):
            torch.compiler.cudagraph_mark_step_begin()
            x = torch.randint(0, cfg.vocab_size, (8, 256), device=dev)
            with torch.no_grad():
                out = cmodel(input_ids=x, use_cache=False).logits
                tok = out[:, -1].argmax(-1).clone()
            del out, tok
        return step
    if workload == "twogpu":
        d1 = torch.device("cuda:1")
        part0 = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(4)]).to(dev)
        part1 = nn.Sequential(*[nn.Linear(4096, 4096) for _ in range(4)]).to(d1)
        opt = torch.optim.AdamW(list(part0.parameters()) + list(part1.parameters()), lr=1e-4)

        def step(i):
            x = torch.randn(8192 * (i + 1), 4096, device=dev)
            h = part0(x).to(d1)
            loss = part1(h).float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step
    if workload == "threegpu":
        devs = [torch.device(f"cuda:{k}") for k in range(3)]
        parts = [nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(3)]).to(d) for d in devs]
        opt = torch.optim.AdamW([q for p in parts for q in p.parameters()], lr=1e-4)

        def step(i):
            small = [torch.randn(1000 * (k + 1), device=d) for k, d in enumerate(devs)]
            h = torch.randn(4096 * (i + 1), 2048, device=devs[0])
            for k, part in enumerate(parts):
                h = part(h.to(devs[k])) + small[k].sum()
            loss = h.float().pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del small, h, loss
            if i == 2:  # one call empties every device's cache
                for d in devs:
                    torch.cuda.synchronize(d)
                note("empty_cache")
                torch.cuda.empty_cache()
        return step
    raise SystemExit("unknown workload " + workload)


result = {"name": name, "workload": workload, "steps": steps,
          "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
          "torch": torch.__version__, "device": torch.cuda.get_device_name(),
          "history_max_entries": int(os.environ.get("HISTORY_MAX_ENTRIES", "0")) or None}
t0 = time.time()
oom = None
done = 0
try:
    step = make(workload)
    for i in range(steps):
        note(f"step {i}")
        step(i)
        done = i + 1
    for d in range(ndev):
        torch.cuda.synchronize(d)
except torch.OutOfMemoryError as e:
    oom = str(e)
note("end")
result["markers"] = markers
result["steps_done"] = done
result["wall_s"] = round(time.time() - t0, 3)
snap = torch.cuda.memory._snapshot()
segments_only = torch.cuda.memory_snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
devices = []
for d in range(ndev):
    # the message names the device that ran out ("GPU 1 has a total capacity ...")
    this_oom = oom if oom and f"GPU {d} " in oom else None
    devices.append({"device": d, "memory_stats": dict(torch.cuda.memory_stats(d)),
                    "max_memory_allocated": torch.cuda.max_memory_allocated(d),
                    "max_memory_reserved": torch.cuda.max_memory_reserved(d),
                    "memory_summary": torch.cuda.memory_summary(d),
                    "total_bytes": totals[d], "cap_bytes": caps[d], "oom": this_oom})
result.update({k: devices[0][k] for k in ("memory_stats", "max_memory_allocated", "max_memory_reserved",
                                         "memory_summary", "total_bytes", "cap_bytes", "oom")})
if ndev > 1:
    result["devices"] = devices
counts = {}
keysets = {}
for t in snap.get("device_traces", []):
    for tr in t:
        counts[tr["action"]] = counts.get(tr["action"], 0) + 1
        keysets[",".join(sorted(tr.keys()))] = keysets.get(",".join(sorted(tr.keys())), 0) + 1
result["trace_action_counts"] = counts
result["trace_entry_keys"] = keysets
result["snapshot_keys"] = sorted(snap.keys())
pools = {}
for s in snap["segments"]:
    k = f"dev{s.get('device')} pool{tuple(s.get('segment_pool_id', (0, 0)))} {s['segment_type']}"
    pools[k] = pools.get(k, 0) + 1
result["segments_by_pool"] = pools
result["events_by_device"] = [len(t) for t in snap["device_traces"]]
os.makedirs(outdir, exist_ok=True)
with gzip.open(os.path.join(outdir, name + ".pickle.gz"), "wb", compresslevel=9) as f:
    pickle.dump(snap, f)
if workload == "graph-capture":
    with gzip.open(os.path.join(outdir, name + "_segments.pickle.gz"), "wb", compresslevel=9) as f:
        pickle.dump(segments_only, f)
with open(os.path.join(outdir, name + ".json"), "w") as f:
    json.dump(result, f, indent=1, default=str)
print(f"{name}: steps={done}/{steps} oom={'yes' if oom else 'no'} events={result['events_by_device']} "
      f"pools={pools} keys={list(keysets)} wall={result['wall_s']}s", flush=True)
