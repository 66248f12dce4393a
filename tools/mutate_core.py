#!/usr/bin/env python3
"""Mutation testing of the allocator core: does the test suite notice a small bug?

Each mutant changes one spot of core/ (the allocator policy): a comparison flipped at its boundary
(`<` and `<=`, `>` and `>=`, `==` and `!=`) or an off-by-one removed (`+ 1`, `- 1`). For each, one
at a time, the script applies the change, rebuilds, runs ctest, and restores the file. A mutant is
caught when the build or a test fails. It prints one line per mutant and, last,
"mutation score: K/N caught".

usage: tools/mutate_core.py BUILD_DIR [--list] [--files PATH ...] [--sample N] [--seed S]
          [--only FILE:LINE:COL ...] [--ctest-args "..."]
BUILD_DIR is a configured build of this tree (e.g. scripts/build.sh build-mutants); it is rebuilt
for every mutant. --files keeps the sites of those files (a mutant in a header rebuilds much). --sample N takes N mutants spread over the sites by a seeded shuffle (the same
N for the same seed); --list prints the sites and stops. The sources are restored even when the
script is interrupted.
"""
import argparse, os, random, re, signal, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES_UNDER = ["core"]
SKIP_DIRS = {"tests"}
# Binary operators as clang-format writes them: spaced. Template brackets and shifts never match.
FLIPS = {" < ": " <= ", " <= ": " < ", " > ": " >= ", " >= ": " > ", " == ": " != ", " != ": " == ",
         " + 1": "", " - 1": ""}
PATTERN = re.compile(r" (?:<=|>=|==|!=|<|>) | [+-] 1\b")


def sources():
    for base in FILES_UNDER:
        for d, dirs, files in os.walk(os.path.join(ROOT, base)):
            dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS)
            for f in sorted(files):
                if f.endswith((".cpp", ".hpp")):
                    yield os.path.join(d, f)


def code_part(line):
    """The line without its // comment (string literals in core/ hold no //)."""
    return line.split("//", 1)[0]


def sites():
    out = []
    for path in sources():
        rel = os.path.relpath(path, ROOT)
        with open(path) as f:
            lines = f.read().split("\n")
        for n, line in enumerate(lines):
            s = line.strip()
            if s.startswith(("#", "//", "*", "static_assert")) or '"' in line:
                continue
            for m in PATTERN.finditer(code_part(line)):
                out.append((rel, n + 1, m.start() + 1, m.group(0)))
    return out


def mutate(site):
    rel, line, col, op = site
    path = os.path.join(ROOT, rel)
    with open(path) as f:
        text = f.read()
    lines = text.split("\n")
    l = lines[line - 1]
    assert l[col - 1:col - 1 + len(op)] == op, (site, l)
    lines[line - 1] = l[:col - 1] + FLIPS[op] + l[col - 1 + len(op):]
    return path, text, "\n".join(lines)


def run(cmd, cwd, timeout):
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        return "timeout"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--sample", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--files", nargs="*")
    ap.add_argument("--ctest-args", default="")
    args = ap.parse_args()
    all_sites = sites()
    if args.files:
        all_sites = [s for s in all_sites if s[0] in set(args.files)]
    chosen = all_sites
    if args.only:
        keys = set(args.only)
        chosen = [s for s in all_sites if f"{s[0]}:{s[1]}:{s[2]}" in keys]
    elif args.sample:
        rng = random.Random(args.seed)
        chosen = sorted(rng.sample(all_sites, min(args.sample, len(all_sites))))
    if args.list:
        for s in chosen:
            print(f"{s[0]}:{s[1]}:{s[2]} '{s[3].strip()}' -> '{FLIPS[s[3]].strip()}'")
        print(f"{len(chosen)} of {len(all_sites)} sites")
        return
    build = os.path.abspath(args.build)
    if run(["cmake", "--build", build], ROOT, 3600) != 0:
        sys.exit("the unmutated tree does not build")
    if run(["ctest", "--test-dir", build, "-j2", *args.ctest_args.split()], ROOT, 3600) != 0:
        sys.exit("the unmutated tree fails ctest: fix that first")
    caught = 0
    current = {}

    def restore(*_):
        for path, text in current.items():
            with open(path, "w") as f:
                f.write(text)
        current.clear()
        if _:
            sys.exit("interrupted; sources restored")

    signal.signal(signal.SIGINT, restore)
    signal.signal(signal.SIGTERM, restore)
    for i, site in enumerate(chosen):
        path, original, mutated = mutate(site)
        current[path] = original
        with open(path, "w") as f:
            f.write(mutated)
        t0 = time.time()
        try:
            rc = run(["cmake", "--build", build], ROOT, 1800)
            verdict = "caught (build)" if rc != 0 else None
            if verdict is None:
                # A mutant that loops forever fails its test at the timeout; the first failure
                # decides, so the rest need not run.
                rc = run(["ctest", "--test-dir", build, "-j2", "--timeout", "60", "--stop-on-failure",
                          *args.ctest_args.split()], ROOT, 3600)
                verdict = "caught" if rc != 0 else "SURVIVED"
        finally:
            restore()
        caught += verdict != "SURVIVED"
        print(f"[{i + 1}/{len(chosen)}] {site[0]}:{site[1]}:{site[2]} '{site[3].strip()}' -> "
              f"'{FLIPS[site[3]].strip()}': {verdict} ({time.time() - t0:.0f} s)", flush=True)
    run(["cmake", "--build", build], ROOT, 3600)  # the build matches the sources again
    print(f"mutation score: {caught}/{len(chosen)} caught")


if __name__ == "__main__":
    main()
