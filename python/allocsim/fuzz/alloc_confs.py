"""PyTorch's allocator settings parser as the oracle: every option of PYTORCH_CUDA_ALLOC_CONF with
good, boundary and bad values, the string's punctuation and spacing, unknown keys and the two
variables' precedence, each given to a fresh PyTorch process on a GPU. For each it records whether
PyTorch accepted it and with what message it refused it, the settings it reports in a snapshot, and
the segments a few requests then got (512 B, 1 MiB + 1 B, 5 MiB, 12 MiB, 30 MiB: each size class
of a new segment).

usage: python -m allocsim.fuzz.alloc_confs OUT.json [--jobs N]     (on a machine with PyTorch and a GPU)
       alloc_confs.py --list                  (the cases, one JSON object per line)
`python -m allocsim.fuzz.check_alloc_confs` compares allocsim with the recorded answers on a CPU.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

REQUESTS = [512, (1 << 20) + 1, 5 << 20, 12 << 20, 30 << 20]

VALUES = {
    "max_split_size_mb": ["20", "19", "128", "0", "-1", "abc", "12abc", "1.5e3", "",
                          "99999999999999999999", "18446744073709551615", "17592186044415",
                          "17592186044416"],
    "max_non_split_rounding_mb": ["20", "19", "64", "abc"],
    "large_segment_size_mb": ["10", "11", "40", "64", "0", "abc", "-5"],
    "garbage_collection_threshold": ["0.5", "0", "1", "1.0", "0.99999", "abc", "-0.5", "0.5x",
                                     "nan", "inf", "1e-3", ""],
    "roundup_power2_divisions": ["4", "3", "0", "1", "abc", "[256:1,512:2,1024:4,>:8]", "[>:8]",
                                 "[256:3]", "[255:2]", "[256:0]", "[256:1", "[]", "[1:2,2:4]",
                                 "[64:8,>:2,256:4]", "[65536:4]", "[256:1,512]", "[256:1,,512:2]",
                                 "[>:8,256:2]", "[0:2]"],
    "expandable_segments": ["True", "False", "true", "1", ""],
    "backend": ["native", "foo", ""],
    "release_lock_on_cudamalloc": ["True", "true"],
    "pinned_use_cuda_host_register": ["True", "1"],
    "pinned_num_register_threads": ["8", "3", "256", "abc", "0"],
    "pinned_use_background_threads": ["True", "1"],
    "pinned_reserve_segment_size_mb": ["0", "64", "abc"],
    "per_process_memory_fraction": ["0.5", "1.5", "-0.1", "abc", "0", "1"],
    "graph_capture_record_stream_reuse": ["True", "yes"],
}

WHOLE = [
    "", ",", ":", "::", "[", "]", "foo:1", "expandable_segment:True", "throw_on_cudamalloc_oom:True",
    "pinned_free_catch_all:True", "MAX_SPLIT_SIZE_MB:128", "max_split_size_mb", "max_split_size_mb=128",
    "max_split_size_mb 128", " max_split_size_mb : 128 ", "max_split_size_mb:128,",
    ",max_split_size_mb:128", "max_split_size_mb:128,,expandable_segments:True",
    "max_split_size_mb:[128]", "expandable_segments::True", "expandable_segments:True:False",
    "expandable_segments:True,expandable_segments:False", "max_split_size_mb:128 expandable_segments:True",
    "large_segment_size_mb:40,max_split_size_mb:20", "large_segment_size_mb:40,max_split_size_mb:40",
    "max_split_size_mb:30,large_segment_size_mb:40", "large_segment_size_mb:40,max_non_split_rounding_mb:20",
    "large_segment_size_mb:40,max_non_split_rounding_mb:40", "large_segment_size_mb:64,expandable_segments:True",
    "large_segment_size_mb:40,large_segment_size_mb:60", "large_segment_size_mb:40,foo:1",
    "max_split_size_mb:128,garbage_collection_threshold:0.6,roundup_power2_divisions:[256:2,>:4]",
    "roundup_power2_divisions:4,expandable_segments:True", "foo:1,max_split_size_mb:19",
    "max_split_size_mb:19,foo:1", "expandable_segments:true,foo:1", "backend:native,expandable_segments:True",
    "large_segment_size_mb:40", "large_segment_size_mb:[40]", "garbage_collection_threshold:[0.5]",
]


def cases():
    out = [{"PYTORCH_CUDA_ALLOC_CONF": f"{key}:{value}"} for key, values in VALUES.items()
           for value in values]
    out += [{"PYTORCH_CUDA_ALLOC_CONF": text} for text in WHOLE]
    out += [{"PYTORCH_ALLOC_CONF": "expandable_segments:True"},
            {"PYTORCH_ALLOC_CONF": "expandable_segments:True",
             "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"},
            {"PYTORCH_ALLOC_CONF": "foo:1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}]
    return out


PROBE = """
import json, torch
requests = %r
try:
    torch.cuda.memory._record_memory_history(max_entries=1000)
    kept = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in requests]
    s = torch.cuda.memory._snapshot()
    segments = sorted(s["segments"], key=lambda g: g["address"])
    events = [e for t in s["device_traces"] for e in t]
    answer = {"accepted": True, "allocator_settings": s.get("allocator_settings"),
              "segments": [[g["total_size"], bool(g.get("is_expandable"))] for g in segments],
              "segment_events": [[e["action"], e["size"]] for e in events
                                 if e["action"].startswith("segment_")]}
except Exception as e:
    answer = {"accepted": False, "error_type": type(e).__name__, "message": str(e)}
print(json.dumps(answer))
""" % (REQUESTS,)


def run_case(env_vars):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_")}
    env.update(env_vars)
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                       timeout=300)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        answer = {"accepted": False, "error_type": "process", "message":
                  (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]}
    else:
        answer = json.loads(lines[-1])
    return {"env": env_vars, **answer}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?")
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list:
        for case in cases():
            print(json.dumps(case))
        return
    import torch
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        answers = list(pool.map(run_case, cases()))
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                   "requests": REQUESTS, "cases": answers}, f, indent=1)
    refused = sum(not a["accepted"] for a in answers)
    print(f"{len(answers)} settings strings, {refused} refused")


if __name__ == "__main__":
    main()
