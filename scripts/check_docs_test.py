#!/usr/bin/env python3
"""The documentation check fails where it should: in a small made-up tree, a README over its line
budget, a link to a missing page, a missing path in backticks and counts unlike the tree's are each
reported, and the same tree with them fixed passes.

usage: scripts/check_docs_test.py REPO_ROOT
"""
import os
import subprocess
import sys
import tempfile

checker = os.path.join(os.path.abspath(sys.argv[1]), "scripts", "check_docs.py")


def write(root, path, text):
    os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
    with open(os.path.join(root, path), "w") as f:
        f.write(text)


def make_tree(root, broken):
    write(root, "fuzz/CMakeLists.txt", "set(fuzz_targets fuzz_a fuzz_b\n  fuzz_c)\n")
    for name in ("a", "b"):
        write(root, f"workloads/{name}.pickle.gz", "")
    write(root, "docs/page.md", "# A page\n\nThe 3 fuzz targets; `workloads/a.pickle.gz`.\n")
    readme = "# x\n\nSee [the page](docs/page.md) and `workloads/NAME.pickle.gz`.\n" \
             "The 2 traces in `workloads/` replay.\n"
    if broken:
        readme += "x\n" * 200 + "[gone](docs/gone.md) `tools/gone.py` The 5 traces in `workloads/`\n"
        write(root, "docs/page.md", "# A page\n\nThe 4 fuzz targets.\n")
    write(root, "README.md", readme)


expected = ["README.md: 205 lines, over its budget of 200",
            "README.md: link to docs/gone.md, which does not exist",
            "README.md: `tools/gone.py` does not exist",
            'README.md: says "5 traces in `workloads/`", there are 2',
            'docs/page.md: says "4 fuzz targets", there are 3']
failures = 0
with tempfile.TemporaryDirectory() as tmp:
    make_tree(tmp, broken=False)
    clean = subprocess.run([sys.executable, checker, tmp], capture_output=True, text=True)
    if clean.returncode != 0:
        print("the tree without problems was refused:\n" + clean.stdout)
        failures += 1
    make_tree(tmp, broken=True)
    found = subprocess.run([sys.executable, checker, tmp], capture_output=True, text=True)
    if found.returncode == 0:
        print("the tree with problems passed")
        failures += 1
    for line in expected:
        if line not in found.stdout.splitlines():
            print(f"not reported: {line}\n(reported:\n{found.stdout})")
            failures += 1
print(f"{len(expected)} planted problems, {failures} failure(s)")
sys.exit(1 if failures else 0)
