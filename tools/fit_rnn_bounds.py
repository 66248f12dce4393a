"""Fits the envelopes that bound cuDNN's RNN workspace and reserve from above
(python/allocsim/tracer/cudnn_rnns.py's WORKSPACE_UPPER and RESERVE_UPPER) on the recorded
configurations, and checks them on configurations left out: four folds, each envelope fitted on
three quarters and its margin the least that covers every configuration of the fourth quarter
in every fold. Prints the held-out coverage at each margin tried, then the coefficients fitted on
all configurations with that margin (the module's).

usage: python3 tools/fit_rnn_bounds.py [workloads/kernels/rnn_h100.json.gz]   (needs scipy)
"""
import gzip
import json
import os
import sys

import numpy as np
from scipy.optimize import linprog

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from allocsim.tracer.cudnn_rnns import envelope_features, shape_of_configuration  # noqa: E402

MARGINS = (1.0, 1.1, 1.25, 1.5, 2.0)
def calls(path):
    """(configuration index, features, workspace bytes, reserve bytes, training) per forward."""
    rows = []
    for i, result in enumerate(json.load(gzip.open(path))["results"]):
        c = result["config"]
        shape = shape_of_configuration(c)
        for call in result.get("calls", []):
            if call["op"] != "_cudnn_rnn":
                continue
            freed = {e[2] for e in call["events"] if e[0] == "free_requested"}
            workspace = sum(e[1] for e in call["events"] if e[0] == "alloc" and e[2] in freed)
            rows.append((i, envelope_features(shape), workspace, call["outputs"][3] or 0,
                         c["train"]))
    return rows


def envelope(rows, column):
    """The least (in sum) non-negative linear function at or above every row's value."""
    x = np.array([r[1] for r in rows], float)
    y = np.array([r[column] for r in rows], float)
    fit = linprog(x.sum(0), A_ub=-x, b_ub=-y, bounds=[(0, None)] * x.shape[1], method="highs")
    return fit.x


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "workloads/kernels/rnn_h100.json.gz"
    rows = calls(path)
    for column, name, keep in ((2, "workspace", lambda r: True), (3, "reserve", lambda r: r[4])):
        chosen = None
        for margin in MARGINS:
            covered = total = 0
            for fold in range(4):
                train = [r for r in rows if r[0] % 4 != fold and keep(r)]
                test = [r for r in rows if r[0] % 4 == fold and keep(r)]
                w = envelope(train, column)
                covered += sum(margin * float(np.dot(w, r[1])) >= r[column] for r in test)
                total += len(test)
            print(f"{name}: margin {margin}: {covered} of {total} held-out calls at or under")
            if chosen is None and covered == total:
                chosen = margin
        w = envelope([r for r in rows if keep(r)], column) * (chosen or MARGINS[-1])
        ratios = [float(np.dot(w, r[1])) / r[column] for r in rows if keep(r) and r[column]]
        print(f"{name}: margin {chosen}, coefficients ({', '.join(f'{v:.5g}' for v in w)}); "
              f"bound / measured: median {np.median(ratios):.2f}, largest {max(ratios):.1f}")


if __name__ == "__main__":
    main()
