"""Records one or more steps of a sweep job (tools/sweep_jobs.py) with C++ and Python stack frames
on every allocation: which CUDA kernel allocated each temporary no tensor op shows (what
allocsim.trace models). Also writes what the GPU machine's PyTorch registers for CUDA's autocast
(the ops with an AutocastCUDA kernel) and the library versions.

usage: python3 tools/gpu/record_kernel_stacks.py OUTDIR MODEL BATCH [STEPS]
  writes OUTDIR/MODEL_batch-B_stacks.pickle.gz and OUTDIR/environment.json
"""
import gzip
import json
import os
import pickle
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from sweep_jobs import make_job  # noqa: E402

outdir, model_name, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 1
os.makedirs(outdir, exist_ok=True)
torch.manual_seed(0)
job = make_job(model_name, "batch", batch)
job.prepare()
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="all")
for _ in range(steps):
    job.step()
torch.cuda.synchronize()
snapshot = torch.cuda.memory._snapshot()
with gzip.open(os.path.join(outdir, f"{model_name}_batch-{batch}_stacks.pickle.gz"), "wb") as f:
    pickle.dump(snapshot, f)
env_path = os.path.join(outdir, "environment.json")
if not os.path.exists(env_path):
    import transformers
    import torchvision
    names = torch._C._dispatch_get_all_op_names()
    with open(env_path, "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__,
                   "torchvision": torchvision.__version__, "device": torch.cuda.get_device_name(),
                   "autocast_cuda_ops": sorted(
                       n for n in names
                       if torch._C._dispatch_has_kernel_for_dispatch_key(n, "AutocastCUDA"))},
                  f, indent=1)
print(model_name, batch, "recorded")
