"""The optimizer made before the model moves to the GPU (as many scripts do: build, optimizer,
then .cuda()): PyTorch moves each parameter's data in place, so the optimizer steps the same
Parameter objects. A parameter carries an attribute of the user's and a gradient hook.
usage: optimizer_first_job.py [BATCH] [STEPS]"""
import sys

import torch
from torch import nn

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 16
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
                      nn.Linear(4096, 1024))
model[0].weight.no_decay = True
clipped = []
model[2].weight.register_hook(lambda g: clipped.append(1) or g.clamp(-1, 1))
opt = torch.optim.AdamW([{"params": [p for p in model.parameters()
                                     if not getattr(p, "no_decay", False)]},
                         {"params": [model[0].weight], "weight_decay": 0.0}], lr=1e-4)
model.cuda()
for step in range(steps):
    x = torch.randn(batch, 256, 1024, device="cuda")
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
assert len(clipped) == steps
print("loss", loss.item())
