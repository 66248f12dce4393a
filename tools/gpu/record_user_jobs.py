"""Records the user jobs of tools/user_jobs/ on this GPU as a user records them: allocsim's
recorder (allocsim.torch.record_memory_history) started before the script runs and its snapshot
dumped after, with PyTorch's own peaks beside it. A script that records its own history
(self_recording) is run as it is: its own snapshot is the recording.

usage: record_user_jobs.py [-j N] OUTDIR [NAME ...]   (default: every job of tools/user_job_list.py)
  writes OUTDIR/NAME.pickle.gz and OUTDIR/NAME.json; -j runs N jobs at once (each its own
  process, so its own allocator: the recordings are as if each ran alone)
"""
import concurrent.futures
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
from user_job_list import JOBS  # noqa: E402

RUN = r"""
import gzip, json, os, pickle, runpy, shutil, sys
import torch
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import allocsim.torch
out, script, own = sys.argv[2], sys.argv[3], sys.argv[4] == "own"
own_path = next((a for a in sys.argv[5:] if a.endswith(".own.pickle")), None)
if not own:
    allocsim.torch.record_memory_history(max_entries=10**7)
sys.argv = [script] + sys.argv[5:]
runpy.run_path(script, run_name="__main__")
torch.cuda.synchronize()
stats = torch.cuda.memory_stats()
if own:
    with open(own_path, "rb") as f:
        snapshot = pickle.load(f)
else:
    snapshot = allocsim.torch.snapshot()
with gzip.open(out + ".pickle.gz", "wb") as f:
    pickle.dump(snapshot, f)
with open(out + ".json", "w") as f:
    json.dump({"peak_reserved": stats["reserved_bytes.all.peak"],
               "peak_allocated": stats["allocated_bytes.all.peak"],
               "num_ooms": stats["num_ooms"], "device": torch.cuda.get_device_name(),
               "torch": torch.__version__}, f)
"""


def record(outdir, name):
    script, args, own = JOBS[name]
    path = os.path.join(ROOT, "tools", "user_jobs", script)
    job_args = [a.replace("{snapshot}", os.path.join(outdir, name + ".own.pickle")) for a in args]
    start = time.time()
    p = subprocess.run(["timeout", "300", sys.executable, "-c", RUN, ROOT,
                        os.path.join(outdir, name), path, "own" if own else "recorder",
                        *job_args], capture_output=True, text=True)
    status = "ok" if p.returncode == 0 else f"exit {p.returncode}"
    report = f"{name}: {status} in {time.time() - start:.1f} s"
    return report + ("\n" + p.stderr[-3000:] if p.returncode else "")


def main():
    argv = sys.argv[1:]
    workers = 1
    if argv[:1] == ["-j"]:
        workers, argv = int(argv[1]), argv[2:]
    outdir = argv[0]
    os.makedirs(outdir, exist_ok=True)
    names = argv[1:] or list(JOBS)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for report in pool.map(lambda name: record(outdir, name), names):
            print(report, flush=True)


if __name__ == "__main__":
    main()
