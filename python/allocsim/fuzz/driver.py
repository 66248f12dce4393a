"""Differential fuzzing of allocsim against PyTorch's real CUDA caching allocator (on a GPU machine).

For every setting below it generates random programs (programs.py), runs each through PyTorch with
its memory history recorded (runner.py, one process per setting and cap kind), replays the
recording with allocsim (compare.py), and shrinks each divergence to a short program that still
diverges the same way (delta debugging, re-run through PyTorch), saved as a regression case. The
uncapped programs of every setting run first, then the capped ones, so that a capped program never
shares the GPU with an uncapped one that may fill it.

usage: python -m allocsim.fuzz [ALLOCSIM] OUTDIR [--programs N] [--seed S] [--jobs J] [--shrink K]
                    [--minutes M] [--settings I,J,...] [--shape fuzz|user|pools] [--devices N]
                    [--uncapped-jobs J]
  ALLOCSIM: the allocsim binary to check (default: the package's own).
Writes OUTDIR/summary.json (every program's result), OUTDIR/summary.txt (counts per setting and kind),
OUTDIR/minimized/NAME.{json,pickle.gz} (each shrunk case, in the workloads/ layout) and
OUTDIR/diverged/ (the full recordings that diverged).
"""
import argparse, concurrent.futures, json, os, shutil, subprocess, sys, threading, time

from . import compare, programs

# Every PYTORCH_CUDA_ALLOC_CONF option the caching allocator reads, alone and combined.
SETTINGS = [
    "",
    "expandable_segments:True",
    "max_split_size_mb:128",
    "garbage_collection_threshold:0.7",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "max_split_size_mb:256,garbage_collection_threshold:0.8",
    "max_split_size_mb:256,max_non_split_rounding_mb:512",
    "expandable_segments:True,max_split_size_mb:128",
    "expandable_segments:True,garbage_collection_threshold:0.6",
    "expandable_segments:True,roundup_power2_divisions:8",
    "graph_capture_record_stream_reuse:True",
    "release_lock_on_cudamalloc:True",
    "max_split_size_mb:64,roundup_power2_divisions:2",
    "garbage_collection_threshold:0.5,max_split_size_mb:512",
    "max_non_split_rounding_mb:64",
    "expandable_segments:True,graph_capture_record_stream_reuse:True",
    "garbage_collection_threshold:0.9,roundup_power2_divisions:[>:4],max_split_size_mb:40",
    "pinned_use_cuda_host_register:False",
    "max_split_size_mb:21",
    "large_segment_size_mb:40",
    "large_segment_size_mb:64,max_split_size_mb:128",
    "large_segment_size_mb:32,expandable_segments:True",
]


def tag(i):
    return f"s{i:02d}"


