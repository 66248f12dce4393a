"""One variant of a small training job, recorded with Python stack frames: the pairs that
`allocsim diff` is checked on (workloads/diff_pairs/). The lines a variant changes carry a
`# diff:` tag, so that the check can find them in the recordings' own frames.

usage: python3 diff_pair_job.py VARIANT BATCH STEPS OUT_PREFIX
  VARIANT: base, wider (the MLP's hidden layer twice as wide), keep (each step's output kept)
  writes OUT_PREFIX.pickle.gz (torch.cuda.memory._snapshot()) and OUT_PREFIX.json (PyTorch's
  statistics, and the tagged lines)
PYTORCH_CUDA_ALLOC_CONF is read by PyTorch as usual.
"""
import gzip
import json
import os
import pickle
import sys

import torch
from torch import nn

variant, batch, steps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
dev = torch.device("cuda")
torch.manual_seed(0)
WIDTH, SEQ, LAYERS = 1024, 256, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        hidden = (8 if variant == "wider" else 4) * WIDTH  # diff: wider
        self.norm = nn.LayerNorm(WIDTH, device=dev)
        self.up = nn.Linear(WIDTH, hidden, device=dev)  # diff: up weights
        self.down = nn.Linear(hidden, WIDTH, device=dev)

    def forward(self, x):
        h = self.up(self.norm(x))  # diff: up activations
        h = nn.functional.gelu(h)  # diff: gelu activations
        return x + self.down(h)  # diff: block output


torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")
model = nn.Sequential(*[Block() for _ in range(LAYERS)])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
kept = []
for step in range(steps):
    x = torch.randn(batch, SEQ, WIDTH, device=dev)
    y = model(x)
    loss = y.float().pow(2).mean()
    loss.backward()
    if variant == "keep":
        kept.append(y.detach())  # diff: kept output
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
snapshot = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
with gzip.open(out + ".pickle.gz", "wb") as f:
    pickle.dump(snapshot, f, protocol=4)
tags = {}
with open(os.path.abspath(__file__)) as f:
    for number, line in enumerate(f, 1):
        if "# diff: " in line and "tags" not in line:
            tags[line.split("# diff: ")[1].strip()] = number
with open(out + ".json", "w") as f:
    json.dump({"variant": variant, "batch": batch, "steps": steps, "torch": torch.__version__,
               "device": torch.cuda.get_device_name(),
               "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
               "script": os.path.basename(__file__), "tagged_lines": tags,
               "max_memory_allocated": torch.cuda.max_memory_allocated(),
               "max_memory_reserved": torch.cuda.max_memory_reserved(),
               "memory_stats": torch.cuda.memory_stats()}, f, indent=1)
print(out, torch.cuda.max_memory_reserved())
