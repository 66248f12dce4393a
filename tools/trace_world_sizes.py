"""Traces one rank of tools/gpu/record_world_sizes.py's FSDP2 or DDP job on the CPU with
allocsim.trace and PyTorch's fake process group (no GPU, no other process): the trace of that rank
at N ranks, to compare with its recording (workloads/world_sizes/).

usage: python3 tools/trace_world_sizes.py OUTDIR N1,N2,... [STEPS] [BATCH] [RANK] [MODE]
  MODE fsdp2 (default) or ddp; writes OUTDIR/MODE_bBATCH_ws-N_rank-RANK.pickle.gz. Needs torch
  (the CPU build is enough), transformers and the allocsim package (PYTHONPATH=build/python).
"""
import os
import sys


def trace_rank(out, world, rank, steps, batch, mode="fsdp2"):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import torch.distributed as dist
    import transformers as tf
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import allocsim
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu"))
    from record_world_sizes import build_model

    def setup():
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        cfg, model = build_model(tf, torch)
        model.cuda()
        if mode == "fsdp2":
            mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for layer in model.model.layers:
                fully_shard(layer, mp_policy=mp)
            fully_shard(model, mp_policy=mp)
        else:
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
        return cfg, model, torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(state):
        cfg, model, opt = state
        x = torch.randint(0, cfg.vocab_size, (batch, 512), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "ddp"):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        del loss, x
        opt.step()
        opt.zero_grad(set_to_none=True)

    try:
        tracer = allocsim.trace(step, steps=steps, setup=setup, out=out, card="h200")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    allocs = sum(1 for r in tracer.requests() if r.action == "alloc")
    print(f"{out}: {allocs} allocations")


def main():
    outdir, worlds = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    batch = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    rank = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    mode = sys.argv[6] if len(sys.argv) > 6 else "fsdp2"
    if mode not in ("fsdp2", "ddp"):
        raise SystemExit(f"MODE must be fsdp2 or ddp, not {mode}")
    os.makedirs(outdir, exist_ok=True)
    for world in (int(w) for w in worlds.split(",")):
        trace_rank(os.path.join(outdir, f"{mode}_b{batch}_ws-{world}_rank-{rank}.pickle.gz"), world,
                   rank, steps, batch, mode)


if __name__ == "__main__":
    main()
