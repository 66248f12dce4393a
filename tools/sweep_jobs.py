"""The training jobs of the sweeps (workloads/sweeps/): one definition for the GPU recorder
(tools/gpu/record_sweep.py) and for tracing them on the CPU (tools/trace_sweep.py).

  MODEL: gpt2 (fp32, sequence 1024, batch 4 unless swept), llama-bf16 (bf16 autocast, sequence
  512, batch 4 unless swept), bert (BERT-base masked LM, fp32, sequence 512, batch 8 unless
  swept), resnet50 (torchvision, fp32, 224x224 images, batch 32 unless swept), vit-fp16 /
  vit-bf16 (torchvision ViT-B/16 under fp16 autocast with a GradScaler, or bf16 autocast; 224x224,
  batch 16 unless swept) or convnext (torchvision ConvNeXt-Tiny, fp32, 224x224, batch 32 unless
  swept), t5 (T5-small-sized encoder-decoder, fp32, 512 source and 128 target tokens, batch 8
  unless swept) or unet (a diffusion-style UNet: ResNet blocks with GroupNorm and SiLU, skip
  connections, attention at the lowest resolution; bf16 autocast, 64x64 images with 4 channels,
  noise-prediction MSE, batch 16 unless swept); PARAM: batch, seq (the language models) or side
  (the image models' image side).
"""
from typing import Any, Callable, NamedTuple, Optional

MODELS = ("gpt2", "llama-bf16", "bert", "resnet50", "vit-fp16", "vit-bf16", "convnext", "t5",
          "unet")
IMAGES = ("resnet50", "vit-fp16", "vit-bf16", "convnext")


class SweepJob(NamedTuple):
    model: Any
    config: Optional[Any]  # the language models' transformers config; None for images
    batch: int
    seq: int  # the sequence length, or the images' side
    accum: int
    micro: int
    prepare: Callable[[], None]  # model.cuda() and the optimizer: before a recording starts
    step: Callable[[], None]  # one optimizer step (accum micro-batches)