class Worker:
    """One runner process (python -m allocsim.fuzz.runner) under one setting."""

    def __init__(self, conf):
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf, PYTHONUNBUFFERED="1")
        if not conf:
            env.pop("PYTORCH_CUDA_ALLOC_CONF")
        # The worker imports this package from where this process found it.
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(
            [package_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        self.env = env
        self.start()

    def start(self):
        self.p = subprocess.Popen([sys.executable, "-m", "allocsim.fuzz.runner"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=self.env)

    def record(self, name, program, cap, outdir):
        try:
            self.p.stdin.write(json.dumps({"name": name, "program": program, "cap": cap,
                                           "outdir": outdir}) + "\n")
            self.p.stdin.flush()
        except OSError as e:  # it died on the last request
            raise RuntimeError("the PyTorch worker ended") from e
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the PyTorch worker ended")
        answer = json.loads(line)
        if answer.pop("worker_ends", False):  # its process kept state the next program must not see
            self.close()
            self.start()
        return answer

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait()


def fuzz_setting(i, conf, capped, args, deadline, log):
    """Every capped (or uncapped) program of setting `i`, then shrinks of its first divergence of
    each kind."""
    out = args.outdir
    rec_dir = os.path.join(out, "recordings", tag(i) + ("_cap" if capped else ""))
    results = []
    program_deadline = time.time() + (deadline - time.time()) * 0.6
    worker = Worker(conf)
    to_shrink = {}
    try:
        for k in range(args.programs // 2):
            if time.time() > program_deadline:
                break
            seed = args.seed + k * 2 + capped
            graphs = k % 2 == 1
            program, cap = programs.generate(seed, capped, graphs, args.shape, args.devices)
            name = f"{tag(i)}_{ {'user': 'u', 'pools': 'p', 'calls': 'c'}.get(args.shape, '')}" \
                   f"{f'd{args.devices}' if args.devices > 1 else ''}" \
                   f"{'cap' if capped else 'nocap'}_{seed}"
            try:
                answer = worker.record(name, program, cap, rec_dir)
            except RuntimeError as e:  # PyTorch itself died: a fresh process for the next
                answer = {"name": name, "error": f"PyTorch crashed: {e}"}
            if "error" in answer:
                results.append({"name": name, "conf": conf, "seed": seed, "graphs": graphs,
                                "cap": cap, "error": answer["error"].splitlines()[0]})
                log(f"{name} {conf!r} error {answer['error'].splitlines()[0]}")
                worker.close()
                worker = Worker(conf)
                continue
            r = compare.compare(args.allocsim, rec_dir, name)
            r.update(conf=conf, seed=seed, graphs=graphs, ops=len(program), ooms=answer["ooms"],
                     clean_after=answer["clean_after"], kind=compare.kind(r))
            # The same recording as PyTorch's own recorder writes it: no marks of calls or pools.
            u = compare.compare(args.allocsim, rec_dir, name, without_marks=True)
            r.update(kind_without_marks=compare.kind(u), warned_without_marks=u["warned"])
            r["calls"] = program_calls(program)
            results.append(r)
            log(f"{name} {conf!r} ops={len(program)} ooms={answer['ooms']} -> "
                f"{r['kind'] or 'exact'}")
            if r["kind"] not in (None, "device_full") and (r["kind"], graphs) not in to_shrink:
                to_shrink[(r["kind"], graphs)] = (r, program, cap)
                os.makedirs(os.path.join(out, "diverged"), exist_ok=True)
                for ext in (".json", ".pickle.gz"):
                    shutil.copy(os.path.join(rec_dir, name + ext), os.path.join(out, "diverged"))
        for r, program, cap in list(to_shrink.values())[:args.shrink_cases]:
            if time.time() < deadline - 30:
                r["minimized"] = minimize(worker, r["name"], program, cap, r["kind"], args, out,
                                          deadline)
                log(f"{r['name']} minimized: {r['minimized']}")
    finally:
        worker.close()
    if not args.keep_recordings:
        shutil.rmtree(rec_dir, ignore_errors=True)
    return results


def program_calls(program):
    """The kinds of operation a program makes beside allocations and frees (programs.py's names),
    sorted: which of the allocator's calls its result speaks for."""
    calls = {op[0] for op in program} - {"alloc", "free", "end_capture", "end_use_pool"}
    if any(op[0] == "alloc" and len(op) > 4 and op[4] == "raw" for op in program):
        calls.add("caching_allocator_alloc")
    if any(op[0] == "capture" and op[3] is not None for op in program):
        calls.add("capture_shared_pool")
    for option in ("use_on_oom", "no_split"):
        if any(op[0] == "mem_pool" and op[2:] and op[2].get(option) for op in program):
            calls.add("mem_pool_" + option)
    return sorted(calls)


def minimize(worker, name, program, cap, kind, args, out, deadline):
    tmp = os.path.join(out, "shrink", name)
    counter = [0]

    def diverges(candidate):
        if time.time() > deadline - 20:
            return False
        counter[0] += 1
        cname = f"{name}_try{counter[0]}"
        try:
            answer = worker.record(cname, candidate, cap, tmp)
        except RuntimeError:
            return False
        if "error" in answer:
            return False
        return compare.kind(compare.compare(args.allocsim, tmp, cname)) == kind

    small, calls = programs.shrink(program, diverges, args.shrink)
    mname = f"{name}_min"
    mdir = os.path.join(out, "minimized")
    try:
        worker.record(mname, small, cap, mdir)
    except RuntimeError as e:
        return {"name": mname, "error": f"PyTorch crashed: {e}"}
    r = compare.compare(args.allocsim, mdir, mname)
    shutil.rmtree(tmp, ignore_errors=True)
    return {"name": mname, "ops": len(small), "oracle_calls": calls, "kind": compare.kind(r)}


def main():
    ap = argparse.ArgumentParser(
        prog="python -m allocsim.fuzz", description=__doc__.splitlines()[0],
        usage="%(prog)s [ALLOCSIM] OUTDIR [options]  (ALLOCSIM: default, the package's binary)")
    ap.add_argument("paths", nargs="+", metavar="PATH", help="[ALLOCSIM] OUTDIR")
    ap.add_argument("--programs", type=int, default=60, help="per setting (half capped)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--uncapped-jobs", type=int,
                    help="programs run at once without a cap (default: --jobs); fewer keep"
                         " uncapped programs from filling the device together")
    ap.add_argument("--shrink", type=int, default=80, help="oracle runs per shrink")
    ap.add_argument("--shrink-cases", type=int, default=3, help="divergences shrunk per setting")
    ap.add_argument("--minutes", type=float, default=8)
    ap.add_argument("--settings", help="indices into the list of settings")
    ap.add_argument("--shape", choices=("fuzz", "user", "pools", "calls"), default="fuzz",
                    help="the programs' shape (programs.py): the fuzzer's own, users',"
                         " users' with MemPools, or those with the calls that change the allocator"
                         " mid-run")
    ap.add_argument("--devices", type=int, default=1,
                    help="devices the programs switch between (the machine needs as many GPUs)")
    ap.add_argument("--keep-recordings", action="store_true",
                    help="keep every program's recording in OUTDIR/recordings")
    args = ap.parse_args()
    if len(args.paths) > 2:
        ap.error("at most two paths: [ALLOCSIM] OUTDIR")
    args.outdir = args.paths[-1]
    if len(args.paths) == 2:
        args.allocsim = os.path.abspath(args.paths[0])
    else:  # the binary this package carries
        from .. import binary

        args.allocsim = binary()
    os.makedirs(args.outdir, exist_ok=True)
    deadline = time.time() + args.minutes * 60
    chosen = [int(x) for x in args.settings.split(",")] if args.settings else range(len(SETTINGS))
    lock = threading.Lock()

    def log(line):
        with lock:
            print(line, flush=True)

    results = []
    # Uncapped programs first, then the capped ones, each phase with the GPU to itself: a capped
    # process holds at most its cap, so capped programs side by side never fill the device, and a
    # cudaMalloc refused under a cap is the cap's (beside an uncapped program holding tens of GiB,
    # the device itself may refuse it, which the trace cannot tell from the cap).
    start = time.time()
    for capped, phase_end in ((False, start + (deadline - start) / 2), (True, deadline)):
        jobs = args.jobs if capped or not args.uncapped_jobs else args.uncapped_jobs
        with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
            futures = [ex.submit(fuzz_setting, i, SETTINGS[i], capped, args, phase_end, log)
                       for i in chosen]
            for i, f in zip(chosen, futures):
                try:
                    results += f.result()
                except Exception as e:  # one setting's worker failing leaves the others' results
                    results.append({"name": tag(i), "conf": SETTINGS[i],
                                    "error": f"{type(e).__name__}: {e}"})
    with open(os.path.join(args.outdir, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    lines = []
    for i in chosen:
        rs = [r for r in results if r.get("conf") == SETTINGS[i]]
        counts = {}
        for r in rs:
            k = "error" if "error" in r else (r["kind"] or "exact")
            k += " (silent)" if r.get("kind") not in (None, "device_full") and not r.get("warned") \
                else ""
            counts[k] = counts.get(k, 0) + 1
        lines.append(f"{tag(i)} {SETTINGS[i] or '(defaults)'}: {len(rs)} programs, {counts}")
    total = [r for r in results if "error" not in r]
    lines.append(f"total: {len(results)} programs, {sum(not r['kind'] for r in total)} exact, "
                 f"{sum(bool(r['kind']) for r in total)} diverged, {len(results) - len(total)} errors")
    for graphs in (False, True):
        unmarked = [r for r in total if "kind_without_marks" in r and r.get("graphs") == graphs]
        lines.append(f"{'with' if graphs else 'without'} CUDA graphs, marks taken out: "
                     f"{len(unmarked)} programs, "
                     f"{sum(not r['kind_without_marks'] for r in unmarked)} exact, "
                     f"{sum(bool(r['kind_without_marks']) and not r['warned_without_marks'] for r in unmarked)}"
                     f" diverged silently")
    with open(os.path.join(args.outdir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
