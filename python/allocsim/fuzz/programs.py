"""Random allocation programs for differential fuzzing against PyTorch's caching allocator.

A program is a list of operations, each a list whose first item names it:
  ["alloc", id, size, stream]     torch.empty(size, dtype=uint8) on stream 0 (default), 1, 2 or 3
  ["alloc", id, size, stream, "raw"]   torch.cuda.caching_allocator_alloc (freed with _delete)
  ["free", id]                    the tensor dropped
  ["record", id, stream]          tensor.record_stream(stream): its free waits for that stream
  ["empty_cache"]                 torch.cuda.empty_cache()
  ["capture", gid, stream, share] a CUDA-graph capture begins on side stream `stream`; its allocations
                                  go to a private pool, its own or (share = an earlier gid) that graph's
  ["end_capture", gid]
  ["drop_graph", gid]             the CUDAGraph object deleted: its pool is released once its blocks are
  ["sync"]                        torch.cuda.synchronize()
  ["wait", s, t]                  stream s waits for stream t (Stream.wait_stream)
  ["set_cap", bytes]              set_per_process_memory_fraction(bytes / total): the cap changed
  ["reset_peak"], ["reset_accumulated"]   torch.cuda.reset_peak_memory_stats() / ..._accumulated_...
  ["recovery", policy, seed]      what the program frees after an OOM from here on
  ["mem_pool", pid]               torch.cuda.MemPool() made
  ["mem_pool", pid, options]      torch.cuda.MemPool(**options) made: {"use_on_oom": True} (a
                                  request about to run out of memory takes a free block of the
                                  pool) and/or {"no_split": True} (its blocks are never split);
                                  an option the release lacks is left out. Never deleted: PyTorch
                                  keeps a deleted use_on_oom pool's id for its fallback
  ["use_pool", pid] ... ["end_use_pool", pid]
                                  a torch.cuda.use_mem_pool(pool) block: every request in it goes
                                  to the pool, on any stream
  ["drop_pool", pid]              the MemPool deleted (its tensors may live on): its destructor
                                  empties that pool's cache
  ["settings", text]              the allocator settings set at run time
                                  (torch._C._accelerator_setAllocatorSettings where the release has
                                  it, else torch.cuda.memory._set_allocator_settings)
  ["cap_before_recording"]        first, where the program's cap is set before the history starts
                                  (set_per_process_memory_fraction at start-up, the usual order)
  ["device", d]                   torch.cuda.set_device(d): the operations after it that name no
                                  tensor (requests, captures, caps, stats resets, synchronisations,
                                  stream waits, MemPools made and used) are device d's; a tensor's
                                  record_stream names a stream of the tensor's own device
An operation on a tensor or graph that is not there when it runs (its alloc failed, or an OOM's
recovery freed it) does nothing. After an OOM the program frees, by its recovery policy, every
second live tensor (in id order; the default), a random half, the newest half or all of them, as
a job that catches torch.OutOfMemoryError and retries with less would.

Two shapes of program (`shape`): "fuzz", short programs (150 to 2,500 operations) whose sizes sit
on the allocator's boundaries, under caps of 384 MiB to 3 GiB; and "user", programs shaped like
users' jobs and other fuzzers': long (2,000 to 10,000 operations), requests up to 4 GiB, caps from
256 MiB to 7 GiB changed mid-run (up, down, below what is reserved), 4 GiB live at most
without one (the differential fuzzer runs ten programs on one GPU at once), synchronisations and stream
waits, stats resets, and a recovery policy of their own.

The shape "pools" is "user" with MemPools besides: pools made, used in blocks (shared by several
blocks, their requests on every stream), deleted while their tensors live or after, some followed
by empty_cache(). Its pool operations are drawn from a random stream of their own, so that the
"user" programs of every seed stay what they were.

The shape "calls" is "pools" with the calls that change the allocator while it runs besides:
its cap set before the history starts (most capped programs), allocator settings strings set
mid-run (expandable_segments switched on and off, max_split_size_mb, roundup_power2_divisions,
garbage_collection_threshold under a cap, several keys at once; each string resets the keys it
does not name that PyTorch resets), empty_cache() inside use_mem_pool blocks, and MemPools made
with use_on_oom or no_split. Its calls are drawn from random streams of their own as well.

Any shape runs on several devices (`devices`): the same program with device switches laid over
it from a random stream of its own (never inside a capture), so that a request's device, and so its
allocator, changes now and then as in a job that moves between GPUs. empty_cache() empties every
device's cache, as PyTorch's does.

Programs depend on the seed alone (random.Random(seed)); this module needs no torch, so the CPU
side (corpus seeds, shrinking bookkeeping) uses it as the GPU side does.
"""
import random

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
# Every size boundary of the allocator: the 512 B rounding, the small/large pools (1 MiB), the small
# segment (2 MiB), the large-segment rounding (10 MiB), the 20 MiB segment, 256 MiB (max split
# sizes, roundup divisions), each one byte either side.
BOUNDARIES = sorted({b + d for b in (512, MiB, 2 * MiB, 10 * MiB, 20 * MiB, 256 * MiB)
                     for d in (-1, 0, 1)} | {1})
