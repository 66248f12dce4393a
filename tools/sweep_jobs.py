"""The training jobs of the sweeps (workloads/sweeps/): one definition for the GPU recorder
(tools/gpu/record_sweep.py) and for tracing them on the CPU (tools/trace_sweep.py).

  MODEL: gpt2 (fp32, sequence 1024, batch 4 unless swept), llama-bf16 (bf16 autocast, sequence
  512, batch 4 unless swept), bert (BERT-base masked LM, fp32, sequence 512, batch 8 unless
  swept), resnet50 (torchvision, fp32, 224x224 images, batch 32 unless swept), vit-fp16 /
  vit-bf16 (torchvision ViT-B/16 under fp16 autocast with a GradScaler, or bf16 autocast; 224x224,
  batch 16 unless swept) or convnext (torchvision ConvNeXt-Tiny, fp32, 224x224, batch 32 unless
  swept); PARAM: batch, seq (the language models) or side (the image models' image side).
"""
from typing import Any, Callable, NamedTuple, Optional

MODELS = ("gpt2", "llama-bf16", "bert", "resnet50", "vit-fp16", "vit-bf16", "convnext")
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


def make_job(model_name: str, param: str, value: int, accum: int = 1) -> SweepJob:
    import torch
    import transformers as tf

    images = model_name in IMAGES
    batch = {"bert": 8, "resnet50": 32, "vit-fp16": 16, "vit-bf16": 16, "convnext": 32}.get(
        model_name, 4)
    seq = 224 if images else {"gpt2": 1024}.get(model_name, 512)  # images: the side
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
    amp = model_name.endswith(("bf16", "fp16"))
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
                if cfg is None:  # images and class labels
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
