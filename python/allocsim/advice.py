"""The answer at an out-of-memory error, from the snapshot taken there: how much was missing,
where the reserved memory was, which allocator settings would have avoided the OOM up to this
point of the run, and the source lines holding the most memory. Needs no torch: `allocsim.torch`
takes the snapshot and calls advise()."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ._options import Size, Snapshot
from .plans import plan, plan_accumulation, plan_sweep
from .replays import replay
from .reports import Advice


def format_size(n: int) -> str:
    """Bytes as PyTorch's memory messages write them."""
    sign, n = ("-", -n) if n < 0 else ("", n)
    if n < 1024:
        return f"{sign}{n} bytes"
    for unit, shift in (("KiB", 10), ("MiB", 20), ("GiB", 30)):
        if n < 1 << (shift + 10) or unit == "GiB":
            return f"{sign}{n / (1 << shift):.2f} {unit}"
    raise AssertionError("unreachable")


def _setting_name(conf: str) -> str:
    return conf or "(defaults)"


def advise(snapshot: Snapshot, limit: Optional[Size] = None, card: Optional[Size] = None,
           context: Optional[Size] = None, device: int = 0, capacity: Optional[Size] = None,
           memory_limit: Optional[Size] = None, alloc_conf: Optional[Sequence[str]] = None,
           recordings: Optional[Sequence[Tuple[Snapshot, int]]] = None,
           batch: Optional[int] = None, top_sites: int = 5,
           binary: Optional[str] = None) -> Advice:
    """Advice on a snapshot that ends at an OOM (or anywhere: then it says whether the run so far
    fits). `limit`: the cap on reserved memory the run had (reserved + free at the OOM, or the
    memory fraction's cap); or `card` (with `context` beside PyTorch) to ask about another card.
    `capacity` / `memory_limit`: the device and the memory fraction's cap in bytes (if one was
    set) that the replay reproduces the OOM on; `limit` defaults to `memory_limit`. Returns a dict
    with the figures and `text`, the lines to print. `recordings`: (snapshot, value) of earlier
    runs of the job at smaller values of one size parameter (a batch size, a sequence length):
    the advice then says the largest value that fits, per setting. With `batch` (the recordings'
    values being batch sizes): the remedies at that batch instead, gradient accumulation over
    micro-batches of batch/2, /4 and /8 among them."""
    if limit is None and card is None:
        limit = memory_limit
    state = replay(snapshot, capacity=capacity, memory_limit=memory_limit, device=device,
                   binary=binary)
    plans = plan(snapshot, limit=limit, card=card, context=context, alloc_conf=alloc_conf,
                 device=device, binary=binary)
    stats = state.get("memory_stats", {})
    oom = state.get("oom") or {}
    # At the OOM where there was one, else at the end of the history.
    reserved = oom.get("reserved_bytes", stats.get("reserved_bytes.all.current", 0))
    allocated = oom.get("allocated_bytes", stats.get("allocated_bytes.all.current", 0))
    rows = plans.get("plans", [])
    recorded = rows[0] if rows else None
    room = (plans["limit_bytes"] if "limit_bytes" in plans
            else plans["card_bytes"] - plans["context_bytes"])
    sites = (state.get("sites") or {}).get("at_oom") or []
    advice: Advice = {
        "device": device,
        "oom": bool(oom),
        "message": oom.get("message"),
        "request_bytes": oom.get("alloc_size"),
        "limit_bytes": room,
        "reserved_bytes": reserved,
        "allocated_bytes": allocated,
        "cached_free_bytes": reserved - allocated,
        "largest_free_block_bytes": oom.get("largest_free_block"),
        "needed_bytes": recorded["min_limit_bytes"] if recorded else None,
        "missing_bytes": max(0, -recorded["margin_bytes"]) if recorded else None,
        "settings": [{"alloc_conf": p["alloc_conf"], "min_limit_bytes": p["min_limit_bytes"],
                      "fits": p["fits"], "margin_bytes": p["margin_bytes"],
                      "device_call_seconds": p["device_calls"]["estimated_seconds"]}
                     for p in rows],
        "cheapest": plans.get("cheapest"),
        "smallest_card_bytes": plans.get("smallest_card_bytes"),
        "sites": sites[:top_sites],
        "warnings": state.get("warnings", []),
        "empty_cache_per_step": None,
        "text": "",
    }
    # The recorded setting with torch.cuda.empty_cache() before every step, where the history
    # shows its steps (plan adds it then).
    e = plans.get("empty_cache_every_step")
    advice["empty_cache_per_step"] = (
        {"alloc_conf": e["alloc_conf"], "min_limit_bytes": e["min_limit_bytes"],
         "fits": e["fits"], "margin_bytes": e["margin_bytes"],
         "extra_device_allocs": e["extra_device_allocs"],
         "extra_device_seconds": e["extra_device_seconds"]} if e else None)
    if recordings and batch:
        acc = plan_accumulation([s for s, _ in recordings], [v for _, v in recordings], batch,
                                limit=limit, card=card, context=context, alloc_conf=alloc_conf,
                                device=device, binary=binary)
        advice["batch"] = batch
        advice["gradient_accumulation"] = [
            {"passes": m["passes"], "micro_batch": m["micro_batch"],
             "min_limit_bytes": m["min_limit_bytes"], "fits": m["fits"],
             "margin_bytes": m["margin_bytes"]} for m in acc["gradient_accumulation"]]
        advice["cheapest_at_batch"] = acc["cheapest"]
    elif recordings:
        sweep = plan_sweep([s for s, _ in recordings], [v for _, v in recordings], limit=limit,
                           card=card, context=context, alloc_conf=alloc_conf, device=device,
                           binary=binary)
        advice["largest_values"] = [{"alloc_conf": p["alloc_conf"], "max_value": p["max_value"]}
                                    for p in sweep["plans"]]
        advice["recorded_values"] = sorted(v for _, v in recordings)
    advice["text"] = advice_text(advice, plans)
    return advice