STREAMS = 4  # the default stream and three side streams
UNCAPPED_LIVE_BUDGET = 3 * GiB


def random_size(rng):
    r = rng.random()
    if r < 0.30:
        return rng.randint(1, MiB)
    if r < 0.50:
        return rng.choice(BOUNDARIES)
    if r < 0.82:
        return rng.randint(MiB, 20 * MiB)
    if r < 0.97:
        return rng.randint(20 * MiB, 300 * MiB)
    return rng.randint(300 * MiB, 700 * MiB)


def record_stream_op(rng, live):
    """A live tensor recorded on a stream other than its own."""
    victim = rng.choice(sorted(live))
    other = rng.choice([s for s in range(STREAMS) if s != live[victim][1]])
    return ["record", victim, other]


def generate(seed, capped, graphs, shape="fuzz", devices=1):
    """(program, cap_bytes or 0) for `seed`; `capped` picks a cap the program will run into (on
    every device), `graphs` lets it capture CUDA graphs, `shape` is "fuzz", "user" or "pools"
    (see above), `devices` how many devices it switches between."""
    program, cap = generate_one_device(seed, capped, graphs, shape)
    return (on_devices(program, seed, devices) if devices > 1 else program), cap


DEVICE_SWITCH = 0.01  # the chance of a switch before an operation


def on_devices(program, seed, devices):
    """`program` with switches between `devices` devices laid over it, drawn from a random stream
    of its own; none inside a capture (a capture permits no request on another device)."""
    drng = random.Random(seed * 104729 + devices)
    out, current, capturing = [], 0, False
    for op in program:
        if not capturing and drng.random() < DEVICE_SWITCH:
            current = drng.choice([d for d in range(devices) if d != current])
            out.append(["device", current])
        out.append(op)
        if op[0] == "capture":
            capturing = True
        elif op[0] == "end_capture":
            capturing = False
    return out


