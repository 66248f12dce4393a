"""A custom autograd.Function whose backward adds another tensor to the incoming gradient
(returns g + other, a new tensor), beside a tensor hook that rescales a gradient, in a small
residual MLP. usage: custom_function_job.py [BATCH] [STEPS]"""
import sys

import torch
from torch import nn

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 32
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
torch.manual_seed(0)


class NoisyGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, noise):
        ctx.save_for_backward(noise)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        (noise,) = ctx.saved_tensors
        return g + noise, None


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(2048, 2048) for _ in range(6))

    def forward(self, x):
        noise = torch.zeros_like(x)
        for layer in self.layers:
            x = x + layer(NoisyGrad.apply(x, noise))
        return x


model = Net().cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
for step in range(steps):
    x = torch.randn(batch, 512, 2048, device="cuda", requires_grad=True)
    x.register_hook(lambda g: g * 0.5)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("loss", loss.item())
