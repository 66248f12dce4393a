"""What the what-if checks against real runs share (check_empty_cache.py,
check_alloc_conf_what_if.py): a replay's JSON report, and the statistics that depend on where the
driver placed the segments."""
import json
import os
import re
import subprocess
import tempfile

# Which of two equal free blocks best fit takes depends on their addresses, so on the driver's
# placement: the blocks left split, and the bytes of the blocks allocated and freed.
ADDRESS_DEPENDENT = re.compile(r"^inactive_split|^(active|allocated)_bytes\..*\.(allocated|freed)$")


def replay(allocsim, trace, args):
    """`allocsim replay TRACE ARGS`'s JSON report; exits naming the trace if allocsim failed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        p = subprocess.run([allocsim, "replay", trace, "-q", "--json", out, *args],
                           capture_output=True, text=True)
        if p.returncode not in (0, 3):
            raise SystemExit(f"{trace}: allocsim exit {p.returncode}: {p.stderr.strip()}")
        with open(out) as f:
            return json.load(f)
