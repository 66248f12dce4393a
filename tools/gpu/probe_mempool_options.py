"""What PyTorch's allocator does with torch.cuda.MemPool's options on this GPU, each case recorded
through allocsim's recorder (a snapshot the replay must match):

  fallback_order  a request outside any pool that fits neither the default pool's cached blocks
                  nor the cap, where releasing the default pool's cache would make room and a
                  use_on_oom pool holds a free block that fits: which comes first (a new segment
                  after the release, or the pool's block)
  last_resort     the same where no release makes room: the pool's block serves it
  no_split        a MemPool(no_split=True): the blocks its requests get, large and small
  deleted         a use_on_oom pool deleted, then two OOMs outside it: what PyTorch raises
  expandable_fallback           fallback_order's question under expandable_segments:True (the
                                pool's free block a mapped part of an expandable segment)
  expandable_fallback_no_split  the same with MemPool(use_on_oom=True, no_split=True)

usage: probe_mempool_options.py CASE OUTDIR   (one case per process: fresh pool ids)
  writes OUTDIR/mempool-CASE.pickle.gz (allocsim.torch.snapshot()) and OUTDIR/mempool-CASE.json
  (the facts, PyTorch's statistics at the end, and the fields tools/check_fidelity.py reads)
"""
import gzip
import inspect
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
case, outdir = sys.argv[1], sys.argv[2]
ALLOC_CONF = "expandable_segments:True" if case.startswith("expandable_") else ""
if ALLOC_CONF:
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = ALLOC_CONF  # read when torch's allocator starts
import torch  # noqa: E402
import allocsim.torch  # noqa: E402

MiB = 1 << 20
torch.cuda.init()
_, TOTAL = torch.cuda.mem_get_info()
facts = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "case": case,
         "mem_pool_signature": str(inspect.signature(torch.cuda.MemPool.__init__))}
has_no_split = "no_split" in facts["mem_pool_signature"]
dev = torch.device("cuda")
CAP = 700 * MiB


def empty(mib):
    return torch.empty(int(mib * MiB), dtype=torch.uint8, device=dev)


def where(t, pool=None):
    """Which pool's segment holds tensor t, from the snapshot's segments."""
    ptr = t.data_ptr()
    for seg in torch.cuda.memory._snapshot()["segments"]:
        if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
            return {"segment_size": seg["total_size"], "pool": list(seg.get("segment_pool_id", ())),
                    "block_size": next((b["size"] for b in seg["blocks"]
                                        if b["state"] == "active_allocated"
                                        and b.get("address", 0) == ptr), None)}
    return None


torch.cuda.set_per_process_memory_fraction(CAP / TOTAL)  # at start-up, before the history
allocsim.torch.record_memory_history(max_entries=1_000_000)
keep = []
if case == "fallback_order":
    pool = torch.cuda.MemPool(use_on_oom=True)
    with torch.cuda.use_mem_pool(pool):
        a = empty(300)
    del a  # the pool caches a free 300 MiB block
    b = empty(200)
    del b  # the default pool caches a free 200 MiB block
    d = empty(250)  # 300 + 200 + 250 > 700: releasing the 200 MiB would make room
    facts["served"] = where(d)
    facts["pool_id"] = list(pool.id)
    keep += [pool, d]
elif case in ("expandable_fallback", "expandable_fallback_no_split"):
    options = {"use_on_oom": True}
    if case.endswith("no_split") and has_no_split:
        options["no_split"] = True
    pool = torch.cuda.MemPool(**options)
    with torch.cuda.use_mem_pool(pool):
        a = empty(41.6)  # 60 MiB mapped in the pool's expandable segment (three 20 MiB pages)
    del a
    live = empty(600)  # the default pool's expandable segment: 600 MiB, nothing to release
    try:
        d = empty(54)  # 660 + 60 > 700: the pool's free 60 MiB serves it, or an OOM
        facts["served"] = where(d)
        keep.append(d)
    except torch.OutOfMemoryError as exc:
        facts["ooms"] = [f"OutOfMemoryError: {exc}"]
    facts["pool_id"] = list(pool.id)
    keep += [pool, live]
elif case == "last_resort":
    pool = torch.cuda.MemPool(use_on_oom=True)
    with torch.cuda.use_mem_pool(pool):
        a = empty(300)
    del a
    live = empty(350)  # the default pool: nothing to release
    d = empty(200)  # 300 + 350 + 200 > 700; the pool's free 300 MiB block fits
    facts["served"] = where(d)
    small = empty(0.25)  # a small request: the pool has no small block, a new 2 MiB segment fits
    facts["served_small"] = where(small)
    facts["pool_id"] = list(pool.id)
    del d
    try:
        e = empty(340)  # fits only the pool's block (300 MiB): too small; OOM
        keep.append(e)
        facts["large_after"] = "served"
    except torch.OutOfMemoryError as exc:
        facts["large_after"] = f"OutOfMemoryError: {exc}"
    keep += [pool, live, small]
elif case == "no_split":
    if not has_no_split:
        facts["no_split"] = "not in this release"
    else:
        pool = torch.cuda.MemPool(no_split=True)
        got = {}
        with torch.cuda.use_mem_pool(pool):
            a = empty(4)  # a 20 MiB segment
            got["4MiB"] = where(a)
            s = empty(0.001)  # a 2 MiB small segment
            got["1KB"] = where(s)
            s2 = empty(0.001)
            got["1KB_second"] = where(s2)
            del a
            c = empty(6)  # the free 20 MiB block whole, or split
            got["6MiB_after_free"] = where(c)
            big = empty(30)
            got["30MiB"] = where(big)
        facts["no_split"] = got
        facts["pool_id"] = list(pool.id)
        keep += [pool, s, s2, c, big]
elif case == "deleted":
    pool = torch.cuda.MemPool(use_on_oom=True)
    with torch.cuda.use_mem_pool(pool):
        a = empty(100)
    del a, pool
    live = empty(600)
    facts["ooms"] = []
    for mib in (300, 300):
        try:
            keep.append(empty(mib))
            facts["ooms"].append("served")
        except Exception as exc:
            facts["ooms"].append(f"{type(exc).__name__}: {exc}")
    keep.append(live)
else:
    sys.exit(f"unknown case {case}")
torch.cuda.synchronize()
snap = allocsim.torch.snapshot()
# the last OOM raised, as tools/check_fidelity.py compares it
raised = [v for v in facts.get("ooms", []) + [facts.get("large_after", "")]
          if v.startswith("OutOfMemoryError: ")]
facts.update({"total_bytes": TOTAL, "cap_bytes": CAP, "alloc_conf": ALLOC_CONF, "recorder_marks": True,
              "memory_stats": torch.cuda.memory_stats(),
              "oom": raised[-1][len("OutOfMemoryError: "):] if raised else None})
allocsim.torch.record_memory_history(enabled=None)
os.makedirs(outdir, exist_ok=True)
with gzip.open(os.path.join(outdir, f"mempool-{case}.pickle.gz"), "wb") as f:
    pickle.dump(snap, f)
with open(os.path.join(outdir, f"mempool-{case}.json"), "w") as f:
    json.dump(facts, f, indent=1, default=str)
print(case, json.dumps({k: v for k, v in facts.items() if k != "memory_stats"}, default=str)[:1500])
