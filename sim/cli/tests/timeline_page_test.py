#!/usr/bin/env python3
"""The timeline page in a real browser (headless Chromium over its DevTools protocol): pages of
traces far below their limit, near it and stopped by an OOM are opened, zoomed with the wheel,
panned with a drag and clicked, and what they draw is checked against the replay's own JSON.
Exits 77 (skipped) where no Chromium is installed.

usage: timeline_page_test.py ALLOCSIM WORKLOADS_DIR [--screenshots DIR]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chromium import Chromium, find_chromium  # noqa: E402

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL " + message)
    return condition


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=300)


def replay_json(binary, trace, *options):
    p = run(binary, "replay", trace, *options, "--json", "-", "-q")
    assert p.returncode in (0, 3), p.stderr
    return json.loads(p.stdout)


def page(binary, trace, out, *options):
    p = run(binary, "replay", trace, *options, "--timeline-out", out, "-q")
    assert p.returncode in (0, 3) and os.path.exists(out), p.stderr
    return out


def ticks(c, panel, axis):
    """The tick labels of a panel's axis, with their boxes."""
    return c.evaluate(f"""[...document.querySelectorAll('#panel{panel} text.tick.{axis}')].map(t => {{
        const b = t.getBBox(); return [t.textContent, b.x, b.y, b.width, b.height]; }})""")


def overlapping(boxes, vertical):
    boxes = sorted(boxes, key=lambda b: b[2] if vertical else b[1])
    for a, b in zip(boxes, boxes[1:]):
        if vertical and a[2] + a[4] > b[2]:
            return (a[0], b[0])
        if not vertical and a[1] + a[3] > b[1]:
            return (a[0], b[0])
    return None


def parse_size(label):
    if label == "0":
        return 0
    value, unit = label.split()
    return float(value) * {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]


def check_axes(c, name, runs, data_max, limit_in_view):
    for k in range(runs):
        y = ticks(c, k, "y")
        labels = [t[0] for t in y]
        check(5 <= len(y) <= 7, f"{name} panel {k}: {len(y)} y ticks {labels}, expected 5 to 7")
        check(len(set(labels)) == len(labels), f"{name} panel {k}: repeated y labels {labels}")
        check(overlapping(y, True) is None, f"{name} panel {k}: y labels overlap {overlapping(y, True)}")
        top = parse_size(labels[-1])
        if data_max is None:  # a zoomed view: scaled to the events in it
            pass
        elif check(top >= data_max, f"{name} panel {k}: axis top {labels[-1]} below the data's {data_max}") \
                and not limit_in_view:
            check(top < 2 * data_max, f"{name} panel {k}: axis top {labels[-1]} not scaled to {data_max}")
        x = ticks(c, k, "x")
        check(2 <= len(x) <= 8, f"{name} panel {k}: {len(x)} x ticks")
        check(overlapping(x, False) is None, f"{name} panel {k}: x labels overlap {overlapping(x, False)}")
        has_line = c.evaluate(f"!!document.querySelector('#panel{k} line.limit')")
        has_arrow = c.evaluate(f"!!document.querySelector('#panel{k} .limit-above')")
        check(has_line == limit_in_view and has_arrow != limit_in_view,
              f"{name} panel {k}: limit line {has_line}, arrow {has_arrow}; expected the "
              f"{'line' if limit_in_view else 'arrow'}")


def view(c):
    return [float(v) for v in c.evaluate("document.body.dataset.view").split(",")]


def plot_point(c, panel, fraction):
    """Page coordinates of a point `fraction` of the way along a panel's plot, mid-height."""
    return c.evaluate(f"""(() => {{ const b = document.getElementById('panel{panel}').getBoundingClientRect();
        const s = b.width / 960; return [b.left + (80 + 860 * {fraction}) * s, b.top + 120 * s]; }})()""")


def segment_map_figures(c, index=0):
    """Per segment map shown: segments, their bytes, and the bytes of allocated blocks."""
    return c.evaluate(f"""(() => {{ const m = document.querySelectorAll('svg.segmap')[{index}];
        const sum = (sel) => [...m.querySelectorAll(sel)].reduce((s, e) => s + Number(e.dataset.bytes), 0);
        return [m.querySelectorAll('g.segment').length, sum('g.segment'), sum('rect.block.allocated')]; }})()""")