def _cheapest_text(c: Optional[dict]) -> str:
    if c is None:
        return "nothing"
    if "passes" in c:
        return (f"gradient accumulation over {c['passes']} micro-batches of {c['micro_batch']} "
                f"with {c['alloc_conf'] or 'the defaults'}")
    text = (f"PYTORCH_CUDA_ALLOC_CONF={c['alloc_conf']}" if c["alloc_conf"] else
            "the defaults (PYTORCH_CUDA_ALLOC_CONF unset)")
    return text + (" with torch.cuda.empty_cache() before every step"
                   if c.get("empty_cache_every_step") else "")


def advice_text(a: dict, plans: dict) -> str:
    lines: List[str] = []
    where = f"device {a['device']}"
    under = ("under a limit of " + format_size(a["limit_bytes"]) if "limit_bytes" in plans
             else f"on a {format_size(plans['card_bytes'])} card with "
                  f"{format_size(plans['context_bytes'])} outside PyTorch")
    if a["oom"]:
        lines.append(f"allocsim: out of memory on {where}: a request of "
                     f"{format_size(a['request_bytes'])} {under}")
    else:
        lines.append(f"allocsim: the run so far on {where}, {under}")
    largest = a["largest_free_block_bytes"]
    held = (f"  reserved {format_size(a['reserved_bytes'])}: "
            f"{format_size(a['allocated_bytes'])} allocated, "
            f"{format_size(a['cached_free_bytes'])} cached but free")
    if largest is not None and a["request_bytes"]:
        held += (f" (its largest free block {format_size(largest)}, the request "
                 f"{format_size(a['request_bytes'])})")
    lines.append(held)
    rows = a["settings"]
    if rows:
        first = rows[0]
        setting = first["alloc_conf"] or "the defaults"
        if first["fits"]:
            lines.append(f"  up to here the run needs {format_size(first['min_limit_bytes'])} "
                         f"with {setting}: it fits, "
                         f"{format_size(first['margin_bytes'])} to spare")
        else:
            lines.append(f"  up to here the run needs {format_size(first['min_limit_bytes'])} "
                         f"with {setting}: "
                         f"{format_size(-first['margin_bytes'])} more than it had")
        if len(rows) > 1:
            lines.append("  with another allocator setting, up to this point of the run:")
            width = max(len(_setting_name(p["alloc_conf"])) for p in rows[1:])
            for p in rows[1:]:
                verdict = (f"would have fit, {format_size(p['margin_bytes'])} to spare"
                           if p["fits"] else
                           f"does not fit either: {format_size(-p['margin_bytes'])} short")
                lines.append(f"    PYTORCH_CUDA_ALLOC_CONF={_setting_name(p['alloc_conf']):<{width}}"
                             f"  needs {format_size(p['min_limit_bytes']):>10}  {verdict}")
    e = a.get("empty_cache_per_step")
    if e:
        verdict = (f"would have fit, {format_size(e['margin_bytes'])} to spare" if e["fits"] else
                   f"does not fit either: {format_size(-e['margin_bytes'])} short")
        setting = e["alloc_conf"] or "the defaults"
        lines.append(f"  with torch.cuda.empty_cache() before every step and {setting}: "
                     f"needs {format_size(e['min_limit_bytes'])}, {verdict}; "
                     f"{e['extra_device_allocs']} more cudaMalloc calls, about "
                     f"{e['extra_device_seconds'] * 1e3:.0f} ms")
    if rows:
        lines.append(f"  cheapest that fits: {_cheapest_text(a['cheapest'])}"
                     + (f" (the smallest card that fits: "
                        f"{format_size(a['smallest_card_bytes'])})"
                        if a['cheapest'] is None and a.get('smallest_card_bytes') else ""))
    if rows:
        lines.append("  (mixed precision and activation checkpointing change the program: record a "
                     "short run of each variant and plan it)")
    if a.get("gradient_accumulation") is not None:
        lines.append(f"  at batch {a['batch']}, predicted from the recordings:")
        for m in a["gradient_accumulation"]:
            verdict = (f"fits, {format_size(m['margin_bytes'])} to spare" if m["fits"] else
                       f"does not fit: {format_size(-m['margin_bytes'])} short")
            lines.append(f"    {m['passes']} x {m['micro_batch']} (gradient accumulation): "
                         f"needs {format_size(m['min_limit_bytes'])}, {verdict}")
        lines.append(f"    cheapest that fits at batch {a['batch']}: "
                     f"{_cheapest_text(a['cheapest_at_batch'])}")
    if a.get("largest_values"):
        at = ", ".join(str(v) for v in a["recorded_values"])
        found = ", ".join(f"{p['max_value']} ({p['alloc_conf'] or 'defaults'})"
                          for p in a["largest_values"])
        lines.append(f"  the largest value that fits, predicted from the recordings at {at}: {found}")
    if a["sites"]:
        lines.append("  the source lines holding the most memory at the OOM:")
        for s in a["sites"]:
            lines.append(f"    {format_size(s['bytes']):>10} in {s['blocks']} block(s)  {s['site']}")
    for w in a["warnings"]:
        lines.append(f"  warning: {w}")
    return "\n".join(lines) + "\n"
