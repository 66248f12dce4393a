#!/usr/bin/env python3
"""The wheel scripts/build_wheel.sh built installs with pip (offline) into a fresh virtual
environment and runs there, away from the build tree: the `allocsim` command on a shipped workload,
`import allocsim` with replay, plan, predict and advise, and an error path. Its binary needs only
glibc (libc, libm, the loader), and its platform tag names the newest glibc symbol version the
binary references.

usage: wheel_test.py WHEEL WORKLOADS_DIR
"""
import os
import re
import subprocess
import sys
import tempfile
import zipfile

wheel, workloads = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(*command, **kwargs):
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


with tempfile.TemporaryDirectory(prefix="allocsim-wheel-") as tmp:
    # The binary inside the wheel: what it links, and the glibc its tag promises.
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        check("allocsim/bin/allocsim" in names, "the wheel holds allocsim/bin/allocsim")
        check(any(n.endswith("LICENSE") for n in names), "the wheel holds the LICENSE")
        # every module and data file of the package's source tree (a subpackage left out of
        # pyproject.toml's list would be missing from installs only)
        source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        wanted = []
        for root, dirs, files in os.walk(os.path.join(source, "allocsim")):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            wanted += [os.path.relpath(os.path.join(root, f), source).replace(os.sep, "/")
                       for f in files if f.endswith((".py", ".json.gz"))]
        missing = sorted(set(wanted) - set(names))
        check(bool(wanted) and not missing, f"the wheel holds the package's files: {missing}")
        z.extract("allocsim/bin/allocsim", os.path.join(tmp, "unpacked"))
    binary = os.path.join(tmp, "unpacked", "allocsim", "bin", "allocsim")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", run("readelf", "-d", binary).stdout)
    check(bool(needed) and set(needed) <= {"libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2",
                          "ld-linux-aarch64.so.1"}, f"the binary needs only glibc: {needed}")
    symbols = run("objdump", "-T", binary).stdout
    newest = max(tuple(map(int, v)) for v in re.findall(r"GLIBC_(\d+)\.(\d+)", symbols))
    tag = re.search(r"-(manylinux_(\d+)_(\d+)_\w+)\.whl$", wheel)
    check(tag is not None and (int(tag.group(2)), int(tag.group(3))) == newest,
          f"the platform tag ({tag and tag.group(1)}) names glibc {newest[0]}.{newest[1]}, "
          "the newest the binary references")

    # A fresh environment, offline, outside the build tree.
    venv = os.path.join(tmp, "venv")
    p = run(sys.executable, "-m", "venv", venv)
    check(p.returncode == 0, f"python -m venv: {p.stderr.strip()}")
    p = run(os.path.join(venv, "bin", "pip"), "install", "--quiet", "--no-index", wheel)
    check(p.returncode == 0, f"pip install --no-index the wheel: {p.stderr.strip()}")
    env = {"PATH": os.path.join(venv, "bin") + ":/usr/bin:/bin", "HOME": tmp}
    workload = os.path.join(workloads, "llama-varlen-bf16_default.pickle.gz")

    p = run("allocsim", "replay", workload, "--capacity", "10GiB", env=env, cwd=tmp)
    check(p.returncode == 3 and "CUDA out of memory. Tried to allocate 1000.00 MiB" in p.stdout,
          f"the allocsim command replays a shipped workload to its OOM (exit {p.returncode})")
    p = run("allocsim", "--version", env=env, cwd=tmp)
    check(p.returncode == 0 and p.stdout.startswith("allocsim "), "allocsim --version")
    p = run("allocsim", "replay", os.path.join(tmp, "missing.pickle"), env=env, cwd=tmp)
    check(p.returncode == 2 and p.stderr.startswith("allocsim: error: ")
          and len(p.stderr.splitlines()) == 1, "a missing file: exit 2 and one error line")

    code = """
import os, sys, allocsim
workload, sweeps, tmp = sys.argv[1:4]
assert allocsim.binary().startswith(sys.prefix), allocsim.binary()
r = allocsim.replay(workload, capacity="10GiB")
assert r["oom"] is not None, "replay: no OOM on 10 GiB"
plans = allocsim.plan(workload, card="11GiB")["plans"]
assert any(p["fits"] for p in plans) and not all(p["fits"] for p in plans), plans
a = allocsim.advise(workload, capacity="10GiB")
assert a, "advise gave nothing"
runs = [os.path.join(sweeps, f"llama-bf16_seq-{n}.pickle.gz") for n in (256, 512, 1024)]
out = allocsim.predict(runs, at=[256, 512, 1024], to=2048, out=os.path.join(tmp, "p.atrace"))
assert os.path.getsize(out) > 0
try:
    allocsim.replay(os.path.join(tmp, "missing.pickle"))
    raise SystemExit("no AllocsimError for a missing file")
except allocsim.AllocsimError as e:
    assert e.returncode == 2 and str(e).startswith("allocsim: error: "), e
print("python ok")
"""
    p = run(os.path.join(venv, "bin", "python"), "-c", code, workload,
            os.path.join(workloads, "sweeps"), tmp, env=env, cwd=tmp)
    check(p.returncode == 0 and "python ok" in p.stdout,
          f"import allocsim: replay, plan, predict, advise, AllocsimError\n{p.stdout}{p.stderr}")

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
