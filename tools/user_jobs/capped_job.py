"""A job that caps its own memory at start-up and empties the cache each step:
set_per_process_memory_fraction, then empty_cache() and reset_peak_memory_stats() after every
step, the first steps' memory figures printed. usage: capped_job.py [FRACTION] [BATCH] [STEPS]"""
import sys

import torch
from torch import nn

fraction = float(sys.argv[1]) if len(sys.argv) > 1 else 0.1
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 32
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
torch.cuda.set_per_process_memory_fraction(fraction)
torch.manual_seed(0)
model = nn.Sequential(*[nn.Sequential(nn.LayerNorm(2048), nn.Linear(2048, 8192), nn.GELU(),
                                      nn.Linear(8192, 2048)) for _ in range(4)]).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
for step in range(steps):
    for micro in range(2):  # the batch in two halves of varying length
        x = torch.randn(batch // 2, 128 + 64 * micro, 2048, device="cuda")
        model(x).float().pow(2).mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(step, torch.cuda.max_memory_allocated())
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
