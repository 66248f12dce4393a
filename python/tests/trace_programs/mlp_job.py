"""The job of tools/gpu/diff_pair_job.py (variant base) as a user's script, with nothing of the
recorder: eight pre-norm MLP blocks, AdamW, three steps. workloads/diff_pairs/base_b8 is its
recording on a GPU; `python -m allocsim.trace` traces it here on the CPU."""
import sys

import torch
from torch import nn

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 8
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
dev = torch.device("cuda")
torch.manual_seed(0)
WIDTH, SEQ, LAYERS = 1024, 256, 8


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        hidden = 4 * WIDTH
        self.norm = nn.LayerNorm(WIDTH, device=dev)
        self.up = nn.Linear(WIDTH, hidden, device=dev)
        self.down = nn.Linear(hidden, WIDTH, device=dev)

    def forward(self, x):
        h = self.up(self.norm(x))
        h = nn.functional.gelu(h)
        return x + self.down(h)


model = nn.Sequential(*[Block() for _ in range(LAYERS)])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(steps):
    x = torch.randn(batch, SEQ, WIDTH, device=dev)
    y = model(x)
    loss = y.float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("loss", loss.item())