def generate_one_device(seed, capped, graphs, shape):
    """generate()'s program on one device."""
    if shape in ("user", "pools", "calls"):
        return generate_user(seed, capped, graphs, pools=shape in ("pools", "calls"),
                             calls=shape == "calls")
    rng = random.Random(seed)
    n_ops = rng.randint(150, 2500)
    cap = rng.choice([384, 640, 1024, 1536, 2048, 3072]) * MiB + rng.randrange(0, 64 * MiB, 512) \
        if capped else 0
    budget = cap * 2 if capped else UNCAPPED_LIVE_BUDGET  # past the cap: OOMs to recover from
    program, live, live_bytes = [], {}, 0  # live: id -> (size, stream), as the generator sees it
    graphs_alive, next_id, next_gid = [], 0, 0
    # A program favours some streams and sizes, so that its pools fill in a shape of their own.
    stream_weights = [rng.random() + 0.2 for _ in range(STREAMS)]
    while len(program) < n_ops:
        r = rng.random()
        if r < 0.5 and live_bytes < budget:
            size = random_size(rng)
            stream = rng.choices(range(STREAMS), stream_weights)[0]
            program.append(["alloc", next_id, size, stream])
            live[next_id] = (size, stream)
            live_bytes += size
            next_id += 1
        elif r < 0.88 and live:
            # mostly the newest and oldest: the orders real jobs free in
            ids = sorted(live)
            k = rng.choice([0, -1, -1, rng.randrange(len(ids))])
            victim = ids[k]
            live_bytes -= live.pop(victim)[0]
            program.append(["free", victim])
        elif r < 0.93 and live:
            program.append(record_stream_op(rng, live))
        elif r < 0.945:
            program.append(["empty_cache"])
        elif r < 0.975 and graphs:
            gid = next_gid
            next_gid += 1
            stream = rng.randint(1, STREAMS - 1)
            share = rng.choice(graphs_alive) if graphs_alive and rng.random() < 0.3 else None
            program.append(["capture", gid, stream, share])
            for _ in range(rng.randint(0, 25)):
                if rng.random() < 0.7 or not live:
                    size = random_size(rng) if rng.random() < 0.6 else rng.randint(1, 2 * MiB)
                    program.append(["alloc", next_id, size, stream])
                    live[next_id] = (size, stream)
                    live_bytes += size
                    next_id += 1
                else:
                    victim = rng.choice([max(live), rng.choice(sorted(live))])
                    live_bytes -= live.pop(victim)[0]
                    program.append(["free", victim])
            program.append(["end_capture", gid])
            graphs_alive.append(gid)
        elif graphs_alive:
            gid = rng.choice(graphs_alive)
            graphs_alive.remove(gid)
            program.append(["drop_graph", gid])
    return program, cap


def valid_subset(program, keep):
    """The operations of `program` at the indices in `keep`, made whole again: a capture keeps its
    end and the reverse, and an operation on a tensor or graph whose creation was dropped is dropped
    too (it would do nothing)."""
    keep = set(keep)
    for begin, end in (("capture", "end_capture"), ("use_pool", "end_use_pool")):
        ends, pairs = {}, []
        for i, op in enumerate(program):  # a pool's blocks pair in order
            if op[0] == begin:
                ends[op[1]] = i
            elif op[0] == end and op[1] in ends:
                pairs.append((ends.pop(op[1]), i))
        for b, e in pairs:
            if (b in keep) != (e in keep):
                keep.discard(b)
                keep.discard(e)
    out, tensors, graphs, pools = [], set(), set(), set()
    for i, op in enumerate(program):
        if i not in keep:
            continue
        kind = op[0]
        if kind == "alloc":
            tensors.add(op[1])
        elif kind in ("free", "record") and op[1] not in tensors:
            continue
        elif kind == "capture":
            graphs.add(op[1])
            if op[3] is not None and op[3] not in graphs:
                op = [kind, op[1], op[2], None]
        elif kind == "drop_graph" and op[1] not in graphs:
            continue
        elif kind == "mem_pool":
            pools.add(op[1])
        elif kind in ("use_pool", "end_use_pool", "drop_pool") and op[1] not in pools:
            continue
        out.append(op)
    return out


def shrink(program, diverges, budget):
    """Delta debugging (ddmin over operations): a shorter program for which `diverges` still holds.
    `diverges` runs a candidate through the oracle; at most `budget` calls."""
    calls = 0
    n = 2
    while len(program) >= 2 and calls < budget:
        chunk = max(1, len(program) // n)
        reduced = False
        for start in range(0, len(program), chunk):
            if calls >= budget:
                break
            keep = [i for i in range(len(program)) if not start <= i < start + chunk]
            candidate = valid_subset(program, keep)
            if not candidate or len(candidate) >= len(program):
                continue
            calls += 1
            if diverges(candidate):
                program = candidate
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(program), n * 2)
    return program, calls


RECOVERY_POLICIES = ("every_second", "random_half", "newest_half", "all")


