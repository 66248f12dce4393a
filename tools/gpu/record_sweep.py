"""Records a training job at several values of one size parameter (batch size, sequence length),
each value in its own process, for `allocsim predict` and `plan --at`: the snapshot (gzip pickle)
and PyTorch's own statistics (JSON) of each run.

usage: python3 tools/gpu/record_sweep.py OUTDIR MODEL PARAM V1,V2,... [STEPS] [CAP_BYTES]
  MODEL and PARAM: tools/sweep_jobs.py, which defines the jobs.
  Each run writes OUTDIR/MODEL_PARAM-V.pickle.gz and .json (max_memory_reserved, steps done,
  the OOM if one ended it). CAP_BYTES caps the process (set_per_process_memory_fraction);
  STACKS=1 in the environment records stack frames. ACCUM=K accumulates gradients: each step runs
  K micro-batches of batch/K (the batch swept or given), one optimizer step after them; the
  names end in _accumK. WARMUP=N runs N steps before the history starts (a recording begun
  after warm-up, as users make them), MAX_ENTRIES=M keeps only the last M events (PyTorch's
  max_entries: a window of the run); the names end in _warmupN and _maxM.
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

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from sweep_jobs import make_job

    torch.manual_seed(0)
    torch.cuda.init()
    _, total = torch.cuda.mem_get_info()
    if cap:
        torch.cuda.set_per_process_memory_fraction(cap / total)
    job = make_job(model_name, param, value, int(os.environ.get("ACCUM", "1")))
    job.prepare()
    warmup = int(os.environ.get("WARMUP", "0"))
    for _ in range(warmup):
        job.step()
    max_entries = int(os.environ.get("MAX_ENTRIES", "0")) or sys.maxsize
    # Stack frames where STACKS=1 (alignment by frames), else none (as a plain recording).
    context = "all" if os.environ.get("STACKS") == "1" else None
    torch.cuda.memory._record_memory_history(enabled="all", context=context, stacks="python",
                                         max_entries=max_entries)
    result = {"model": model_name, "param": param, "value": value, "batch": job.batch,
              ("side" if job.config is None else "seq"): job.seq,
              "accum": job.accum, "micro_batch": job.micro, "steps": steps, "steps_done": 0,
              "warmup_steps": warmup, "max_entries": os.environ.get("MAX_ENTRIES"),
              "cap_bytes": cap, "total_bytes": total,
              "device": torch.cuda.get_device_name(), "torch": torch.__version__, "oom": None}
    try:
        for _ in range(steps):
            job.step()
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
                (f"_cap{cap}" if cap else "") +
                (f"_warmup{os.environ['WARMUP']}" if os.environ.get("WARMUP") else "") +
                (f"_max{os.environ['MAX_ENTRIES']}" if os.environ.get("MAX_ENTRIES") else ""))
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
