#!/usr/bin/env python3
"""Writes a synthetic training-like trace in allocsim's compact format (sim/trace/compact_trace.hpp):
steps that allocate activations of varied sizes, free them in reverse, and keep a few blocks alive
across steps. Deterministic for a given seed. For measuring replays and timeline pages on traces
of millions of events, which no shipped recording has.

usage: synthetic_trace.py OUT.atrace --events N [--seed S]
"""

import argparse
import random

ALLOC, FREE_REQUESTED, FREE_COMPLETED = 0, 1, 2


def varint(out, value):
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return


def zigzag(value):
    return (value << 1) ^ (value >> 63) if value >= 0 else ((-value) << 1) - 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    sizes = [rng.choice([512, 4096, 1 << 20, 3 << 20, 12 << 20, 48 << 20]) + rng.randrange(0, 4096, 512)
             for _ in range(64)]
    events = []  # (action, address, size)
    next_address = 1 << 40
    kept = []
    while len(events) < args.events:
        step = []
        for i in range(rng.randrange(40, 120)):
            size = sizes[(i * 7 + len(events)) % len(sizes)]
            step.append((next_address, size))
            events.append((ALLOC, next_address, size))
            next_address += (size + 511) // 512 * 512
        if rng.random() < 0.05:  # a block that outlives its step
            kept.append(step.pop(rng.randrange(len(step))))
        if len(kept) > 40:
            step.append(kept.pop(0))
        for address, size in reversed(step):
            events.append((FREE_REQUESTED, address, size))
            events.append((FREE_COMPLETED, address, size))
    events = events[:args.events]
    out = bytearray(b"ATRACE1\n")
    varint(out, 0)  # recorded under the defaults
    varint(out, len(events))
    previous = 0
    for action, address, size in events:
        out.append(action)
        varint(out, zigzag(address - previous))
        previous = address
        varint(out, size)
        varint(out, 0)  # stream
        varint(out, 0)  # time
    with open(args.out, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
