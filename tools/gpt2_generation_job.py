"""GPT-2 (12 layers, 768 wide) generating with its KV cache, as the shipped recording
workloads/gpt2gen_default was made: per call a batch of 4 to 32 prompts of 64 to 256 random
tokens (Python's random, seeded 0), 128 new tokens each, greedy. Runs on a GPU as it is, or on the
CPU under allocsim.trace:

    python -m allocsim.trace tools/gpt2_generation_job.py -o gen.pickle.gz --card h200 -- 6
    python3 tools/trace_sweep.py --compare workloads/gpt2gen_default.pickle.gz gen.pickle.gz

usage: gpt2_generation_job.py [CALLS]   (default 6; needs transformers)
"""
import random
import sys

import torch
import transformers

torch.manual_seed(0)
random.seed(0)
calls = int(sys.argv[1]) if len(sys.argv) > 1 else 6
config = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024)
model = transformers.GPT2LMHeadModel(config).to("cuda").eval()
model.generation_config.pad_token_id = 0


def call():
    # the prompt a local: freed when the call returns, before the next prompt is made
    batch = random.choice([4, 8, 16, 32])
    prompt = random.choice([64, 128, 256])
    tokens = torch.randint(1, config.vocab_size, (batch, prompt), device="cuda")
    with torch.no_grad():
        model.generate(input_ids=tokens, attention_mask=torch.ones_like(tokens),
                       max_new_tokens=128, min_new_tokens=128, do_sample=False)


for _ in range(calls):
    call()
