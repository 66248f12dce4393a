"""The real largest value of a size parameter that fits under a memory cap, beside allocsim's
prediction of it: records the job at a few small values (uncapped), asks `allocsim plan --at` for
the largest value whose predicted trace fits under the cap, then runs the job capped
(set_per_process_memory_fraction) at values around that prediction to find where it really stops
fitting.

usage: python3 tools/gpu/record_cap_boundary.py OUTDIR ALLOCSIM MODEL PARAM V1,V2,V3 CAP_BYTES [STEPS]
  MODEL, PARAM as tools/gpu/record_sweep.py takes them. Writes the recordings and capped runs
  (record_sweep.py's files) and OUTDIR/boundary_MODEL_PARAM_capCAP.json: the prediction, each
  capped run (steps done, OOM, max_memory_reserved) and the real largest value that fit.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def record(outdir, model, param, values, steps, cap):
    subprocess.run([sys.executable, os.path.join(HERE, "record_sweep.py"), outdir, model, param,
                    ",".join(str(v) for v in values), str(steps), str(cap)], check=True)


def result(outdir, model, param, value, cap):
    name = f"{model}_{param}-{value}" + (f"_cap{cap}" if cap else "")
    with open(os.path.join(outdir, name + ".json")) as f:
        return json.load(f)


def main():
    outdir, allocsim, model, param = sys.argv[1:5]
    recorded = [int(v) for v in sys.argv[5].split(",")]
    cap = int(sys.argv[6])
    steps = int(sys.argv[7]) if len(sys.argv) > 7 else 3
    os.makedirs(outdir, exist_ok=True)
    # Recordings already in OUTDIR (from an earlier sweep) are kept.
    missing = [v for v in recorded
               if not os.path.exists(os.path.join(outdir, f"{model}_{param}-{v}.json"))]
    if missing:
        record(outdir, model, param, missing, steps, 0)
    traces = [os.path.join(outdir, f"{model}_{param}-{v}.pickle.gz") for v in recorded]
    p = subprocess.run([allocsim, "plan", *traces, "--at", ",".join(map(str, recorded)),
                        "--limit", str(cap), "--json", "-"], capture_output=True, text=True)
    if p.returncode not in (0, 3):
        sys.exit(f"allocsim plan: exit {p.returncode}: {p.stderr.strip()}")
    plan = json.loads(p.stdout)
    recorded_setting = next(x for x in plan["plans"] if x["alloc_conf"] == "")
    predicted = recorded_setting["max_value"]
    # Around the prediction, widened until a run fits and a larger one does not.
    tried = {}
    low, high = max(1, predicted - 2), predicted + 2
    for _ in range(4):
        todo = [v for v in range(low, high + 1) if v not in tried]
        if todo:
            record(outdir, model, param, todo, steps, cap)
            for v in todo:
                r = result(outdir, model, param, v, cap)
                tried[v] = {"value": v, "steps_done": r["steps_done"], "oom": r["oom"],
                            "max_memory_reserved": r["max_memory_reserved"],
                            "fits": r["steps_done"] == steps and r["oom"] is None}
        fitting = [v for v in tried if tried[v]["fits"]]
        failing = [v for v in tried if not tried[v]["fits"]]
        if fitting and failing and max(fitting) < min(failing):
            break
        if not fitting:
            low, high = max(1, low - 4), low - 1
        elif not failing:
            low, high = high + 1, high + 4
        else:  # not monotone in the tried range: try the whole range between
            low, high = min(failing), max(fitting)
    fitting = sorted(v for v in tried if tried[v]["fits"])
    failing = sorted(v for v in tried if not tried[v]["fits"])
    real = max(fitting) if fitting and (not failing or max(fitting) < min(failing)) else None
    summary = {"model": model, "param": param, "recorded": recorded, "cap_bytes": cap,
               "steps": steps, "predicted_max_value": predicted, "real_max_value": real,
               "plan": recorded_setting, "capped_runs": [tried[v] for v in sorted(tried)]}
    out = os.path.join(outdir, f"boundary_{model}_{param}_cap{cap}.json")
    with open(out, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"{model} {param} under {cap} bytes: allocsim predicts {predicted}, the real largest "
          f"is {real} (capped runs: " +
          ", ".join(f"{v} {'fits' if tried[v]['fits'] else 'OOM'}" for v in sorted(tried)) + ")")


if __name__ == "__main__":
    main()
