#!/usr/bin/env python3
"""Bad input to `allocsim replay` gets exit status 2 and one line on stderr naming the problem;
doubtful input it can go on past gets one warning line and the replay.

usage: cli_bad_input_test.py ALLOCSIM WORKLOADS_DIR [--table] [--sanitized]
With --table, prints docs/cli.md's table of bad inputs and what each gets. --sanitized (an ASan
build) skips the out-of-memory check, which caps the address space.
"""
import gzip, json, os, pickle, re, subprocess, sys, tempfile

binary, workloads = sys.argv[1], sys.argv[2]
sample = os.path.join(workloads, "resnet50_default.pickle.gz")
tmp = tempfile.mkdtemp(prefix="allocsim-bad-")


sanitized = "--sanitized" in sys.argv
# What a sanitizer's runtime may say on its own (ASan meeting an exception thrown on another
# thread's stack, say): not allocsim's words, left out of the lines checked.
SANITIZER_NOTE = re.compile(r"^==\d+==WARNING: |^False positive error reports may follow"
                            r"|^For details see https://github.com/google/sanitizers")
failed = []  # what failed, repeated after the count so that the tail of a long log shows it


def stderr_lines(p):
    lines = p.stderr.strip().splitlines()
    return [l for l in lines if not (sanitized and SANITIZER_NOTE.match(l))]


def fail(what):
    failed.append(what)
    print(what)


