"""A timm model trained from scratch on random images: usage: timm_job.py MODEL [BATCH] [STEPS]
[bf16] (MODEL as timm.create_model names it: vit_small_patch16_224, efficientnet_b0,
resnet18, ...); AdamW, 224x224, bf16 autocast when asked."""
import contextlib
import sys

import timm
import torch
from torch import nn

name = sys.argv[1] if len(sys.argv) > 1 else "vit_small_patch16_224"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 32
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
bf16 = len(sys.argv) > 4 and sys.argv[4] == "bf16"
torch.manual_seed(0)
model = timm.create_model(name, pretrained=False, num_classes=100).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(steps):
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 100, (batch,), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
        loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("loss", loss.item())
