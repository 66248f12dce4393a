#!/usr/bin/env python3
"""The layering check fails where it should: a copy of the tree with one forbidden include added
(a stage reaching up, a folder reaching into another's detail/, and the allocator's replay probe
outside sim/replay) must be refused, naming each.

usage: scripts/check_layering_test.py REPO_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

root = os.path.abspath(sys.argv[1])
checker = os.path.join(root, "scripts", "check_layering.py")
cases = [
    ("core/caching_allocator.cpp", '#include "sim/trace/trace.hpp"', "core/ may include only"),
    ("sim/trace/trace.cpp", '#include "sim/replay/replay.hpp"', "sim/trace/ may include only"),
    ("sim/report/replay_report.cpp", '#include "core/detail/block.hpp"', "internal to core/"),
    ("backends/simulated_device.cpp", '#include "sim/replay/replay.hpp"', "backends/ may include"),
    # the allocator's replay probe is sim/replay's alone, not its readers' nor the core's own
    ("sim/report/replay_report.cpp", '#include "core/probe/replay_probe.hpp"',
     "sim/report/ may include only"),
    ("core/caching_allocator.cpp", '#include "core/probe/replay_probe.hpp"',
     "core/ may include only"),
]
failures = 0
with tempfile.TemporaryDirectory() as tmp:
    for folder in ("core", "backends", "sim", "fuzz", "proptests", "bench", "docs"):
        shutil.copytree(os.path.join(root, folder), os.path.join(tmp, folder))
    clean = subprocess.run([sys.executable, checker, tmp], capture_output=True, text=True)
    if clean.returncode != 0:
        print("the unchanged tree was refused:\n" + clean.stdout)
        failures += 1
    for path, line, expected in cases:
        target = os.path.join(tmp, path)
        original = open(target).read()
        open(target, "w").write(line + "\n" + original)
        p = subprocess.run([sys.executable, checker, tmp], capture_output=True, text=True)
        open(target, "w").write(original)
        if p.returncode != 1 or f"{path}:1: includes" not in p.stdout or expected not in p.stdout:
            print(f"FAIL: {line} in {path}: exit {p.returncode}, expected '{expected}':\n{p.stdout}")
            failures += 1
        else:
            print(f"ok: {line} in {path} refused")
sys.exit(1 if failures else 0)
