"""A transformer-style MLP stack under torch.compile (Inductor, the default), AdamW.
usage: compiled_job.py [BATCH] [STEPS]"""
import sys

import torch
from torch import nn

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 16
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.up, self.down = nn.LayerNorm(1024), nn.Linear(1024, 4096), nn.Linear(4096, 1024)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


model = nn.Sequential(*[Block() for _ in range(6)]).cuda()
compiled = torch.compile(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(steps):
    x = torch.randn(batch, 256, 1024, device="cuda")
    loss = compiled(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("loss", loss.item())