def user_size(rng, largest):
    """A request as jobs make them: mostly small and mid-sized, some large, rarely huge."""
    r = rng.random()
    if r < 0.35:
        return rng.randint(1, 2 * MiB)
    if r < 0.75:
        return rng.randint(2 * MiB, 64 * MiB)
    if r < 0.95:
        return rng.randint(64 * MiB, 512 * MiB)
    return rng.randint(min(512 * MiB, largest), largest)


UNCAPPED_POOLS = 3  # MemPools alive at once in a program without a cap
UNCAPPED_POOL_REQUEST = 64 * MiB


def pool_options(orng):
    """The options of a MemPool in a "calls" program, drawn from `orng`: use_on_oom in about a
    third, no_split in about a fifth, some both."""
    options = {}
    if orng.random() < 0.35:
        options["use_on_oom"] = True
    if orng.random() < 0.2:
        options["no_split"] = True
    return options


def pool_ops(prng, state, live, next_id, largest, capped, empty_cache_inside=0.0, orng=None):
    """MemPool operations at one point of a "pools" program, drawn from `prng` (the pools'
    options from `orng`, where given); `state` holds the pools made and not deleted, and those
    never to be deleted. Returns (operations, next_id). Without a cap, a pool's segments stay
    reserved until it is deleted, which the live-tensor budget does not count: few pools at once
    and smaller requests in them keep ten such programs inside one card."""
    ops = []
    r = prng.random()
    kept = state.setdefault("kept", set())
    deletable = [p for p in state["alive"] if p not in kept]
    if not capped and len(state["alive"]) >= UNCAPPED_POOLS and deletable:
        r = 1.0  # delete one first
    if r < 0.25 or not state["alive"]:
        pid = state["next"]
        state["next"] += 1
        state["alive"].append(pid)
        options = pool_options(orng) if orng is not None else {}
        if not capped and len(kept) >= UNCAPPED_POOLS - 1:
            options.pop("use_on_oom", None)  # one pool at least stays deletable
        if options.get("use_on_oom"):
            kept.add(pid)
        ops.append(["mem_pool", pid] + ([options] if options else []))
    elif r < 0.8:
        pid = prng.choice(state["alive"])
        ops.append(["use_pool", pid])
        for _ in range(prng.randint(1, 30)):
            if empty_cache_inside and prng.random() < empty_cache_inside:
                ops.append(["empty_cache"])  # inside the block: the pool's cache too
            elif prng.random() < 0.7 or not live:
                size = user_size(prng, largest)
                if not capped:
                    size = min(size, UNCAPPED_POOL_REQUEST)
                stream = prng.randrange(STREAMS)
                ops.append(["alloc", next_id, size, stream])
                live[next_id] = (size, stream)
                next_id += 1
            else:
                victim = prng.choice(sorted(live))
                live.pop(victim)
                ops.append(["free", victim])
        ops.append(["end_use_pool", pid])
    elif deletable:
        pid = prng.choice(deletable)
        state["alive"].remove(pid)
        ops.append(["drop_pool", pid])
        if prng.random() < 0.4:
            ops.append(["empty_cache"])
    return ops, next_id


def settings_string(srng, capped):
    """An allocator settings string as jobs set them mid-run: mostly expandable_segments
    switched, sometimes the splitting and rounding keys, several keys at once."""
    r = srng.random()
    if r < 0.45:
        return f"expandable_segments:{srng.choice(['True', 'False'])}"
    keys = []
    if r < 0.65 or srng.random() < 0.4:
        keys.append(f"max_split_size_mb:{srng.choice([20, 64, 128, 200, 512, 1024])}")
    if srng.random() < 0.35:
        keys.append(f"roundup_power2_divisions:{srng.choice([1, 2, 4, 8])}")
    if capped and srng.random() < 0.35:
        keys.append(f"garbage_collection_threshold:{srng.choice(['0.5', '0.6', '0.8', '0.95'])}")
    if srng.random() < 0.3:
        keys.append(f"expandable_segments:{srng.choice(['True', 'False'])}")
    srng.shuffle(keys)
    return ",".join(keys) or "max_split_size_mb:256"


