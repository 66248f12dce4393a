"""What PyTorch's allocator does with settings set at run time and with a cap set before a
recording starts, on this GPU: after each settings string (a partial one among them), the
allocator_settings its snapshot reports (which keys a string that does not name them resets);
whether get_per_process_memory_fraction answers the fraction set exactly; which entry points this
release has.

usage: probe_settings_changes.py OUT.json
"""
import json
import sys

import torch


def main():
    torch.cuda.init()
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
           "entry_points": {name: hasattr(torch._C, name) for name in (
               "_accelerator_setAllocatorSettings", "_accelerator_getAllocatorSettings",
               "_cuda_cudaCachingAllocator_set_allocator_settings")},
           "fractions": [], "settings": []}
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None) or \
        torch.cuda.memory._set_allocator_settings
    for fraction in (0.5, 0.123456789, 1 / 3, 0.9999, 1.0):
        torch.cuda.set_per_process_memory_fraction(fraction)
        got = torch.cuda.get_per_process_memory_fraction()
        out["fractions"].append({"set": fraction, "got": got, "exact": got == fraction})
    x = torch.empty(1 << 20, device="cuda")  # the allocator made before the changes
    for text in ("max_split_size_mb:128,roundup_power2_divisions:4,garbage_collection_threshold:0.6",
                 "expandable_segments:True", "max_split_size_mb:256",
                 "garbage_collection_threshold:0.8", "", "expandable_segments:False",
                 "max_non_split_rounding_mb:64", "roundup_power2_divisions:[64:8,>:2]",
                 "release_lock_on_cudamalloc:True", "max_split_size_mb:10"):
        try:
            setter(text)
            error = None
        except Exception as e:  # refused: what it raised
            error = f"{type(e).__name__}: {e}"[:300]
        settings = torch.cuda.memory._snapshot()["allocator_settings"]
        out["settings"].append({"set": text, "error": error, "after": settings,
                                "max_split_size_stat": torch.cuda.memory_stats().get(
                                    "max_split_size")})
    del x
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, default=str)
    print(json.dumps(out["entry_points"]), json.dumps(out["fractions"]))


if __name__ == "__main__":
    main()
