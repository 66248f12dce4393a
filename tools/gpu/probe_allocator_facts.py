#!/usr/bin/env python3
"""Asks the installed PyTorch, on a GPU, the facts of its CUDA caching allocator that
docs/pytorch-caching-allocator.md states for the release it was checked on: which
PYTORCH_CUDA_ALLOC_CONF keys it accepts and what they do, how PYTORCH_NO_CUDA_MEMORY_CACHING is
read, what a snapshot holds (top-level keys, record_function annotations), the OOM message's text,
and the memory the CUDA context holds outside the allocator. Each probe runs in a fresh process (the
allocator reads its settings once). Prints one JSON object.

usage: probe_allocator_facts.py
"""
import json
import os
import subprocess
import sys

MiB = 1 << 20


def probe(code, env=None):
    """Runs code in a fresh Python with torch imported; returns its JSON answer or its error."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING")}
    full_env.update(env or {})
    script = "import json, torch\nMiB = 1 << 20\n" + code
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=full_env,
                       timeout=300)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


SEGMENT_OF_5MIB = """
x = torch.empty(5 * MiB, dtype=torch.uint8, device="cuda")
s = torch.cuda.memory._snapshot()
print(json.dumps({"segment_sizes": [seg["total_size"] for seg in s["segments"]],
                  "expandable": [seg.get("is_expandable") for seg in s["segments"]],
                  "settings": s.get("allocator_settings")}))
"""

answers = {"torch": None}
answers["torch"] = probe("print(json.dumps({'version': torch.__version__, "
                         "'device': torch.cuda.get_device_name(0)}))")

# Is caching disabled by the variable's presence or by its value?
for value in ("1", "0", ""):
    answers[f"PYTORCH_NO_CUDA_MEMORY_CACHING={value!r}"] = probe("""
x = torch.empty(MiB, dtype=torch.uint8, device="cuda"); del x
print(json.dumps({"reserved_after_free": torch.cuda.memory_reserved()}))
""", {"PYTORCH_NO_CUDA_MEMORY_CACHING": value})

# Which keys and spellings the configuration accepts, and what a 5 MiB request's segment is then.
for conf in ("expandable_segments:True", "expandable_segments:true", "expandable_segments:1",
             "large_segment_size_mb:40", "max_non_split_rounding_mb:40",
             "per_process_memory_fraction:0.5", "throw_on_cudamalloc_oom:True",
             "pinned_use_background_threads:True"):
    answers[f"PYTORCH_CUDA_ALLOC_CONF={conf}"] = probe(SEGMENT_OF_5MIB,
                                                       {"PYTORCH_CUDA_ALLOC_CONF": conf})

# Does the per_process_memory_fraction key cap the allocator as set_per_process_memory_fraction does?
answers["per_process_memory_fraction:0.5, a request of 60% of the card"] = probe("""
total = torch.cuda.get_device_properties(0).total_memory
try:
    x = torch.empty(int(total * 0.6), dtype=torch.uint8, device="cuda"); answer = "served"
except torch.OutOfMemoryError as e:
    answer = str(e)
print(json.dumps({"answer": answer}))
""", {"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:0.5"})

# set_per_process_memory_fraction(1.0): a limit of the whole card, or none? With one, the OOM
# message names it ("... allowed;") and garbage collection runs (it needs a fraction set); the byte
# limit of a fraction whose product is not whole: truncated or rounded (the request exactly at the
# rounded limit is served only if rounded).
answers["set_per_process_memory_fraction(1.0)"] = probe("""
total = torch.cuda.get_device_properties(0).total_memory
torch.cuda.set_per_process_memory_fraction(1.0)
try:
    torch.empty(total + (2 << 20), dtype=torch.uint8, device="cuda"); oom = None
except torch.OutOfMemoryError as e:
    oom = str(e)
print(json.dumps({"total": total, "oom_message": oom, "names_a_limit": oom is not None and " allowed; " in oom}))
""")
answers["fraction limit truncated or rounded"] = probe("""
total = torch.cuda.get_device_properties(0).total_memory
f = (40 * 1024 * MiB - 0.25) / total  # a limit a quarter byte under 40 GiB
torch.cuda.set_per_process_memory_fraction(f)
try:
    x = torch.empty(40 * 1024 * MiB, dtype=torch.uint8, device="cuda"); at_40GiB = "served"
except torch.OutOfMemoryError as e:
    at_40GiB = str(e)
print(json.dumps({"fraction": f, "limit_if_truncated": int(f * total),
                  "limit_if_rounded": round(f * total), "request_of_40GiB": at_40GiB}))
""")

# The statistics' keys, the snapshot's top-level keys, record_function annotations, and an OOM's text.
answers["memory_stats and snapshot"] = probe("""
torch.cuda.memory._record_memory_history(max_entries=1000)
with torch.profiler.record_function("probe_region"):
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="cuda")
del x
torch.cuda.set_per_process_memory_fraction(0.01)
try:
    torch.empty(10 << 30, dtype=torch.uint8, device="cuda"); oom = None
except torch.OutOfMemoryError as e:
    oom = str(e)
s = torch.cuda.memory._snapshot()
actions = sorted({e["action"] for t in s["device_traces"] for e in t})
print(json.dumps({"memory_stats_keys": sorted(torch.cuda.memory_stats().keys()),
                  "snapshot_keys": sorted(s.keys()),
                  "trace_actions": actions,
                  "trace_entry_keys": sorted({k for t in s["device_traces"] for e in t for k in e}),
                  "external_annotations": s.get("external_annotations"),
                  "oom_message": oom}, default=str))
""")

# MemPool's options.
answers["MemPool"] = probe("""
import inspect
print(json.dumps({"signature": str(inspect.signature(torch.cuda.MemPool.__init__))}))
""")

# Memory outside the allocator: a bare context, then with cuBLAS initialised by a matmul.
answers["context"] = probe("""
free0, total = torch.cuda.mem_get_info()
a = torch.ones(1024, 1024, device="cuda"); b = a @ a; torch.cuda.synchronize()
free1, _ = torch.cuda.mem_get_info()
print(json.dumps({"total": total, "outside_bare_context": total - free0,
                  "outside_after_matmul": total - free1 - torch.cuda.memory_reserved()}))
""")

print(json.dumps(answers, indent=1))
