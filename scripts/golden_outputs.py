#!/usr/bin/env python3
"""Every output allocsim makes of every shipped recording (scripts/workload_outputs.sh: text and
JSON reports, --snapshot-out, SVG and HTML timelines, the compact trace, plan's JSON) against the
SHA-256 digests kept in sim/cli/tests/golden_outputs.sha256: a change of any byte fails, naming
the files. The recordings are workloads/ and its cuda_graphs/, cuda_graph_syncs/, empty_cache/,
oracle_fuzz/ and public/. The reports name the trace by its path, so the repository's own path is
written as `workloads` in text outputs before they are hashed.

usage: scripts/golden_outputs.py check ALLOCSIM     (exit 1 on any difference)
       scripts/golden_outputs.py update ALLOCSIM    (when a change of output is meant)
"""
import hashlib
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MANIFEST = os.path.join(ROOT, "sim", "cli", "tests", "golden_outputs.sha256")
TEXT = (".json", ".stdout", ".stderr")


# The folders of recordings whose outputs are kept: the shipped workloads, the CUDA-graph jobs,
# the jobs with and without empty_cache() per step, the differential fuzzer's programs, and the
# snapshots other people published.
FOLDERS = ("", "cuda_graphs", "cuda_graph_syncs", "empty_cache", "oracle_fuzz", "public")


def digests(allocsim):
    workloads = os.path.realpath(os.path.join(ROOT, "workloads"))
    result = {}
    with tempfile.TemporaryDirectory(prefix="allocsim-golden-") as tmp:
        for folder in FOLDERS:
            out = os.path.join(tmp, folder or "workloads")
            subprocess.run([os.path.join(ROOT, "scripts", "workload_outputs.sh"),
                            os.path.abspath(allocsim), out, os.path.join(workloads, folder)],
                           check=True, stdout=subprocess.DEVNULL)
            for name in sorted(os.listdir(out)):
                with open(os.path.join(out, name), "rb") as f:
                    data = f.read()
                if name.endswith(TEXT):
                    data = data.replace(workloads.encode(), b"workloads")
                result[os.path.join(folder, name)] = hashlib.sha256(data).hexdigest()
    return result


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "update"):
        sys.exit(__doc__)
    mode, allocsim = sys.argv[1:]
    got = digests(allocsim)
    if mode == "update":
        with open(MANIFEST, "w") as f:
            f.writelines(f"{digest}  {name}\n" for name, digest in got.items())
        print(f"{len(got)} outputs written to {os.path.relpath(MANIFEST, ROOT)}")
        return 0
    want = {}
    with open(MANIFEST) as f:
        for line in f:
            digest, name = line.split()
            want[name] = digest
    differ = sorted(n for n in want.keys() & got.keys() if want[n] != got[n])
    missing, extra = sorted(want.keys() - got.keys()), sorted(got.keys() - want.keys())
    for name in differ:
        print(f"differs: {name}")
    for name in missing:
        print(f"not written: {name}")
    for name in extra:
        print(f"new: {name}")
    print(f"{len(want)} outputs, {len(differ)} differ, {len(missing)} not written, {len(extra)} new"
          + (" (scripts/golden_outputs.py update ALLOCSIM when the change is meant)"
             if differ or missing or extra else ""))
    return 1 if differ or missing or extra else 0


if __name__ == "__main__":
    sys.exit(main())