def open_page(c, path, name, shots):
    c.open(path)
    seconds = c.wait_for("document.body && document.body.dataset.ready === '1'")
    events = seconds + c.wait_for("document.body.dataset.events === '1'")
    print(f"{name}: {os.path.getsize(path)} bytes; drawn {seconds:.2f} s after navigating, "
          f"every event read {events:.2f} s after")
    check(not c.console, f"{name}: console {c.console}")
    if shots:
        c.screenshot(os.path.join(shots, name + "-open.png"))
    return seconds


def far_below(binary, workloads, tmp, c, shots):
    """A long generation run far below its 80 GiB card: the axis follows the data, the limit is an
    arrow; the wheel zooms to single events, which are listed; a drag pans; a marker shows the
    segments, which at the last event are the replay's final state."""
    trace = os.path.join(workloads, "gpt2gen_default.pickle.gz")
    path = page(binary, trace, os.path.join(tmp, "gpt2gen.html"))
    again = page(binary, trace, os.path.join(tmp, "gpt2gen-again.html"))
    check(open(path, "rb").read() == open(again, "rb").read(), "gpt2gen: two runs wrote different pages")
    check(os.path.getsize(path) < 2_000_000, f"gpt2gen: page of {os.path.getsize(path)} bytes, over 2 MB")
    stats = replay_json(binary, trace)
    ms = stats["memory_stats"]
    events = stats["events_total"]
    open_page(c, path, "gpt2gen", shots)
    check_axes(c, "gpt2gen", 1, ms["reserved_bytes.all.peak"], limit_in_view=False)
    check(view(c) == [0, events], f"gpt2gen: first view {view(c)}")
    check(c.evaluate("document.querySelectorAll('#events tr[data-event]').length") == 0,
          "gpt2gen: events listed at full view")

    # Zoom with the wheel around the peak allocated, down to single events.
    x, y = plot_point(c, 0, 126076 / events)
    for _ in range(40):
        a, b = view(c)
        if b - a <= 200:
            break
        c.wheel(x, y, -120)
    a, b = view(c)
    pixel = events / 860  # the events under one pixel of the whole run, where the wheel turned
    check(b - a <= 200 and a - pixel <= 126076 <= b + pixel,
          f"gpt2gen: zoomed to {a}..{b}, not around event 126076")
    rows = c.evaluate("[...document.querySelectorAll('#events tr[data-event]')].map(r => [+r.dataset.event, r.cells[1].textContent, r.cells[2].textContent])")
    first, last = max(0, int(a)), min(events - 1, int(-(-b // 1)))
    check(len(rows) == last - first + 1 and rows and rows[0][0] == first,
          f"gpt2gen: {len(rows)} rows listed for events {first}..{last}")
    check(all(r[1] in ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                       "segment_map", "segment_unmap", "oom", "snapshot", "other", "unknown") for r in rows),
          f"gpt2gen: unexpected actions {set(r[1] for r in rows)}")
    check(c.evaluate("document.querySelectorAll('#panel0 circle.event').length") > 0,
          "gpt2gen: no single events drawn when zoomed in")
    check_axes(c, "gpt2gen zoomed", 1, None, limit_in_view=False)
    if shots:
        c.screenshot(os.path.join(shots, "gpt2gen-zoomed.png"))

    # A drag to the right shows earlier events.
    before = view(c)
    c.drag(x, y, x + 200)
    after = view(c)
    check(after[0] < before[0] and abs((after[1] - after[0]) - (before[1] - before[0])) < 1e-6,
          f"gpt2gen: drag moved the view from {before} to {after}")

    # A click puts the cursor there and lists that event as selected.
    c.click(x, y)
    check(c.evaluate("!!document.querySelector('#panel0 line.cursor')"), "gpt2gen: no cursor after a click")
    check(c.evaluate("document.querySelectorAll('#events tr.selected').length") == 1,
          "gpt2gen: the clicked event is not marked in the list")

    # Back to the whole run; the marker of the last event shows the final state.
    c.evaluate("document.getElementById('whole').click()")
    check(view(c) == [0, events], f"gpt2gen: 'whole run' left the view at {view(c)}")
    c.evaluate(f"document.querySelector('#panel0 .moment[data-event=\"{events - 1}\"]').dispatchEvent(new MouseEvent('mousedown', {{bubbles: true}}))")
    c.evaluate(f"document.querySelector('#panel0 .moment[data-event=\"{events - 1}\"]').dispatchEvent(new MouseEvent('mouseup', {{bubbles: true}}))")
    segments, reserved, allocated = segment_map_figures(c)
    check(segments == ms["segment.all.current"] and reserved == ms["reserved_bytes.all.current"]
          and allocated == ms["allocated_bytes.all.current"],
          f"gpt2gen: the map at the last event has {segments} segments, {reserved} reserved, "
          f"{allocated} allocated; the replay ends with {ms['segment.all.current']}, "
          f"{ms['reserved_bytes.all.current']}, {ms['allocated_bytes.all.current']}")
    if shots:
        c.screenshot(os.path.join(shots, "gpt2gen-last-moment.png"))


def near_limit(binary, workloads, tmp, c, shots):
    """A Llama run under a 10.5 GB cap, with expandable segments beside it: the limit is drawn in
    both panels, the cursor is linked, and the OOM's map marks the failed request and the largest
    free block."""
    trace = os.path.join(workloads, "llama-varlen-bf16_default_cap10500000000.pickle.gz")
    cap = ["--memory-limit", "10500000000"]
    path = page(binary, trace, os.path.join(tmp, "llama.html"), *cap,
                "--compare-alloc-conf", "expandable_segments:True")
    stats = replay_json(binary, trace, *cap)
    check(stats["oom"] is not None, "llama: the capped replay has no OOM")
    open_page(c, path, "llama", shots)
    check(c.evaluate("document.querySelectorAll('svg.panel').length") == 2, "llama: not two panels")
    check_axes(c, "llama", 2, stats["memory_stats"]["reserved_bytes.all.peak"], limit_in_view=True)
    oom_event = stats["oom"]["event_index"]
    button = c.evaluate("[...document.querySelectorAll('#jumps button')].findIndex(b => b.textContent.startsWith('OOM'))")
    check(button >= 0, "llama: no button for the OOM")
    if button >= 0:
        c.evaluate(f"document.querySelectorAll('#jumps button')[{button}].click()")
    check(c.evaluate("document.querySelectorAll('line.cursor').length") == 2,
          "llama: the cursor is not in both panels")
    check(c.evaluate("!!document.querySelector('#panel0 line.oom')"), "llama: the OOM is not drawn")
    check(c.evaluate("!!document.querySelector('.oom-note')") and
          c.evaluate("!!document.querySelector('svg.segmap rect.failed-request')") and
          c.evaluate("!!document.querySelector('svg.segmap rect.largest-free')"),
          "llama: the OOM's segment map does not mark the failed request and the largest free block")
    note = c.evaluate("document.querySelector('.oom-note') && document.querySelector('.oom-note').textContent") or ""
    from_json = stats["oom"]["alloc_size"]
    check(f"{from_json / 2**20:.2f} MiB" in note, f"llama: OOM note {note!r} does not name {from_json} bytes")
    reserved = segment_map_figures(c)[1]
    check(reserved <= 10500000000, f"llama: {reserved} bytes reserved at the OOM, above the cap")
    check(c.evaluate("document.querySelectorAll('svg.segmap').length") == 2, "llama: not a map per panel")
    check(view(c)[0] <= oom_event <= view(c)[1], "llama: the OOM button did not bring the OOM into view")
    if shots:
        c.screenshot(os.path.join(shots, "llama-oom.png"))


def stopped(binary, workloads, tmp, c, shots):
    """A run on a card too small for it stops at the OOM: the limit is in view, the rest greyed."""
    trace = os.path.join(workloads, "gpt2_default.pickle.gz")
    path = page(binary, trace, os.path.join(tmp, "stopped.html"), "--capacity", "2GiB")
    stats = replay_json(binary, trace, "--capacity", "2GiB")
    check(stats["stopped_at_oom"], "stopped: the replay did not stop at an OOM")
    open_page(c, path, "stopped", shots)
    check_axes(c, "stopped", 1, stats["memory_stats"]["reserved_bytes.all.peak"], limit_in_view=True)
    check(c.evaluate("!!document.querySelector('#panel0 line.oom')"), "stopped: the OOM is not drawn")
    markers = c.evaluate("[...document.querySelectorAll('#panel0 .moment')].map(m => +m.dataset.event)")
    check(markers and max(markers) <= stats["oom"]["event_index"],
          f"stopped: segment maps past the OOM at {stats['oom']['event_index']}: {markers}")


def with_stacks(binary, workloads, tmp, c, shots):
    """A snapshot with stack frames: a listed alloc names its source line, and a click on its row
    lists its frames."""
    trace = os.path.join(workloads, "llama-varlen-bf16_default_stacks_window.pickle.gz")
    path = page(binary, trace, os.path.join(tmp, "stacks.html"))
    open_page(c, path, "stacks", shots)
    c.wait_for("document.body.dataset.events === '1'")
    event = c.evaluate("""(() => { const t = traceOf(page.data.runs[0]);
        for (let i = t.events - 1; i >= 0; i--) if (t.site[i] && t.action[i] === 0) return i; return -1; })()""")
    check(event >= 0, "stacks: no alloc with a stack")
    c.evaluate(f"setView({event} - 40, {event} + 40)")
    row = f"#events tr[data-event=\"{event}\"]"
    source = c.evaluate(f"document.querySelector('{row}') && document.querySelector('{row}').cells[6].textContent") or ""
    check(".py:" in source, f"stacks: event {event} listed with source {source!r}")
    c.evaluate(f"document.querySelector('{row}').click()")
    frames = c.evaluate("[...document.querySelectorAll('#stack ol.frames li')].map(l => l.textContent)")
    check(len(frames) >= 2 and all(".py:" in f for f in frames), f"stacks: frames {frames}")
    if shots:
        c.screenshot(os.path.join(shots, "stacks-frames.png"))


def diff_page(binary, workloads, tmp, c, shots):
    """allocsim diff's page: the two runs and B under A's allocator on one scale, each with a
    segment map where their reserved memory parts."""
    a = os.path.join(workloads, "gpt2_default.pickle.gz")
    b = os.path.join(workloads, "gpt2_expandable.pickle.gz")
    path = os.path.join(tmp, "diff.html")
    p = run(binary, "diff", a, b, "--out", path, "--json", "-", "-q")
    check(p.returncode == 0 and os.path.exists(path), f"diff --out: {p.returncode} {p.stderr[-300:]}")
    report = json.loads(p.stdout)
    open_page(c, path, "diff", shots)
    titles = c.evaluate("[...document.querySelectorAll('.panel-title')].map(t => t.textContent)")
    check(len(titles) == 3 and titles[0].startswith("A: gpt2_default") and
          titles[1].startswith("B: gpt2_expandable") and
          titles[2].startswith("B's requests under A's allocator"), f"diff: panel titles {titles}")
    data_max = max(report["a"]["peak_reserved_bytes"], report["b"]["peak_reserved_bytes"])
    check_axes(c, "diff", 3, data_max, limit_in_view=False)
    tops = [ticks(c, k, "y")[-1][0] for k in range(3)]
    check(len(set(tops)) == 1, f"diff: the panels' scales differ: {tops}")
    parting = report["reserved_parting"]
    for k, event in ((0, parting["a_event"]), (1, parting["b_event"])):
        label = c.evaluate(f"(() => {{ const m = document.querySelector('#panel{k} .moment[data-event=\"{event}\"] title'); return m && m.textContent; }})()") or ""
        check("reserved parts from the other run" in label,
              f"diff: panel {k} has no marked moment at the parting event {event}: {label!r}")
    if shots:
        c.screenshot(os.path.join(shots, "diff.png"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("allocsim")
    parser.add_argument("workloads")
    parser.add_argument("--screenshots")
    args = parser.parse_args()
    browser = find_chromium()
    if not browser:
        print("SKIP: no Chromium installed (Debian: apt install chromium)")
        return 77
    if args.screenshots:
        os.makedirs(args.screenshots, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, Chromium(browser) as c:
        for case in (far_below, near_limit, stopped, with_stacks, diff_page):
            case(args.allocsim, args.workloads, tmp, c, args.screenshots)
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("timeline page: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