SETTINGS_CHANCE = 0.004  # of a settings string before an operation, in a "calls" program


def generate_user(seed, capped, graphs, pools=False, calls=False):
    """A "user" program (see the module's text): (program, cap_bytes or 0); with `pools`, the
    "pools" shape's; with `calls` too, the "calls" shape's."""
    rng = random.Random(seed)
    prng = random.Random(seed * 7919 + 17)  # the pool operations' own
    srng = random.Random(seed * 6151 + 29)  # the "calls" shape's own
    orng = random.Random(seed * 4703 + 41) if calls else None  # its MemPools' options
    pool_state = {"alive": [], "next": 0}
    n_ops = rng.randint(2000, 10000)
    cap = start_cap = rng.randint(256 * MiB, 7 * GiB) // 512 * 512 if capped else 0
    largest = min(4 * GiB, max(cap, 256 * MiB)) if capped else 2 * GiB
    budget = cap * 2 if capped else 4 * GiB
    program = [["recovery", rng.choice(RECOVERY_POLICIES), rng.randrange(1 << 30)]]
    if calls and capped and srng.random() < 0.85:
        program.insert(0, ["cap_before_recording"])
    live, live_bytes, next_id, next_gid, graphs_alive = {}, 0, 0, 0, []
    stream_weights = [rng.random() + 0.2 for _ in range(STREAMS)]
    free_newest = rng.random()  # stack-like jobs free the newest; others, any
    while len(program) < n_ops:
        if calls and srng.random() < SETTINGS_CHANCE:
            program.append(["settings", settings_string(srng, capped)])
        if pools and prng.random() < 0.03:
            sizes = dict(live)
            ops, next_id = pool_ops(prng, pool_state, live, next_id, largest, capped,
                                    empty_cache_inside=0.05 if calls else 0.0, orng=orng)
            program += ops
            live_bytes += sum(live[t][0] for t in live if t not in sizes) - \
                sum(sizes[t][0] for t in sizes if t not in live)
        r = rng.random()
        if r < 0.46 and live_bytes < budget:
            size = user_size(rng, largest)
            stream = rng.choices(range(STREAMS), stream_weights)[0]
            # one in twenty through torch.cuda.caching_allocator_alloc / _delete
            program.append(["alloc", next_id, size, stream] + (["raw"] if r < 0.023 else []))
            live[next_id] = (size, stream)
            live_bytes += size
            next_id += 1
        elif r < 0.86 and live:
            ids = sorted(live)
            victim = ids[-1] if rng.random() < free_newest else rng.choice(ids)
            live_bytes -= live.pop(victim)[0]
            program.append(["free", victim])
        elif r < 0.89 and live:
            program.append(record_stream_op(rng, live))
        elif r < 0.91:
            program.append(["empty_cache"])
        elif r < 0.93:
            program.append(["sync"])
        elif r < 0.95:
            a, b = rng.sample(range(STREAMS), 2)
            program.append(["wait", a, b])
        elif r < 0.96 and capped:
            cap = min(7 * GiB, max(128 * MiB, int(cap * rng.uniform(0.5, 1.6)) // 512 * 512))
            program.append(["set_cap", cap])
        elif r < 0.965:
            program.append(["reset_peak"])
        elif r < 0.97:
            program.append(["reset_accumulated"])
        elif r < 0.985 and graphs:
            gid, next_gid = next_gid, next_gid + 1
            stream = rng.randint(1, STREAMS - 1)
            share = rng.choice(graphs_alive) if graphs_alive and rng.random() < 0.3 else None
            program.append(["capture", gid, stream, share])
            for _ in range(rng.randint(0, 25)):
                size = rng.randint(1, 32 * MiB)
                program.append(["alloc", next_id, size, stream])
                live[next_id] = (size, stream)
                live_bytes += size
                next_id += 1
            program.append(["end_capture", gid])
            graphs_alive.append(gid)
        elif graphs_alive:
            gid = rng.choice(graphs_alive)
            graphs_alive.remove(gid)
            program.append(["drop_graph", gid])
    return program, start_cap
