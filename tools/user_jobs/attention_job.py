"""A small decoder-only transformer whose attention the user picks: usage: attention_job.py
[math|no-flash|efficient|default|math-flag] [BATCH] [STEPS]. math: under
torch.nn.attention.sdpa_kernel(SDPBackend.MATH); no-flash: torch.backends.cuda.enable_flash_sdp
(False); efficient: sdpa_kernel(EFFICIENT_ATTENTION); math-flag: enable_flash_sdp(False) and
enable_mem_efficient_sdp(False). fp16 autocast with a GradScaler, causal attention."""
import contextlib
import sys

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

choice = sys.argv[1] if len(sys.argv) > 1 else "math"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 8
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
torch.manual_seed(0)
WIDTH, HEADS, LAYERS, SEQ, VOCAB = 512, 8, 4, 512, 8192


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.up, self.down = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, HEADS, c // HEADS).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.down(nn.functional.gelu(self.up(self.n2(x))))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


if choice == "no-flash":
    torch.backends.cuda.enable_flash_sdp(False)
if choice == "math-flag":
    torch.backends.cuda.enable_flash_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
kernel = {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION}.get(choice)
model = LM().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.amp.GradScaler("cuda")
for step in range(steps):
    tokens = torch.randint(0, VOCAB, (batch, SEQ + 1), device="cuda")
    with sdpa_kernel(kernel) if kernel is not None else contextlib.nullcontext():
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(tokens[:, :-1])
            loss = nn.functional.cross_entropy(logits.float().view(-1, VOCAB),
                                               tokens[:, 1:].reshape(-1))
        scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
print("loss", loss.item())