def write(name, data):
    path = os.path.join(tmp, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


raw = gzip.decompress(open(sample, "rb").read())
snap_event = {"action": "alloc", "addr": 1 << 20, "size": "big", "stream": 0}
compiled_event = {"action": "alloc", "addr": 1 << 20, "size": 512, "stream": 0,
                  "frames": [{"name": "forward", "filename": "model.py", "line": 2**64 - 1}]}


def ev(action, addr, size=512):
    return {"action": action, "addr": addr, "size": size, "stream": 0}


def events(*evs):
    return pickle.dumps({"device_traces": [list(evs)]})


CASES = [
    # (what, arguments, expected exit status, text the error line must contain)
    ("missing file", [os.path.join(tmp, "nope.pickle.gz")], 2, "cannot open"),
    ("empty file", [write("empty.pickle", b"")], 2, "byte offset 0"),
    ("truncated gzip", [write("cut.pickle.gz", open(sample, "rb").read()[:30000])], 2, "gzip data ends early"),
    ("corrupt gzip", [write("bad.pickle.gz", b"\x1f\x8b\x08\x00" + b"\xff" * 64)], 2, "bad gzip data at compressed byte offset"),
    ("truncated pickle", [write("cut.pickle", raw[: len(raw) // 2])], 2, "byte offset"),
    ("pickle that is not a snapshot", [write("list.pickle", pickle.dumps([1, 2, 3]))], 2, "expected a dict"),
    ("dict without device_traces", [write("dict.pickle", pickle.dumps({"segments": []}))], 2, "no 'device_traces'"),
    ("opcode GLOBAL (os.system)", [write("evil.pickle", b"\x80\x02cos\nsystem\n(S'echo hi'\ntR.")], 2, "GLOBAL would import or call code"),
    ("opcode REDUCE", [write("reduce.pickle", b"\x80\x02]R.")], 2, "REDUCE"),
    ("opcode outside the subset", [write("ext.pickle", b"\x80\x02\xff.")], 2, "outside the snapshot subset"),
    ("length field claiming 2^62 bytes", [write("huge.pickle", b"\x80\x04\x8d" + (1 << 62).to_bytes(8, "little") + b"x")], 2, "runs past the end"),
    ("200,000 nested lists", [write("deep.pickle", b"\x80\x02" + b"]" * 200000 + b"a" * 199999 + b".")], 2, "expected a dict"),
    ("event with a str size", [write("badsize.pickle", pickle.dumps({"device_traces": [[snap_event]]}))], 2, "event 0 'size': expected a non-negative int"),
    ("event without action", [write("noaction.pickle", pickle.dumps({"device_traces": [[{"size": 1}]]}))], 2, "event 0: missing 'action'"),
    ("frame line 2^64-1 (torch.compile)", [write("compiled.pickle", pickle.dumps({"device_traces": [[compiled_event]]}))], 0, "1 stack frame line number(s) beyond 64 bits"),
    ("a top-level key no known PyTorch writes", [write("future.pickle", pickle.dumps({"device_traces": [[ev("alloc", 1 << 21)]], "future_stats": {}}))], 0, "the top level has 1 key(s) allocsim does not know ('future_stats' or another; a later PyTorch's?): left out"),
    ("a trace-entry key no known PyTorch writes", [write("hint.pickle", events(dict(ev("alloc", 1 << 21), hint=3), dict(ev("free_completed", 1 << 21), hint=4)))], 0, "device_traces has 2 key(s) allocsim does not know ('hint' or another; a later PyTorch's?): left out"),
    ("an action no PyTorch writes", [write("teleport.pickle", events(ev("alloc", 1 << 21), ev("teleport", 1 << 21), ev("teleport", 1 << 22)))], 0, "2 event(s) with an action no PyTorch writes ('teleport' or another), the first at event 1"),
    ("a free of a block never allocated", [write("nofree.pickle", events(ev("alloc", 1 << 21), ev("free_requested", 1 << 22), ev("free_completed", 1 << 22)))], 0, "1 free(s) of a block that was neither allocated nor live at the first event, the first at event 1"),
    ("a free from before an expandable history's first event", [write("expandable_window.pickle", pickle.dumps({"device_traces": [[ev("alloc", 1 << 21), ev("free_requested", 1 << 22), ev("free_completed", 1 << 22)]], "allocator_settings": {"expandable_segments": True}}))], 0, "1 free(s) of a block from before the first event, the first at event 1: skipped (in no expandable segment's range that the final segments and the trace's unmaps show mapped at its start"),
    ("an alloc at a live address", [write("twice.pickle", events(ev("alloc", 1 << 21), ev("alloc", 1 << 21)))], 0, "1 alloc(s) at the address of a block still live (a free is missing), the first at event 1"),
    ("recorded max_split_size of 16 MiB", [write("split16.pickle", pickle.dumps({"device_traces": [[]], "allocator_settings": {"max_split_size": 16 << 20}}))], 2, "'max_split_size': expected -1 or at least 20971520"),
    ("--alloc-conf max_split_size_mb:5", [sample, "--alloc-conf", "max_split_size_mb:5"], 2, "too small, must be >= 20"),
    ("--alloc-conf expandable_segments:yes", [sample, "--alloc-conf", "expandable_segments:yes"], 2, "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'yes'"),
    ("--alloc-conf bogus_key:1", [sample, "--alloc-conf", "bogus_key:1"], 2, "Unrecognized key 'bogus_key' in CUDA allocator config."),
    ("--alloc-conf with a control character in a key", [sample, "--alloc-conf", "bo\x01gus:1"], 2, "Unrecognized key 'bo\\x01gus' in CUDA allocator config."),
    ("--alloc-conf backend:cudaMallocAsync", [sample, "--alloc-conf", "backend:cudaMallocAsync"], 2, "native caching allocator only"),
    ("--alloc-conf throw_on_cudamalloc_oom:True on a 2.11 snapshot", [sample, "--alloc-conf", "throw_on_cudamalloc_oom:True"], 2, "--torch-version names a later release"),
    ("--torch-version 2.9", [sample, "--torch-version", "2.9"], 2, "follows the allocator of PyTorch 2.11 to 2.14"),
    ("plan --alloc-conf throw_on_cudamalloc_oom:True on a 2.11 snapshot", ["plan", sample, "--alloc-conf", "throw_on_cudamalloc_oom:True"], 2, "--torch-version names a later release"),
    ("--torch-version latest", [sample, "--torch-version", "latest"], 2, "expected a PyTorch release such as 2.13"),
    ("--empty-cache-at step, no steps in the trace", [write("nosteps.pickle", pickle.dumps({"device_traces": [[{"action": "alloc", "addr": 1 << 30, "size": 512, "stream": 0}]], "segments": []})), "--empty-cache-at", "step"], 2, "has no step structure"),
    ("--empty-cache-at 12x", [sample, "--empty-cache-at", "12x"], 2, "expected \"step\" or event indices"),
    ("--empty-cache-at past the trace", [sample, "--empty-cache-at", "99999999"], 2, "--empty-cache-at 99999999: "),
    ("--capacity 12XB", [sample, "--capacity", "12XB"], 2, "--capacity: '12XB': expected a size"),
    ("--capacity 0", [sample, "--capacity", "0"], 2, "--capacity: '0': expected a size"),
    ("--memory-fraction 1.5", [sample, "--memory-fraction", "1.5"], 2, "memory-fraction"),
    ("--on-oom maybe", [sample, "--on-oom", "maybe"], 2, "on-oom"),
    ("--memory-limit 7XB", [sample, "--memory-limit", "7XB"], 2, "--memory-limit: '7XB': expected a size"),
    ("--backend tpu", [sample, "--backend", "tpu"], 2, "backend"),
    ("--backend cuda with --capacity", [sample, "--backend", "cuda", "--capacity", "24GiB"], 2, "--memory-limit"),
    ("--backend cuda with --timeline-out", [sample, "--backend", "cuda", "--timeline-out", "t.svg"], 2, "report only"),
    ("--timeline-at with an SVG timeline", [sample, "--timeline-out", "t.svg", "--timeline-at", "5"], 2, "--timeline-at needs --timeline-out with a .html name"),
    ("--timeline-at past the trace's end", [sample, "--timeline-out", "t.html", "--timeline-at", "5,99999999"], 2, "--timeline-at 99999999: "),
    ("--timeline-at not a number", [sample, "--timeline-out", "t.html", "--timeline-at", "peak"], 2, "timeline-at"),
    ("--device 3 of a one-device snapshot", [sample, "--device", "3"], 2, "no events or segments on that device"),
    ("segments list with a block without size", [write("segs.pickle", pickle.dumps([{"address": 1 << 21, "total_size": 2 << 20, "stream": 0, "blocks": [{"state": "inactive"}]}]))], 2, "segments)[0] block 0: missing 'size'"),
    # predict and plan over recordings at several values (the command first; the rest replay).
    ("predict from one recording", ["predict", sample, "--at", "4", "--to", "8", "--out", "p.atrace"], 2, "At least 2 required"),
    ("predict with fewer values than recordings", ["predict", sample, sample, "--at", "4", "--to", "8", "--out", "p.atrace"], 2, "2 recordings but 1 values in --at"),
    ("predict to a name that is neither .atrace nor .pickle", ["predict", sample, sample, "--at", "4,8", "--to", "16", "--out", "p.json"], 2, "predict writes allocsim's compact trace (FILE.atrace) or a PyTorch memory snapshot (FILE.pickle, or FILE.pickle.gz compressed)"),
    ("predict from recordings that do not align", ["predict", write("s0.pickle", events(ev("alloc", 1 << 21))), write("s7.pickle", pickle.dumps({"device_traces": [[{"action": "alloc", "addr": 1 << 21, "size": 512, "stream": 7}]]})), "--at", "4,8", "--to", "16", "--out", "p.atrace"], 2, "the recordings at 4 and 8 do not align"),
    ("predict with neither --to nor --world-size", ["predict", sample, sample, "--at", "4,8", "--out", "p.atrace"], 2, "predict: give --to (the value to predict at) or --world-size (the ranks)"),
    ("predict with both --to and --world-size", ["predict", sample, sample, "--at", "4,8", "--to", "16", "--world-size", "16", "--out", "p.atrace"], 2, "predict: give --to (the value to predict at) or --world-size (the ranks)"),
    ("predict --world-size from one world size twice", ["predict", sample, sample, "--at", "2,2", "--world-size", "4", "--out", "p.atrace"], 2, "predict: the world size 2 is given twice"),
    ("plan --world-size without recordings at several world sizes", ["plan", sample, "--world-size"], 2, "plan: --world-size needs recordings at several world sizes (--at)"),
    ("plan of two traces without --at", ["plan", sample, sample], 2, "give them with --at"),
    ("plan --batch of one trace", ["plan", sample, "--batch", "16"], 2, "plan: --batch needs recordings at several batch sizes (--at)"),
    ("plan --batch of recordings without the optimizer's annotations", ["plan", write("b4.pickle", events(ev("alloc", 1 << 21))), write("b8.pickle", events(ev("alloc", 1 << 21))), "--at", "4,8", "--batch", "16"], 2, "gradient accumulation needs the trace's steps"),
    ("plan --call-times of a file that is not JSON", ["plan", sample, "--call-times", write("times.json", b"{")], 2, "times.json: byte offset 1: not JSON (expected the table allocsim calibrate writes)"),
    ("plan --call-times of a table without segment_free", ["plan", sample, "--call-times", write("t2.json", b'{"segment_alloc": []}')], 2, "t2.json: expected \"segment_free\": [[bytes, seconds], ...]"),
    ("fleet of a directory without snapshots", ["fleet", os.path.dirname(write("empty/notes.txt", b"x"))], 2, "fleet: no snapshot files (*.pickle, *.pickle.gz, *.atrace) found"),
    ("fleet --torch-version 2.11 --alloc-conf throw_on_cudamalloc_oom:True", ["fleet", sample, "--torch-version", "2.11", "--alloc-conf", "throw_on_cudamalloc_oom:True"], 2, "--torch-version names that release"),
    ("fleet --results of a file that is not a list of results", ["fleet", "--results", write("results.json", b"{}")], 2, "results.json: expected a JSON array of fleet job results"),
    ("fleet --results of a result without its figures", ["fleet", "--results", write("rows.json", b'[{"file": "a.pickle", "devices": [{"device": 0}]}]')], 2, "rows.json: result 0: no 'events' (each result is what allocsim fleet --job prints)"),
    ("fleet --pair with one file", ["fleet", "--pair", sample], 2, "--pair: 2 required"),
    ("fleet --scheduler from the binary alone", ["fleet", sample, "--scheduler", "tcp://localhost:8786"], 2, "fleet --scheduler: a Dask cluster is driven from Python"),
    ("diff of one file", ["diff", sample], 2, "b is required"),
    ("diff against a missing file", ["diff", sample, "nope.pickle.gz"], 2, "nope.pickle.gz: cannot open: No such file or directory"),
    ("diff against a file that is not a snapshot", ["diff", sample, write("notasnap.pickle", pickle.dumps([1]))], 2, "notasnap.pickle: the top-level list (torch.cuda.memory_snapshot()'s segments)[0]: expected a dict, found int"),
    ("diff --device-b 3 of a one-device snapshot", ["diff", sample, sample, "--device-b", "3"], 2, "--device-b 3: the file records no events or segments on that device"),
    ("a good trace on a 2 GiB card", [sample, "--capacity", "2GiB"], 3, None),
    ("a good trace on an 80 GiB card", [sample, "--capacity", "80GiB"], 0, None),
]


def main():
    table = "--table" in sys.argv
    if table:
        print("| input | exit | what allocsim says |\n|---|---|---|")
    for what, args, want_rc, want_text in CASES:
        command = args if args[0] in ("predict", "plan", "fleet", "diff") else ["replay", *args, "-q"]
        p = subprocess.run([binary, *command], capture_output=True, text=True, timeout=120)
        lines = stderr_lines(p)
        ok = p.returncode == want_rc
        if want_rc == 2:
            ok = ok and len(lines) == 1 and want_text in lines[0] and lines[0].startswith("allocsim: error: ")
        elif want_text:
            ok = ok and len(lines) == 1 and want_text in lines[0] and lines[0].startswith("allocsim: warning: ")
        else:
            ok = ok and not lines
        if table:
            said = lines[0].replace(tmp + "/", "").replace("|", "\\|") if lines else "(report; no error)"
            also = ", then the report" if lines and want_rc != 2 else ""
            print(f"| {what} | {p.returncode} | `{said}`{also} |")
        if not ok:
            fail(f"FAIL case {what}: exit {p.returncode} (want {want_rc}), stderr: {p.stderr.strip()!r}")
    # An OOM the job caught and went on after (the trace holds later requests) is no verdict: exit
    # 0, the report saying so; a last one nothing followed ended the job: 3.
    for name, want_rc, want_words in (("s02_cap_6004_min", 0, "caught it and went on"),
                                      ("s03_cap_2004_min", 3, "the recorded run failed here too, 256")):
        meta = json.load(open(os.path.join(workloads, "oracle_fuzz", name + ".json")))
        p = subprocess.run([binary, "replay", os.path.join(workloads, "oracle_fuzz", name + ".pickle.gz"),
                            "--capacity", str(meta["total_bytes"]),
                            "--memory-fraction", repr(meta["cap_bytes"] / meta["total_bytes"])],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != want_rc or want_words not in p.stdout:
            fail(f"FAIL caught OOMs of {name}: exit {p.returncode} (want {want_rc}), "
                 f"{want_words!r} {'in' if want_words in p.stdout else 'not in'} the report")
    # The good path writes what it was asked for.
    out = os.path.join(tmp, "out.pickle")
    p = subprocess.run([binary, "replay", sample, "--capacity", "80GiB", "--snapshot-out", out, "--json", out + ".json", "-q"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or not os.path.getsize(out) or pickle.load(open(out, "rb"))["device_traces"][0] == []:
        fail(f"FAIL --snapshot-out: exit {p.returncode}, stderr: {p.stderr.strip()!r}")
    # A state without a history, written back as it was read: torch.cuda.memory_snapshot()'s list
    # of another device's segments keeps its device; a snapshot's segments of CUDA graphs' private
    # pools keep their pools; and a .gz name gets gzip.
    def segment(address, pool, device):
        half = 10 << 20
        return {"device": device, "address": address, "total_size": 2 * half, "allocated_size": half,
                "active_size": half, "requested_size": half, "stream": 0, "segment_type": "large",
                "segment_pool_id": pool, "is_expandable": False, "frames": [],
                "blocks": [{"address": address, "size": half, "requested_size": half,
                            "state": "active_allocated", "frames": []},
                           {"address": address + half, "size": half, "requested_size": 0,
                            "state": "inactive", "frames": []}]}
    states = {
        "device 1's segments": (pickle.dumps([segment(1 << 32, (0, 0), 1), segment(2 << 32, (0, 0), 1)]),
                                [(1, (0, 0)), (1, (0, 0))]),
        "graph pools": (pickle.dumps({"segments": [segment(1 << 32, (0, 0), 0), segment(2 << 32, (0, 1), 0),
                                                   segment(3 << 32, (0, 2), 0)], "device_traces": []}),
                        [(0, (0, 0)), (0, (0, 1)), (0, (0, 2))]),
    }
    for what, (data, want) in states.items():
        out = os.path.join(tmp, "state_out.pickle.gz")
        p = subprocess.run([binary, "replay", write("state.pickle", data), "--snapshot-out", out, "-q"],
                           capture_output=True, text=True, timeout=120)
        got = [(seg["device"], seg["segment_pool_id"]) for seg in pickle.loads(gzip.open(out).read())["segments"]] \
            if p.returncode == 0 else None
        if got != want:
            fail(f"FAIL --snapshot-out of a state ({what}): exit {p.returncode}, segments {got}, want {want}")
    # The timeline picture: well-formed SVG, two panels, the OOM marked in the first.
    svg = os.path.join(tmp, "timeline.svg")
    p = subprocess.run([binary, "replay", sample, "--capacity", "2GiB", "--timeline-out", svg,
                        "--compare-alloc-conf", "expandable_segments:True", "-q"], capture_output=True, text=True, timeout=120)
    import xml.etree.ElementTree as ET
    text = open(svg).read() if os.path.exists(svg) else ""
    if p.returncode != 3 or text.count("PYTORCH_CUDA_ALLOC_CONF=") != 2 or "OOM: " not in text or ET.fromstring(text) is None:
        fail(f"FAIL --timeline-out: exit {p.returncode}, stderr: {p.stderr.strip()!r}")
    # --backend cuda: runs where there is a GPU; elsewhere one line says why not.
    p = subprocess.run([binary, "replay", sample, "--backend", "cuda", "-q"], capture_output=True,
                       text=True, timeout=300)
    lines = stderr_lines(p)
    no_gpu = p.returncode == 1 and "no CUDA device" in p.stderr
    no_cuda = p.returncode == 2 and "built without CUDA" in p.stderr
    if not ((no_gpu or no_cuda) and len(lines) == 1 or p.returncode == 0 and not lines):
        fail(f"FAIL --backend cuda: exit {p.returncode}, stderr: {p.stderr.strip()!r}")
    # The page version: its summary read back (base64 of zlib), two runs, the first stopped at the
    # OOM, nothing fetched from elsewhere (the browser test checks what it draws).
    page = os.path.join(tmp, "timeline.html")
    p = subprocess.run([binary, "replay", sample, "--capacity", "2GiB", "--timeline-out", page,
                        "--compare-alloc-conf", "expandable_segments:True", "-q"], capture_output=True, text=True, timeout=120)
    import base64, html.parser, json as json_module, zlib
    text = open(page).read() if os.path.exists(page) else ""
    data = {}
    start = text.find('<script id="timeline-summary" type="application/octet-stream">')
    if start >= 0:
        body = text[text.index(">", start) + 1:text.index("</script>", start)]
        raw_page = zlib.decompress(base64.b64decode(body.strip()))
        length = int.from_bytes(raw_page[:4], "little")
        data = json_module.loads(raw_page[4:4 + length])
    html.parser.HTMLParser().feed(text)
    if (p.returncode != 3 or len(data.get("runs", [])) != 2 or not data["runs"][0]["levels"]
            or data["runs"][0]["stopped"] is None or not data["runs"][0]["moments"]
            or "http://" in text.replace("http://www.w3.org/2000/svg", "")):
        fail(f"FAIL --timeline-out .html: exit {p.returncode}, stderr: {p.stderr.strip()!r}")
    # plan --json carries the reader's warnings, as replay --json does.
    graphs = os.path.join(workloads, "cuda_graphs", "compile-mlp-train_default.pickle.gz")
    p = subprocess.run([binary, "plan", graphs, "--json", "-"], capture_output=True, text=True, timeout=300)
    plan_warnings = json_module.loads(p.stdout).get("warnings", []) if p.returncode == 0 else []
    if not any("private pools" in w for w in plan_warnings) or \
            not all(w in p.stderr for w in plan_warnings):
        fail(f"FAIL plan --json warnings: exit {p.returncode}, warnings {plan_warnings}")
    # predict writes a snapshot pickle too: Python reads it, and it replays as the compact trace.
    sweeps = os.path.join(workloads, "sweeps")
    recordings = [os.path.join(sweeps, f"gpt2_batch-{v}.pickle.gz") for v in (1, 2, 4)]
    peaks = []
    for out in (os.path.join(tmp, "p16.atrace"), os.path.join(tmp, "p16.pickle.gz"),
                os.path.join(tmp, "p16.pickle")):
        p = subprocess.run([binary, "predict", *recordings, "--at", "1,2,4", "--to", "16", "--out", out, "-q"],
                           capture_output=True, text=True, timeout=300)
        r = subprocess.run([binary, "replay", out, "--capacity", "85017493504", "--json", "-", "-q"],
                           capture_output=True, text=True, timeout=300)
        peaks.append(json_module.loads(r.stdout)["memory_stats"]["reserved_bytes.all.peak"] if r.returncode == 0 else None)
    snapshot_ok = os.path.exists(out) and "device_traces" in pickle.load(open(out, "rb"))
    gz = os.path.join(tmp, "p16.pickle.gz")
    gz_ok = os.path.exists(gz) and gzip.open(gz).read() == open(out, "rb").read()
    if peaks[0] is None or len(set(peaks)) != 1 or not snapshot_ok or not gz_ok:
        fail(f"FAIL predict --out .pickle[.gz]: peaks {peaks}, snapshot readable: {snapshot_ok}, "
             f"gzip of the same bytes: {gz_ok}")
    # The same snapshot pickled with protocols 2 and 5 (the reader's subset; 0 and 1 write numbers
    # as text), and with a key no event has (the reader's fast path declines it): the same report,
    # the last with a warning naming the key.
    def report(path):
        p = subprocess.run([binary, "replay", path, "--json", "-", "-q"], capture_output=True,
                           text=True, timeout=120)
        r = json.loads(p.stdout.replace(path, "TRACE"))
        return p.returncode, r, r.pop("warnings", [])
    snapshot = pickle.loads(raw)
    want = report(sample)
    variants = {f"protocol{n}.pickle": pickle.dumps(snapshot, protocol=n) for n in (2, 5)}
    for event in snapshot["device_traces"][0]:
        event["allocsim_test_key"] = 1
    variants["unknown_key.pickle"] = pickle.dumps(snapshot, protocol=4)
    for name, data in variants.items():
        rc, r, warnings = report(write(name, data))
        if name == "unknown_key.pickle":
            said = [w for w in warnings if "'allocsim_test_key'" in w]
            warnings = [w for w in warnings if w not in said]
            if len(said) != 1:
                fail(f"FAIL {name}: no warning names the key: {warnings}")
        if (rc, r, warnings) != want:
            fail(f"FAIL {name}: its report differs from the original snapshot's")
    # `plan` replays each setting on its own thread: a setting the replay refuses is reported the
    # same way (it once ended the program from inside the thread).
    async_settings = pickle.loads(raw)
    async_settings["allocator_settings"]["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
    p = subprocess.run([binary, "plan", write("async.pickle", pickle.dumps(async_settings))],
                       capture_output=True, text=True, timeout=120)
    lines = stderr_lines(p)
    if p.returncode != 2 or len(lines) != 1 or "native caching allocator only" not in lines[0]:
        fail(f"FAIL plan of a cudaMallocAsync snapshot: exit {p.returncode}, stderr: {p.stderr.strip()!r}")
    # A trace too large for the machine: one line and exit 1, not an abort. The address space is
    # capped below what reading gpt2gen needs; not under the sanitizers, which reserve terabytes.
    if not sanitized:
        import resource
        def cap_memory():
            resource.setrlimit(resource.RLIMIT_AS, (128 << 20, 128 << 20))
        p = subprocess.run([binary, "replay", os.path.join(workloads, "gpt2gen_default.pickle.gz"), "-q"],
                           capture_output=True, text=True, timeout=120, preexec_fn=cap_memory)
        lines = stderr_lines(p)
        if p.returncode != 1 or len(lines) != 1 or not lines[0].startswith("allocsim: error: out of memory"):
            fail(f"FAIL out of memory: exit {p.returncode}, stderr: {p.stderr.strip()!r}")
    if not table:
        cases_failed = sum(f.startswith("FAIL case ") for f in failed)
        print(f"{len(CASES) - cases_failed}/{len(CASES)} bad-input cases behave")
        for what in failed:  # again, after the count: the tail of a long log shows them
            print(what)
    sys.exit(1 if failed else 0)


main()
