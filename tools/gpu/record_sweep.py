"""Records a training job at several values of one size parameter (batch size, sequence length),
each value in its own process, for `allocsim predict` and `plan --at`: the snapshot (gzip pickle)
and PyTorch's own statistics (JSON) of each run.

usage: python3 tools/gpu/record_sweep.py OUTDIR MODEL PARAM V1,V2,... [STEPS] [CAP_BYTES]
  MODEL: gpt2 (fp32, sequence 1024, batch 4 unless swept), llama-bf16 (bf16 autocast,
         sequence 512, batch 4 unless swept), bert (BERT-base masked LM, fp32, sequence 512,
         batch 8 unless swept), resnet50 (torchvision, fp32, 224x224 images, batch 32 unless
         swept), vit-fp16 / vit-bf16 (torchvision ViT-B/16 under fp16 autocast with a GradScaler,
         or bf16 autocast; 224x224, batch 16 unless swept) or convnext (torchvision ConvNeXt-Tiny,
         fp32, 224x224, batch 32 unless swept); PARAM: batch, seq (the language models) or side
         (the image models' image side).
  Each run writes OUTDIR/MODEL_PARAM-V.pickle.gz and .json (max_memory_reserved, steps done,
  the OOM if one ended it). CAP_BYTES caps the process (set_per_process_memory_fraction);
  STACKS=1 in the environment records stack frames. ACCUM=K accumulates gradients: each step runs
  K micro-batches of batch/K (the batch swept or given), one optimizer step after them; the
  names end in _accumK.
"""
import gzip
import json
import os
import pickle
import subprocess
import sys


def run(out, model_name, param, value, steps, cap):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers as tf

    torch.manual_seed(0)
    torch.cuda.init()
    _, total = torch.cuda.mem_get_info()
    if cap:
        torch.cuda.set_per_process_memory_fraction(cap / total)
    images = model_name in ("resnet50", "vit-fp16", "vit-bf16", "convnext")
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
        model = {"resnet50": torchvision.models.resnet50, "convnext": torchvision.models.convnext_tiny,
                 "vit-fp16": torchvision.models.vit_b_16,
                 "vit-bf16": torchvision.models.vit_b_16}[model_name]()
        cfg = None
    else:
        cfg = tf.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                             num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                             max_position_embeddings=max(seq, 4096))
        model = tf.LlamaForCausalLM(cfg)
    accum = int(os.environ.get("ACCUM", "1"))
    if batch % accum:
        raise SystemExit(f"batch {batch} is not a multiple of ACCUM={accum}")
    micro = batch // accum
    amp = model_name.endswith(("bf16", "fp16"))
    amp_dtype = torch.float16 if model_name.endswith("fp16") else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda", enabled=model_name.endswith("fp16"))
    model.cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # Stack frames where STACKS=1 (alignment by frames), else none (as a plain recording).
    context = "all" if os.environ.get("STACKS") == "1" else None
    torch.cuda.memory._record_memory_history(enabled="all", context=context, stacks="python")
    result = {"model": model_name, "param": param, "value": value, "batch": batch,
              ("side" if cfg is None else "seq"): seq,
              "accum": accum, "micro_batch": micro, "steps": steps, "steps_done": 0, "cap_bytes": cap, "total_bytes": total,
              "device": torch.cuda.get_device_name(), "torch": torch.__version__, "oom": None}
    try:
        for _ in range(steps):
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
            result["steps_done"] += 1
    except torch.OutOfMemoryError as e:
        result["oom"] = str(e).splitlines()[0]
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    result["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    result["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    result["memory_stats"] = {k: v for k, v in torch.cuda.memory_stats().items()
                              if isinstance(v, int)}
    with gzip.open(out + ".pickle.gz", "wb") as f:
        pickle.dump(snapshot, f)
    with open(out + ".json", "w") as f:
        json.dump(result, f, indent=1)


def main():
    outdir, model_name, param, values = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    cap = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    os.makedirs(outdir, exist_ok=True)
    for v in values.split(","):
        accum = int(os.environ.get("ACCUM", "1"))
        name = (f"{model_name}_{param}-{v}" + (f"_accum{accum}" if accum > 1 else "") +
                (f"_cap{cap}" if cap else ""))
        out = os.path.join(outdir, name)
        p = subprocess.run([sys.executable, __file__, "--run", out, model_name, param, v,
                            str(steps), str(cap)], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{name}: exit {p.returncode}\n{p.stderr[-2000:]}")
            continue
        r = json.load(open(out + ".json"))
        print(f"{name}: {r['steps_done']}/{steps} steps, max_memory_reserved "
              f"{r['max_memory_reserved']}, OOM: {r['oom']}")


if __name__ == "__main__":
    if sys.argv[1] == "--run":
        _, _, out, model_name, param, value, steps, cap = sys.argv
        run(out, model_name, param, int(value), int(steps), int(cap))
    else:
        main()
