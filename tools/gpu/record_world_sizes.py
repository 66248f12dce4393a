"""Records a data-parallel training job at several world sizes, one snapshot per rank, for
`allocsim predict --world-size` and `plan --ranks`: the per-rank snapshot (gzip pickle) and
PyTorch's own statistics (JSON) of every rank of every run.

usage: python3 tools/gpu/record_world_sizes.py OUTDIR MODE N1,N2,... [STEPS] [BATCH] [CAP_BYTES]
  MODE: fsdp2 (fully_shard on each decoder layer and the root, bf16 parameters, fp32 gradient
        reduction, AdamW) or ddp (DistributedDataParallel, bf16 autocast, AdamW). The model is
        the Llama-style one of record_sweep.py (8 layers, hidden 1024, vocab 32000), sequence
        512, BATCH sequences per rank (4 unless given). Each world size runs in processes of its
        own (NCCL, one GPU per rank) and writes OUTDIR/MODE_bBATCH_ws-N_rank-R.pickle.gz and .json.
  CAP_BYTES caps every rank (set_per_process_memory_fraction); the names then end in _capCAP.
  STACKS=1 in the environment records stack frames.
"""
import gzip
import json
import os
import pickle
import subprocess
import sys
import time


def build_model(tf, torch):
    cfg = tf.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                         num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                         max_position_embeddings=4096)
    torch.manual_seed(0)
    return cfg, tf.LlamaForCausalLM(cfg)


def run_rank(rank, world, out, mode, steps, batch, port, cap):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    import torch
    import torch.distributed as dist
    import transformers as tf

    torch.cuda.set_device(rank)
    if cap:
        torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.mem_get_info()[1])
    context = "all" if os.environ.get("STACKS") == "1" else None
    # From the start: the process group's and the model's allocations are the job's too.
    torch.cuda.memory._record_memory_history(enabled="all", context=context, stacks="python")
    dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
    cfg, model = build_model(tf, torch)
    model.cuda()
    amp = True
    if mode == "fsdp2":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        amp = False
    else:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device="cuda").manual_seed(1 + rank)
    result = {"mode": mode, "world_size": world, "rank": rank, "batch_per_rank": batch,
              "seq": 512, "cap_bytes": cap, "total_bytes": torch.cuda.mem_get_info()[1], "steps": steps, "steps_done": 0,
              "device": torch.cuda.get_device_name(), "torch": torch.__version__, "oom": None}
    try:
        for _ in range(steps):
            x = torch.randint(0, cfg.vocab_size, (batch, 512), device="cuda", generator=gen)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                loss = model(input_ids=x, labels=x).loss
            loss.backward()
            del loss, x
            opt.step()
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
    name = os.path.join(out, f"{mode}_b{batch}_ws-{world}_rank-{rank}" + (f"_cap{cap}" if cap else ""))
    with gzip.open(name + ".pickle.gz", "wb") as f:
        pickle.dump(snapshot, f)
    with open(name + ".json", "w") as f:
        json.dump(result, f, indent=1)
    if result["oom"]:
        os._exit(0)  # the other ranks wait in a collective: the launcher ends them
    dist.barrier()
    dist.destroy_process_group()


def main():
    out, mode, worlds = sys.argv[1], sys.argv[2], sys.argv[3]
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    batch = int(sys.argv[5]) if len(sys.argv) > 5 else 4
    cap = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    if mode not in ("fsdp2", "ddp"):
        raise SystemExit(f"MODE must be fsdp2 or ddp, not {mode}")
    os.makedirs(out, exist_ok=True)
    for i, w in enumerate(int(v) for v in worlds.split(",")):
        port = 29500 + i
        procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), str(w), out, mode,
                                   str(steps), str(batch), str(port), str(cap)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for r in range(w)]
        deadline = time.time() + 150
        for r, p in enumerate(procs):
            try:
                log, _ = p.communicate(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                print(f"{mode} ws {w} rank {r}: ended, waiting on a rank that ran out of memory")
                continue
            if p.returncode != 0:
                print(f"{mode} ws {w} rank {r}: exit {p.returncode}\n{log[-3000:]}")
                continue
            res = json.load(open(os.path.join(
                out, f"{mode}_b{batch}_ws-{w}_rank-{r}" + (f"_cap{cap}" if cap else "") + ".json")))
            print(f"{mode} ws {w} rank {r}: {res['steps_done']}/{steps} steps, "
                  f"max_memory_allocated {res['max_memory_allocated']}, "
                  f"max_memory_reserved {res['max_memory_reserved']}, OOM: {res['oom']}")


if __name__ == "__main__":
    if sys.argv[1] == "--rank":
        _, _, rank, world, out, mode, steps, batch, port, cap = sys.argv
        run_rank(int(rank), int(world), out, mode, int(steps), int(batch), int(port), int(cap))
    else:
        main()
