"""The staged package installs with pip (offline, without build isolation) and runs from the
installation with its own binary, under every Python from 3.9 to 3.13 found here. Skipped (77)
where the Python running it lacks pip, setuptools or wheel.

usage: pip_install_test.py STAGED_PACKAGE_DIR WORKLOADS_DIR
"""
import glob
import os
import subprocess
import sys
import tempfile

staged, workloads = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])


def has_packaging(python):
    return all(subprocess.run([python, *args], capture_output=True).returncode == 0
               for args in (["-c", "import setuptools, wheel"], ["-m", "pip", "--version"]))


installer = sys.executable if has_packaging(sys.executable) else None
if installer is None:
    print(f"skipped: {sys.executable} lacks pip, setuptools or wheel "
          "(the test environment of scripts/setup.sh has them)")
    sys.exit(77)
# The Pythons to run the installed package under: 3.9 to 3.13, wherever they are.
pythons = {}
for minor in range(9, 14):
    for candidate in [f"/usr/bin/python3.{minor}", f"/usr/local/bin/python3.{minor}",
                      *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{minor}.*/bin/python3")))]:
        if os.path.exists(candidate):
            pythons[f"3.{minor}"] = candidate
            break

with tempfile.TemporaryDirectory(prefix="allocsim-pip-") as tmp:
    target = os.path.join(tmp, "site")
    p = subprocess.run([installer, "-m", "pip", "install", "--quiet", "--no-build-isolation",
                        "--no-deps", "--no-index", "--target", target, staged],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"FAIL pip install: exit {p.returncode}\n{p.stdout}{p.stderr}")
        sys.exit(1)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ALLOCSIM_BINARY")}
    env["PYTHONPATH"] = target
    env["PATH"] = "/usr/bin:/bin"  # no allocsim on it: the installed one must be found
    # Every module compiles under that Python (allocsim.torch is imported only with torch).
    code = ("import allocsim, compileall, os, sys; "
            "assert compileall.compile_dir(os.path.dirname(allocsim.__file__), quiet=1); "
            "r = allocsim.replay(sys.argv[1], capacity='80GiB'); "
            "print(allocsim.binary()); print(r['oom'] is None and r['events_replayed'] > 0)")
    for version, python in pythons.items():
        p = subprocess.run([python, "-c", code,
                            os.path.join(workloads, "resnet50_default.pickle.gz")],
                           capture_output=True, text=True, env=env, cwd=tmp)
        lines = p.stdout.split()
        if (p.returncode != 0 or len(lines) != 2 or not lines[0].startswith(target)
                or lines[1] != "True"):
            print(f"FAIL the installed package under Python {version} ({python}): "
                  f"exit {p.returncode}\n{p.stdout}{p.stderr}")
            sys.exit(1)
    # The console command the package installs runs the package's binary.
    command = os.path.join(target, "bin", "allocsim")
    if not os.path.isfile(command):
        print(f"FAIL pip installed no console command: {sorted(os.listdir(target))}")
        sys.exit(1)
    p = subprocess.run([command, "replay", "-q", "--json", "-",
                        os.path.join(workloads, "resnet50_default.pickle.gz")],
                       capture_output=True, text=True, env=env, cwd=tmp)
    if p.returncode != 0 or '"memory_stats"' not in p.stdout:
        print(f"FAIL the console command: exit {p.returncode}\n{p.stderr}")
        sys.exit(1)
print(f"installed with {installer}; replays with its own binary under Python "
      f"{', '.join(pythons)}")
