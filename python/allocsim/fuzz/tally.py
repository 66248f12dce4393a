"""Counts of one or more fuzzing runs: by setting, by program shape and by the allocator call a
program makes, how many programs replayed exactly, departed with a warning, differed silently, ran
on a device other programs had filled, or failed in PyTorch itself.

usage: python -m allocsim.fuzz.tally RUN [RUN ...] [--json OUT]
  RUN: a folder `python -m allocsim.fuzz` wrote (its summary.json)
Prints one table; with --json, writes the counts as JSON too. Exit 1 if any program differed
silently.
"""
import argparse, json, os, sys

OUTCOMES = ("exact", "warned", "silent", "device_full", "error")


def shape_of(name):
    """The program's shape, from the name the driver gives it (sNN_<u|p|><dN><cap|nocap>_SEED)."""
    kind = name.split("_")[1]
    return {"u": "user", "p": "pools"}.get(kind[0], "fuzz")


def outcome(result):
    if "error" in result:
        return "error"
    if not result.get("kind"):
        return "exact"
    if result["kind"] == "device_full":
        return "device_full"
    return "warned" if result.get("warned") else "silent"


def tally(results):
    """{"setting": {conf: counts}, "shape": {...}, "call": {...}, "capped": {...}, "total": counts},
    each counts a dict of OUTCOMES and "programs"."""
    groups = {"setting": {}, "shape": {}, "call": {}, "capped": {}}
    total = dict.fromkeys(("programs",) + OUTCOMES, 0)

    def count(group, key, what):
        c = groups[group].setdefault(key, dict.fromkeys(("programs",) + OUTCOMES, 0))
        c["programs"] += 1
        c[what] += 1

    for r in results:
        if "seed" not in r:  # a setting's worker that failed as a whole
            continue
        what = outcome(r)
        total["programs"] += 1
        total[what] += 1
        count("setting", r["conf"] or "(defaults)", what)
        count("shape", shape_of(r["name"]), what)
        count("capped", "capped" if r.get("cap") else "uncapped", what)
        for call in r.get("calls", []):
            count("call", call, what)
    groups["total"] = total
    return groups


def table(counts):
    lines = [f"{'':62} {'programs':>8} " + " ".join(f"{o:>11}" for o in OUTCOMES)]
    for group in ("setting", "shape", "capped", "call"):
        lines.append(f"by {group}:")
        for key, c in sorted(counts[group].items()):
            lines.append(f"  {key[:60]:60} {c['programs']:8} " +
                         " ".join(f"{c[o]:11}" for o in OUTCOMES))
    c = counts["total"]
    lines.append(f"{'total':62} {c['programs']:8} " + " ".join(f"{c[o]:11}" for o in OUTCOMES))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(prog="python -m allocsim.fuzz.tally",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="RUN")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    results = []
    for run in args.runs:
        path = os.path.join(run, "summary.json")
        try:
            with open(path) as f:
                results += json.load(f)
        except (OSError, ValueError) as e:
            sys.exit(f"allocsim.fuzz.tally: {path}: {e}")
    counts = tally(results)
    print(table(counts))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(counts, f, indent=1, sort_keys=True)
    return 1 if counts["total"]["silent"] else 0


if __name__ == "__main__":
    sys.exit(main())
