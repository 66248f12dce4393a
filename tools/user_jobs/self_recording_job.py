"""A script that records its own memory history, as PyTorch's memory docs teach:
_record_memory_history before the work, _dump_snapshot after. usage: self_recording_job.py
SNAPSHOT [BATCH] [STEPS]"""
import sys

import torch
from torch import nn

out = sys.argv[1] if len(sys.argv) > 1 else "snapshot.pickle"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 16
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
torch.manual_seed(0)
torch.cuda.memory._record_memory_history(max_entries=100000)
model = nn.TransformerEncoder(nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True),
                              num_layers=4).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
for step in range(steps):
    x = torch.randn(batch, 256, 512, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("peak", torch.cuda.max_memory_allocated(), "stats", len(torch.cuda.memory_stats()))
torch.cuda.memory._dump_snapshot(out)
torch.cuda.memory._record_memory_history(enabled=None)
