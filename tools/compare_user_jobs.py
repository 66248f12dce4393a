"""Traces the user jobs (tools/user_jobs/, as tools/user_job_list.py names them) on the CPU with
allocsim.trace and compares each with its GPU recording (tools/gpu/record_user_jobs.py): the
peaks of both replays, and where the trace has an upper-bound twin, whether the real peak lies
between the two.

usage: python3 tools/compare_user_jobs.py RECORDINGS_DIR OUTDIR [NAME ...]
  (PYTHONPATH=build/python, and the libraries the jobs import for theirs)
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from user_job_list import JOBS  # noqa: E402


def peaks(path):
    import allocsim
    stats = allocsim.replay(path, capacity="80GiB")["memory_stats"]
    return stats["allocated_bytes.all.peak"], stats["reserved_bytes.all.peak"]


def main():
    recordings, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    print("| job | real peak reserved | traced | error | upper bound | within bounds |")
    print("|---|---|---|---|---|---|")
    for name in sys.argv[3:] or list(JOBS):
        script, args, _ = JOBS[name]
        out = os.path.join(outdir, name + ".pickle.gz")
        args = [a.replace("{snapshot}", os.path.join(outdir, name + ".own.pickle")) for a in args]
        p = subprocess.run([sys.executable, "-m", "allocsim.trace",
                            os.path.join(HERE, "user_jobs", script), "-o", out, "--card", "h100",
                            "--", *args], capture_output=True, text=True, cwd=outdir)
        recorded = os.path.join(recordings, name + ".pickle.gz")
        if p.returncode or not os.path.exists(recorded):
            why = "no recording" if p.returncode == 0 else p.stderr.strip().splitlines()[-1]
            print(f"| {name} | | | {why} | | |")
            continue
        real = peaks(recorded)[1]
        traced = peaks(out)[1]
        upper_path = out[:-len(".pickle.gz")] + ".upper.pickle.gz"
        upper = peaks(upper_path)[1] if os.path.exists(upper_path) else None
        unbounded = "no upper bound" in p.stderr
        within = (traced <= real and (upper is None or real <= upper)) if (upper or unbounded) \
            else None
        print(f"| {name} | {real:,} | {traced:,} | {100 * (traced - real) / real:+.2f}% | "
              f"{'none' if unbounded else (f'{upper:,}' if upper else '')} | "
              f"{'' if within is None else ('yes' if within else 'no')} |")


if __name__ == "__main__":
    main()
