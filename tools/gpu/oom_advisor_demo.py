"""The OOM advisor on a real GPU: a Llama-style training job (bf16 autocast, sequence lengths
varying from step to step) under a memory-fraction cap runs out of memory with the default
allocator settings; the advice printed at the OOM must say which setting would have avoided it;
a second run of the same job with that setting must then run every step.

usage: PYTHONPATH=build/python python3 tools/gpu/oom_advisor_demo.py OUTDIR [CAP_BYTES] [STEPS]
       (runs the job twice, each in its own process; exit 0 when both behave as the advice says)
"""
import json
import os
import random
import subprocess
import sys
import time


def job(cap, steps, out_dir):
    """One run, under PYTORCH_CUDA_ALLOC_CONF as the environment sets it, with the advisor on."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers as tf

    import allocsim.torch

    torch.manual_seed(0)
    random.seed(0)
    torch.cuda.init()
    _, total = torch.cuda.mem_get_info()
    torch.cuda.set_per_process_memory_fraction(cap / total)
    advisor = allocsim.torch.advise_on_oom(out_dir=out_dir)
    cfg = tf.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                         num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                         max_position_embeddings=4096)
    model = tf.LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    result = {"alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "cap_bytes": cap,
              "device": torch.cuda.get_device_name(), "steps_done": 0, "oom": None}
    try:
        for _ in range(steps):
            t = random.choice([128, 256, 384, 512, 768, 1024, 1536, 2048])
            x = torch.randint(0, cfg.vocab_size, (4, t), device="cuda")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(input_ids=x, labels=x)
            out.loss.backward()
            del out, x
            opt.step()
            opt.zero_grad(set_to_none=True)
            result["steps_done"] += 1
    except torch.OutOfMemoryError as e:
        # The user's exception, as PyTorch raised it: the advisor printed before it.
        result["oom"] = str(e).splitlines()[0]
        advice = advisor.last_advice or {}
        result["advice"] = {k: v for k, v in advice.items() if k != "text"}
        result["advice_text"] = advice.get("text")
    result["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    print(json.dumps(result))


def main():
    out_dir = sys.argv[1]
    cap = int(sys.argv[2]) if len(sys.argv) > 2 else 10_500_000_000
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 12
    os.makedirs(out_dir, exist_ok=True)

    def run(conf):
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
        started = time.time()
        p = subprocess.run([sys.executable, __file__, "--job", str(cap), str(steps), out_dir],
                           env=env, capture_output=True, text=True)
        sys.stderr.write(p.stderr)
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["wall_s"] = round(time.time() - started, 1)
        return r

    first = run("")
    print(f"defaults: {first['steps_done']}/{steps} steps, OOM: {first['oom']}")
    ok = first["oom"] is not None and first["oom"].startswith("CUDA out of memory")
    fits = [s for s in first.get("advice", {}).get("settings", []) if s["fits"]]
    second = None
    if fits:
        best = max(fits, key=lambda s: s["margin_bytes"])
        second = run(best["alloc_conf"])
        print(f"{best['alloc_conf']}: {second['steps_done']}/{steps} steps, OOM: {second['oom']}, "
              f"max_memory_reserved {second['max_memory_reserved']}")
        ok = ok and second["oom"] is None and second["steps_done"] == steps
    else:
        ok = False
        print("the advice found no setting that fits")
    with open(os.path.join(out_dir, "demo.json"), "w") as f:
        json.dump({"first": first, "second": second, "ok": ok}, f, indent=1)
    print("advice confirmed" if ok else "advice NOT confirmed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if sys.argv[1] == "--job":
        job(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        main()
