"""Records a job in which a CUDA graph capture and a torch.cuda.use_mem_pool block are open
together, both ways round, through allocsim's recorder: which pool serves the requests both
accept shows in the snapshot's segments (segment_pool_id), and the replay must make the same.

usage: python3 tools/gpu/record_nested_pools.py OUT_PREFIX
  writes OUT_PREFIX.pickle.gz (allocsim.torch.snapshot()) and OUT_PREFIX.json (PyTorch's
  statistics, and the pool that served each tagged tensor)
"""
import gzip
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import torch  # noqa: E402
import allocsim.torch  # noqa: E402

out = sys.argv[1]
MiB = 1 << 20
allocsim.torch.record_memory_history(max_entries=1_000_000)
dev = torch.device("cuda")
x = torch.randn(512, 512, device=dev)
side, outer = torch.cuda.MemPool(), torch.cuda.MemPool()
tensors = {}


def block(name, mib):
    tensors[name] = torch.empty(mib * MiB, dtype=torch.uint8, device=dev)


# A block begun inside a capture.
g1 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g1):
    block("capture, before the block", 4)
    with torch.cuda.use_mem_pool(side):
        block("in the block inside the capture", 6)
    block("capture, after the block", 8)
# A capture begun inside a block.
g2 = torch.cuda.CUDAGraph()
with torch.cuda.use_mem_pool(outer):
    block("block, before the capture", 3)
    with torch.cuda.graph(g2):
        block("in the capture inside the block", 5)
    block("block, after the capture", 7)
torch.cuda.synchronize()
snapshot = allocsim.torch.snapshot()
pools = {}
for name, t in tensors.items():
    ptr = t.data_ptr()
    for seg in snapshot["segments"]:
        if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
            pools[name] = list(seg["segment_pool_id"])
ids = {"g1": list(g1.pool()), "g2": list(g2.pool()), "side": list(side.id),
       "outer": list(outer.id)}
with gzip.open(out + ".pickle.gz", "wb") as f:
    pickle.dump(snapshot, f, protocol=4)
with open(out + ".json", "w") as f:
    json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(),
               "total_bytes": torch.cuda.mem_get_info()[1], "cap_bytes": 0, "alloc_conf": "",
               "recorder_marks": True, "pools": ids, "served_by": pools,
               "max_memory_allocated": torch.cuda.max_memory_allocated(),
               "max_memory_reserved": torch.cuda.max_memory_reserved(),
               "memory_stats": dict(torch.cuda.memory_stats()), "oom": None}, f, indent=1)
print(json.dumps({"pools": ids, "served_by": pools}, indent=1))