def _unet(torch):
    """A small diffusion-style UNet: two ResNet blocks per level (GroupNorm, SiLU, 3x3
    convolutions), channels 128-256-512, self-attention at the lowest level, skip connections
    concatenated on the way up."""
    nn = torch.nn

    class Res(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.n2, self.c2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            h = self.c1(nn.functional.silu(self.n1(x)))
            h = self.c2(nn.functional.silu(self.n2(h)))
            return h + self.skip(x)

    class Attention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.norm, self.qkv, self.out = nn.GroupNorm(32, c), nn.Linear(c, 3 * c), nn.Linear(c, c)
            self.heads = 8

        def forward(self, x):
            b, c, h, w = x.shape
            t = self.norm(x).flatten(2).transpose(1, 2)
            q, k, v = self.qkv(t).view(b, h * w, 3, self.heads, c // self.heads).permute(
                2, 0, 3, 1, 4)
            a = nn.functional.scaled_dot_product_attention(q, k, v)
            return x + self.out(a.transpose(1, 2).reshape(b, h * w, c)).transpose(1, 2).view(
                b, c, h, w)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            ch = (128, 256, 512)
            self.inp = nn.Conv2d(4, ch[0], 3, padding=1)
            self.down = nn.ModuleList([nn.Sequential(Res(ch[max(i - 1, 0)], c), Res(c, c))
                                       for i, c in enumerate(ch)])
            self.pool = nn.ModuleList([nn.Conv2d(c, c, 3, stride=2, padding=1) for c in ch[:-1]])
            self.mid = nn.Sequential(Res(ch[-1], ch[-1]), Attention(ch[-1]), Res(ch[-1], ch[-1]))
            self.up = nn.ModuleList([nn.Sequential(Res(2 * c, c), Res(c, c))
                                     for c in reversed(ch)])
            self.lift = nn.ModuleList([nn.Conv2d(ch[i + 1], ch[i], 3, padding=1)
                                       for i in reversed(range(len(ch) - 1))])
            self.outp = nn.Sequential(nn.GroupNorm(32, ch[0]), nn.SiLU(),
                                      nn.Conv2d(ch[0], 4, 3, padding=1))

        def forward(self, x):
            h = self.inp(x)
            skips = []
            for i, block in enumerate(self.down):
                h = block(h)
                skips.append(h)
                if i < len(self.pool):
                    h = self.pool[i](h)
            h = self.mid(h)
            for i, block in enumerate(self.up):
                h = block(torch.cat([h, skips.pop()], dim=1))
                if i < len(self.lift):
                    h = self.lift[i](nn.functional.interpolate(h, scale_factor=2.0))
            return self.outp(h)

    return UNet()


def make_job(model_name: str, param: str, value: int, accum: int = 1) -> SweepJob:
    import torch
    import transformers as tf

    images = model_name in IMAGES
    batch = {"bert": 8, "resnet50": 32, "vit-fp16": 16, "vit-bf16": 16, "convnext": 32, "t5": 8,
             "unet": 16}.get(model_name, 4)
    seq = (224 if images else 64 if model_name == "unet" else
           {"gpt2": 1024}.get(model_name, 512))  # images: the side
    if param == "batch":
        batch = value
    else:
        seq = value
    if model_name == "gpt2":
        cfg = tf.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=max(seq, 1024))
        model = tf.GPT2LMHeadModel(cfg)
    elif model_name == "bert":
        cfg = tf.BertConfig(max_position_embeddings=max(seq, 512))
        model = tf.BertForMaskedLM(cfg)
    elif model_name == "t5":
        cfg = tf.T5Config(d_model=512, d_ff=2048, num_layers=6, num_heads=8, vocab_size=32128,
                          decoder_start_token_id=0, pad_token_id=0)
        model = tf.T5ForConditionalGeneration(cfg)
    elif model_name == "unet":
        cfg = None
        model = _unet(torch)
    elif images:
        import torchvision
        model = {"resnet50": torchvision.models.resnet50,
                 "convnext": torchvision.models.convnext_tiny,
                 "vit-fp16": torchvision.models.vit_b_16,
                 "vit-bf16": torchvision.models.vit_b_16}[model_name]()
        cfg = None
    else:
        cfg = tf.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                             num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                             max_position_embeddings=max(seq, 4096))
        model = tf.LlamaForCausalLM(cfg)
    if batch % accum:
        raise SystemExit(f"batch {batch} is not a multiple of ACCUM={accum}")
    micro = batch // accum
    amp = model_name.endswith(("bf16", "fp16")) or model_name == "unet"
    amp_dtype = torch.float16 if model_name.endswith("fp16") else torch.bfloat16
    state = {}

    def prepare() -> None:
        state["scaler"] = torch.amp.GradScaler("cuda", enabled=model_name.endswith("fp16"))
        model.cuda()
        state["opt"] = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        scaler, opt = state["scaler"], state["opt"]
        for _ in range(accum):
            with torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
                if model_name == "unet":  # noisy latents, the noise to predict
                    x = torch.randn(micro, 4, seq, seq, device="cuda")
                    noise = torch.randn_like(x)
                    loss = torch.nn.functional.mse_loss(model(x + noise), noise)
                elif model_name == "t5":
                    x = torch.randint(0, cfg.vocab_size, (micro, seq), device="cuda")
                    y = torch.randint(0, cfg.vocab_size, (micro, seq // 4), device="cuda")
                    loss = model(input_ids=x, labels=y).loss
                elif cfg is None:  # images and class labels
                    x = torch.randn(micro, 3, seq, seq, device="cuda")
                    y = torch.randint(0, 1000, (micro,), device="cuda")
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                else:
                    x = torch.randint(0, cfg.vocab_size, (micro, seq), device="cuda")
                    loss = model(input_ids=x, labels=x).loss
            scaler.scale(loss / accum).backward()
            del loss, x
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    return SweepJob(model, cfg, batch, seq, accum, micro, prepare, step)
