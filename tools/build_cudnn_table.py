"""Builds allocsim.trace's table of what convolutions allocate on a card
(python/allocsim/tracer/cudnn_workspaces_sm90.json.gz) from tools/gpu/record_cudnn_workspaces.py's
files: per convolution op and arguments (shapes, strides, dtypes and the rest, as the op is
called), the allocations and frees of its first call at that shape.

usage: build_cudnn_table.py OUT.json.gz RECORDED.json [RECORDED.json ...]
"""
import gzip
import json
import sys


def main():
    table, meta = {}, None
    for path in sys.argv[2:]:
        with open(path) as f:
            recorded = json.load(f)
        this = {k: recorded[k] for k in ("device", "torch", "cudnn")}
        if meta is not None and this != meta:
            raise SystemExit(f"{path}: recorded with {this}, the others with {meta}")
        meta = this
        for entry in recorded["entries"]:
            key = json.dumps([entry["op"], entry["args"]], separators=(",", ":"))
            table[key] = entry["first"]
    blob = json.dumps({"recorded_on": meta, "table": dict(sorted(table.items()))},
                      separators=(",", ":")).encode()
    with open(sys.argv[1], "wb") as f:
        f.write(gzip.compress(blob, 9, mtime=0))  # the same bytes for the same recordings
    print(f"{sys.argv[1]}: {len(table)} convolutions, recorded on {meta}")


if __name__ == "__main__":
    main()
