"""Records allocsim.fuzz programs on a GPU through allocsim's recorder, without replaying them
there: the recordings come back to be replayed and compared (allocsim.fuzz.compare) wherever
allocsim is built: for a GPU machine without an allocsim build.

usage: record_fuzz_programs.py OUTDIR --shape calls --seed 42001 --minutes 3 --jobs 10
       [--confs ",expandable_segments:True"] [--budget-mib 14]
Writes OUTDIR/recordings.tar.gz: recordings/NAME.{pickle.gz,json} (those that fit the budget,
smallest first, the programs making fewer kinds of call last) and summary.json (every program:
its name, setting, seed, cap, the calls it made, and any error PyTorch raised).
"""
import argparse
import json
import os
import sys
import tarfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from allocsim.fuzz import programs  # noqa: E402
from allocsim.fuzz.driver import Worker, program_calls  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--shape", default="calls")
    ap.add_argument("--seed", type=int, default=42001)
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("--jobs", type=int, default=10)
    ap.add_argument("--confs", default=",expandable_segments:True")
    ap.add_argument("--budget-mib", type=float, default=14)
    args = ap.parse_args()
    rec = os.path.join(args.outdir, "recordings")
    os.makedirs(rec, exist_ok=True)
    confs = args.confs.split(",")
    deadline = time.time() + args.minutes * 60
    results, lock = [], threading.Lock()

    def job(j):
        conf = confs[j % len(confs)]
        worker = Worker(conf)
        k = j
        while time.time() < deadline:
            seed = args.seed + k
            capped, graphs = k % 4 != 3, k % 2 == 1
            program, cap = programs.generate(seed, capped, graphs, args.shape)
            name = f"j{j:02d}_{'cap' if capped else 'nocap'}_{seed}"
            r = {"name": name, "conf": conf, "seed": seed, "cap": cap, "graphs": graphs,
                 "calls": program_calls(program)}
            try:
                answer = worker.record(name, program, cap, rec)
                if "error" in answer:
                    r["error"] = answer["error"].splitlines()[0]
            except RuntimeError as e:
                r["error"] = f"PyTorch crashed: {e}"
            if "error" in r:
                worker.close()
                worker = Worker(conf)
            with lock:
                results.append(r)
            k += args.jobs
        worker.close()

    threads = [threading.Thread(target=job, args=(j,)) for j in range(args.jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.sort(key=lambda r: r["name"])
    with open(os.path.join(args.outdir, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    done = [r for r in results if "error" not in r and
            os.path.exists(os.path.join(rec, r["name"] + ".pickle.gz"))]

    def size(r):
        return sum(os.path.getsize(os.path.join(rec, r["name"] + ext))
                   for ext in (".pickle.gz", ".json"))

    done.sort(key=lambda r: (-len(r["calls"]), size(r)))
    budget, used = args.budget_mib * (1 << 20), 0
    with tarfile.open(os.path.join(args.outdir, "recordings.tar.gz"), "w:gz") as tar:
        tar.add(os.path.join(args.outdir, "summary.json"), "summary.json")
        for r in done:
            if used + size(r) > budget:
                continue
            used += size(r)
            for ext in (".pickle.gz", ".json"):
                tar.add(os.path.join(rec, r["name"] + ext), f"recordings/{r['name']}{ext}")
    print(f"{len(results)} programs, {sum('error' in r for r in results)} errors, "
          f"{used / (1 << 20):.1f} MiB kept")


if __name__ == "__main__":
    main()
