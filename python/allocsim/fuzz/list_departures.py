"""Writes DIR/DEPARTURES: the shrunk cases in DIR (workloads/oracle_fuzz/) whose replay departs
from the recording, each with the departure allocsim warns of. The ctest over DIR checks that the
others are exact and that these say where they depart.

usage: python -m allocsim.fuzz.list_departures ALLOCSIM DIR
"""
import json, os, subprocess, sys, tempfile

HEADER = """# Shrunk cases whose replay still departs from the recording, each warned (sim/replay/tests/
# oracle_fuzz_test.cpp checks that it says so). Written by python -m allocsim.fuzz.list_departures.
# NAME  settings | CUDA graphs | where it departs
"""


def departure(binary, d, name):
    with open(os.path.join(d, name + ".json")) as f:
        meta = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [binary, "replay", os.path.join(d, name + ".pickle.gz"), "--capacity",
               str(meta["total_bytes"]), "--json", out, "-q"]
        if meta["cap_bytes"]:
            cmd += ["--memory-fraction", repr(meta["cap_bytes"] / meta["total_bytes"])]
        subprocess.run(cmd, capture_output=True, check=False)
        with open(out) as f:
            report = json.load(f)
    d = report.get("departure")
    if not d:
        return None
    graphs = "graphs" if any(op[0] == "capture" for op in meta["program"]) else "no graphs"
    return (f"{name} {meta['alloc_conf'] or '(defaults)'} | {graphs} | event {d['event_index']}: "
            f"recorded {d['recorded']}, replayed {d['replayed']}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, d = sys.argv[1], sys.argv[2]
    names = sorted(f[:-5] for f in os.listdir(d) if f.endswith(".json"))
    lines = [line for name in names if (line := departure(binary, d, name))]
    with open(os.path.join(d, "DEPARTURES"), "w") as f:
        f.write(HEADER + "".join(line + "\n" for line in lines))
    print(f"{len(lines)} of {len(names)} cases depart")


if __name__ == "__main__":
    main()
