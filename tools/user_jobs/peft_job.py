"""LoRA fine-tuning with peft of a GPT-2-shaped model (built from its config, no download):
rank-16 adapters on the attention, bf16 autocast, AdamW over the adapters only.
usage: peft_job.py [BATCH] [STEPS]"""
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import GPT2Config, GPT2LMHeadModel

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 8
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
torch.manual_seed(0)
config = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=512)
model = GPT2LMHeadModel(config)
model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules=["c_attn", "c_proj"],
                                         fan_in_fan_out=True, lora_dropout=0.05)).cuda()
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
for step in range(steps):
    tokens = torch.randint(0, config.vocab_size, (batch, 512), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print("loss", loss.item())
