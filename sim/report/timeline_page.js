// The timeline page's script: reads the data the replay embedded (timeline_page_data.hpp), draws
// each run's allocated, active and reserved memory for the events in view at the resolution the
// view needs, zooms and pans down to single events, lists the events in view, and shows the
// segments and blocks at the replay's kept moments. No network, no libraries.
'use strict';

const W = 960, PANEL_H = 270, LEFT = 80, RIGHT = 20, TOP = 26, BOTTOM = 60;
const PLOT_W = W - LEFT - RIGHT, PLOT_H = PANEL_H - TOP - BOTTOM;
const MIN_SPAN = 20;        // the fewest events a view shows
const LIST_EVENTS = 400;    // the events table appears when this few are in view
// The quantities in the data's order (allocated, active, reserved), and the order they are drawn.
const QUANTITIES = ['allocated', 'active', 'reserved'];
const ALLOCATED = 0, RESERVED = 2;
const SERIES = [['reserved', '#e67e22', 2], ['active', '#2e86c1', 1], ['allocated', '#27ae60', 0]];
const UNITS = [[2 ** 40, 'TiB'], [2 ** 30, 'GiB'], [2 ** 20, 'MiB'], [2 ** 10, 'KiB'], [1, 'bytes']];

const page = {data: null, view: [0, 1], selected: null, dragging: null};

function formatSize(b) {  // as PyTorch's format_size
  if (b < 1024) return b + ' bytes';
  if (b < 1048576) return (b / 1024).toFixed(2) + ' KiB';
  if (b < 1073741824) return (b / 1048576).toFixed(2) + ' MiB';
  return (b / 1073741824).toFixed(2) + ' GiB';
}

function escapeText(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'})[c]);
}

// The byte axis as sim/report/axis_ticks.cpp draws it: 1, 2, 2.5 or 5 times a power of ten of
// the unit the largest value reaches, the smallest step giving at most 6 intervals.
function byteAxis(largest) {
  largest = Math.max(1, largest);
  const [unit, name] = UNITS.find(([u]) => largest >= u) || UNITS[4];
  const inUnits = largest / unit;
  for (let power = 10 ** (Math.floor(Math.log10(inUnits / 6)) - 1);; power *= 10) {
    for (const m of [1, 2, 2.5, 5]) {
      const step = Math.round(m * power * unit);
      if (step < 1) continue;
      const intervals = Math.ceil(largest / step);
      if (intervals <= 6) {
        const ticks = [];
        for (let i = 0; i <= intervals; i++) ticks.push(i * step);
        const label = (v) => {
          if (v === 0) return '0';
          const x = v / unit;
          for (let d = 0; d <= 3; d++) {
            const s = x.toFixed(d);
            if (Math.abs(parseFloat(s) - x) <= 1e-6 * Math.max(1, x)) return s + ' ' + name;
          }
          return x.toFixed(3) + ' ' + name;
        };
        return {top: intervals * step, ticks, labels: ticks.map(label)};
      }
    }
  }
}

// Event numbers on the x axis: 1, 2 or 5 times a power of ten, at most 8 ticks.
function eventTicks(a, b) {
  const span = Math.max(1, b - a);
  for (let power = 10 ** Math.floor(Math.log10(span / 8));; power *= 10) {
    for (const m of [1, 2, 5]) {
      const step = Math.max(1, m * power);
      if (span / step <= 7) {
        const ticks = [];
        for (let v = Math.ceil(a / step) * step; v <= b; v += step) ticks.push(v);
        return ticks;
      }
    }
  }
}

// LEB128 numbers; `deltas`: zig-zag differences, summed.
function decodeColumn(bytes, n, deltas) {
  const out = new Float64Array(n);
  let pos = 0, acc = 0;
  for (let i = 0; i < n; i++) {
    let v = 0, mul = 1, b;
    do {
      b = bytes[pos++];
      v += (b & 127) * mul;
      mul *= 128;
    } while (b & 128);
    if (deltas) {
      acc += v % 2 ? -(v + 1) / 2 : v / 2;
      out[i] = acc;
    } else {
      out[i] = v;
    }
  }
  return out;
}

// One part of the page's data (timeline_page_data.hpp): the header and a reader of its columns.
async function readPart(id) {
  const text = document.getElementById(id).textContent.trim();
  const packed = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const inflated = new Blob([packed]).stream().pipeThrough(new DecompressionStream('deflate'));
  const bytes = new Uint8Array(await new Response(inflated).arrayBuffer());
  const headerLength = (bytes[0] | (bytes[1] << 8) | (bytes[2] << 16) | (bytes[3] << 24)) >>> 0;
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(4, 4 + headerLength)));
  const base = 4 + headerLength;
  const columns = {};
  for (const [name, offset, length] of header.columns) {
    columns[name] = bytes.subarray(base + offset, base + offset + length);
  }
  header.column = (name, n, deltas) => decodeColumn(columns[name], n, deltas);
  header.raw = (name) => columns[name];
  return header;
}

// The summary first: enough to draw every view down to buckets of a few dozen events.
async function loadSummary() {
  const data = await readPart('timeline-summary');
  data.runs.forEach((run, k) => {
    run.index = k;
    run.levels.forEach((level, l) => {
      level.min = [], level.max = [];
      for (const name of QUANTITIES) {
        level.min.push(data.column(`r${k}.L${l}.${name}.min`, level.buckets, true));
        level.max.push(data.column(`r${k}.L${l}.${name}.max`, level.buckets, true));
      }
    });
  });
  return data;
}

// The events, read once the first picture is up; views of single events wait for them.
function loadEvents() {
  if (!page.loadingEvents) {
    page.loadingEvents = readPart('timeline-events').then((events) => {
      page.events = events;
      draw();
      if (page.selected !== null) {
        showStack(page.data.runs[0], Math.max(0, Math.min(page.data.runs[0].events - 1, page.selected)));
      }
      document.body.dataset.events = '1';
    });
  }
  return page.loadingEvents;
}

// A run's quantities after every event, decoded when a view first needs single events.
// Null until the events are read.
function seriesOf(run) {
  if (!page.events) return null;
  if (!run.series) {
    run.series = QUANTITIES.map((name) => page.events.column(`r${run.index}.${name}`, run.events, true));
  }
  return run.series;
}

function traceOf(run) {
  if (!page.events) return null;
  const t = page.data.traces[run.trace];
  if (!t.decoded) {
    const k = run.trace;
    t.action = page.events.raw(`t${k}.action`);
    t.size = page.events.column(`t${k}.size`, t.events, false);
    t.stream = page.events.column(`t${k}.stream`, t.events, false);
    t.site = page.events.column(`t${k}.site`, t.events, false);
    t.decoded = true;
  }
  return t;
}

// Each event in [a, b] with its quantities, for a view of single events.
function eventsOf(run, a, b) {
  const series = seriesOf(run);
  const last = run.stopped !== null ? run.stopped : run.events - 1;
  const out = [];
  for (let i = Math.max(0, Math.floor(a)); i <= Math.min(last, Math.ceil(b)); i++) {
    const v = series.map((s) => s[i]);
    out.push({first: i, last: i, min: v, max: v});
  }
  return out;
}

// Per pixel column of the plot, each quantity's [min, max] over the events it covers, from the
// coarsest summary level whose buckets are no wider than a column, or from the events themselves.
function columnsOf(run, a, b) {
  const perPixel = (b - a) / PLOT_W;
  const last = run.stopped !== null ? run.stopped + 1 : run.events;
  let level = null;
  for (const l of run.levels) if (l.width <= perPixel) level = l;
  const series = level ? null : seriesOf(run);
  if (!level && !series) {  // the events are still being read
    level = run.levels[0];
    if (!level) return [];
  }
  const out = [];
  for (let x = 0; x < PLOT_W; x++) {
    const s = Math.max(0, Math.floor(a + x * perPixel));
    const e = Math.min(last, Math.max(s + 1, Math.ceil(a + (x + 1) * perPixel)));
    if (s >= last) break;
    const col = {x, first: s, last: e - 1, min: [Infinity, Infinity, Infinity], max: [-Infinity, -Infinity, -Infinity]};
    for (let q = 0; q < 3; q++) {
      if (level) {
        const lo = Math.floor(s / level.width), hi = Math.min(level.buckets, Math.ceil(e / level.width));
        for (let i = lo; i < hi; i++) {
          col.min[q] = Math.min(col.min[q], level.min[q][i]);
          col.max[q] = Math.max(col.max[q], level.max[q][i]);
        }
      } else {
        for (let i = s; i < e; i++) {
          col.min[q] = Math.min(col.min[q], series[q][i]);
          col.max[q] = Math.max(col.max[q], series[q][i]);
        }
      }
    }
    out.push(col);
  }
  return out;
}

const xOf = (event) => LEFT + PLOT_W * (event - page.view[0]) / (page.view[1] - page.view[0]);
const eventAt = (x) => page.view[0] + (x - LEFT) / PLOT_W * (page.view[1] - page.view[0]);

function drawPanel(run, columns, axis, singleEvents) {
  const yOf = (v) => TOP + PLOT_H * (1 - v / axis.top);
  const parts = [];
  parts.push(`<rect width="${W}" height="${PANEL_H}" fill="white"/>`);
  SERIES.forEach(([name, color], i) => {
    parts.push(`<rect x="${LEFT + 90 * i}" y="6" width="14" height="4" fill="${color}"/>` +
               `<text x="${LEFT + 90 * i + 18}" y="12">${name}</text>`);
  });
  axis.ticks.forEach((v, i) => {
    const y = yOf(v).toFixed(1);
    parts.push(`<line x1="${LEFT}" x2="${LEFT + PLOT_W}" y1="${y}" y2="${y}" stroke="#e4e4e4"/>`);
    parts.push(`<text class="tick y" x="${LEFT - 6}" y="${(+y + 4).toFixed(1)}" text-anchor="end">${axis.labels[i]}</text>`);
  });
  for (const v of eventTicks(page.view[0], page.view[1])) {
    const x = xOf(v).toFixed(1);
    parts.push(`<line x1="${x}" x2="${x}" y1="${TOP + PLOT_H}" y2="${TOP + PLOT_H + 4}" stroke="#444"/>`);
    parts.push(`<text class="tick x" x="${x}" y="${TOP + PLOT_H + 16}" text-anchor="middle">${v.toLocaleString('en-US')}</text>`);
  }
  parts.push(`<text x="${LEFT + PLOT_W}" y="${PANEL_H - 6}" text-anchor="end">trace event (of ${run.events.toLocaleString('en-US')})</text>`);
  parts.push(`<line x1="${LEFT}" x2="${LEFT}" y1="${TOP}" y2="${TOP + PLOT_H}" stroke="#444"/>`);
  parts.push(`<line x1="${LEFT}" x2="${LEFT + PLOT_W}" y1="${TOP + PLOT_H}" y2="${TOP + PLOT_H}" stroke="#444"/>`);
  if (run.stopped !== null && run.stopped < page.view[1]) {  // greyed: the job would have ended
    const x = Math.max(LEFT, xOf(run.stopped + 1));
    parts.push(`<rect class="stopped" x="${x}" y="${TOP}" width="${LEFT + PLOT_W - x}" height="${PLOT_H}" fill="#f4f4f4"/>`);
  }
  if (run.limit > 0 && run.limit <= axis.top) {
    const y = yOf(run.limit).toFixed(1);
    parts.push(`<line class="limit" x1="${LEFT}" x2="${LEFT + PLOT_W}" y1="${y}" y2="${y}" stroke="#c00" stroke-dasharray="6 4"/>`);
    parts.push(`<text x="${LEFT + PLOT_W - 4}" y="${y - 4}" text-anchor="end" fill="#c00">limit ${run.limit_text}</text>`);
  } else if (run.limit > 0) {
    parts.push(`<text class="limit-above" x="${LEFT + PLOT_W - 4}" y="${TOP - 4}" text-anchor="end" fill="#c00">&#8593; limit ${run.limit_text} (above the axis)</text>`);
  }
  parts.push(`<clipPath id="plot${run.index}"><rect x="${LEFT}" y="${TOP - 1}" width="${PLOT_W}" height="${PLOT_H + 2}"/></clipPath>`);
  parts.push(`<g clip-path="url(#plot${run.index})">`);
  for (const [name, color, q] of SERIES) {
    let band = '', line = '';
    if (singleEvents) {  // steps: each event's value from its x to the next event's
      for (const c of columns) {
        const x0 = xOf(c.first).toFixed(1), x1 = xOf(c.first + 1).toFixed(1), y = yOf(c.max[q]).toFixed(1);
        line += (line ? 'L' : 'M') + x0 + ',' + y + 'L' + x1 + ',' + y;
      }
    } else {
      for (const c of columns) {
        const x = LEFT + c.x + 0.5;
        line += (line ? 'L' : 'M') + x + ',' + yOf(c.max[q]).toFixed(1);
        if (c.min[q] !== c.max[q]) band += `M${x},${yOf(c.min[q]).toFixed(1)}V${yOf(c.max[q]).toFixed(1)}`;
      }
    }
    if (band) parts.push(`<path class="band ${name}" d="${band}" stroke="${color}" stroke-opacity="0.35"/>`);
    parts.push(`<path class="series ${name}" d="${line}" fill="none" stroke="${color}" stroke-width="1.4"/>`);
  }
  if (singleEvents) {  // a dot on each alloc and free, so single events can be told apart
    const t = traceOf(run);
    for (const c of columns) {
      const a = t.action[c.first];
      if (a > 2) continue;
      parts.push(`<circle class="event" cx="${xOf(c.first).toFixed(1)}" cy="${yOf(c.max[ALLOCATED]).toFixed(1)}" r="2.5" fill="${a === 0 ? '#27ae60' : '#888'}"/>`);
    }
  }
  if (run.oom && run.oom.event >= page.view[0] && run.oom.event <= page.view[1]) {
    const x = xOf(run.oom.event + 0.5).toFixed(1);
    parts.push(`<line class="oom" x1="${x}" x2="${x}" y1="${TOP}" y2="${TOP + PLOT_H}" stroke="#c00" stroke-width="2"/>`);
    // Mid-height, away from the limit's label, on the side with room.
    const right = x < LEFT + PLOT_W / 2;
    parts.push(`<text class="oom-label" x="${right ? +x + 5 : x - 5}" y="${TOP + PLOT_H / 2}" text-anchor="${right ? 'start' : 'end'}" fill="#c00" stroke="white" stroke-width="3" paint-order="stroke">OOM: ${formatSize(run.oom.size)} at event ${run.oom.event}${run.stopped !== null ? ' (the replay stopped)' : ''}</text>`);
  }
  parts.push('</g>');
  for (const m of run.moments) {
    if (m.event < page.view[0] || m.event > page.view[1]) continue;
    const x = xOf(m.event + 0.5);
    const shown = run.shown === m;
    parts.push(`<path class="moment${shown ? ' shown' : ''}" data-event="${m.event}" d="M${x.toFixed(1)},${TOP + PLOT_H + 20}l-5,9h10z" fill="${shown ? '#111' : '#999'}"><title>segments after event ${m.event}${m.label ? ' (' + escapeText(m.label) + ')' : ''}</title></path>`);
  }
  if (page.selected !== null && page.selected >= page.view[0] && page.selected <= page.view[1]) {
    const x = xOf(page.selected + 0.5).toFixed(1);
    parts.push(`<line class="cursor" x1="${x}" x2="${x}" y1="${TOP}" y2="${TOP + PLOT_H}" stroke="#333" stroke-dasharray="3 3"/>`);
  }
  return parts.join('\n');
}

function draw() {
  const [a, b] = page.view;
  const singleEvents = (b - a) <= PLOT_W / 4 && page.events !== undefined;
  const columns = page.data.runs.map((run) => singleEvents ? eventsOf(run, a, b) : columnsOf(run, a, b));
  let largest = 0;
  columns.forEach((cols) => cols.forEach((c) => { largest = Math.max(largest, c.max[RESERVED]); }));
  // A limit within a quarter above the data is drawn; one far above is marked at the top.
  for (const run of page.data.runs) {
    if (run.limit > 0 && run.limit * 0.8 <= largest) largest = Math.max(largest, run.limit);
  }
  const axis = byteAxis(largest);
  page.axis = axis;
  page.data.runs.forEach((run, k) => {
    document.getElementById('panel' + k).innerHTML = drawPanel(run, columns[k], axis, singleEvents);
  });
  document.getElementById('view').textContent =
      `events ${Math.floor(a).toLocaleString('en-US')} to ${Math.ceil(b).toLocaleString('en-US')} of ${page.data.events.toLocaleString('en-US')}`;
  document.body.dataset.view = `${a},${b}`;
  listEvents();
}

// The events in view, each with its size, stream and allocation site, once few enough are.
function listEvents() {
  const box = document.getElementById('events');
  const [a, b] = page.view;
  const first = Math.max(0, Math.floor(a)), last = Math.min(page.data.events - 1, Math.ceil(b));
  if (last - first + 1 > LIST_EVENTS) {
    box.innerHTML = `<p class="hint">Zoom in to ${LIST_EVENTS} events or fewer to list them.</p>`;
    return;
  }
  if (!page.events) {
    box.innerHTML = '<p class="hint">Reading the events&hellip;</p>';
    return;
  }
  const seen = new Set(), parts = [];
  for (const run of page.data.runs) {
    if (seen.has(run.trace)) continue;
    seen.add(run.trace);
    const t = traceOf(run);
    const [allocated, , reserved] = seriesOf(run);
    if (page.data.runs.length > 1) parts.push(`<h3>${escapeText(run.title)}</h3>`);
    parts.push('<table class="events"><tr><th>event</th><th>action</th><th>size</th><th>stream</th><th>allocated after</th><th>reserved after</th><th>source</th></tr>');
    for (let i = first; i <= Math.min(last, t.events - 1); i++) {
      const site = t.site[i] ? escapeText(t.sites[t.site[i] - 1]) : '';
      parts.push(`<tr data-event="${i}"${page.selected === i ? ' class="selected"' : ''}><td>${i}</td><td>${t.actions[t.action[i]]}</td>` +
                 `<td>${formatSize(t.size[i])}</td><td>${t.streams[t.stream[i]]}</td>` +
                 `<td>${formatSize(allocated[i])}</td><td>${formatSize(reserved[i])}</td><td>${site}</td></tr>`);
    }
    parts.push('</table>');
  }
  box.innerHTML = parts.join('');
  const selected = box.querySelector('tr.selected');
  if (selected) box.scrollTop = selected.offsetTop - box.clientHeight / 2;
}

function showStack(run, event) {
  const t = traceOf(run);
  const box = document.getElementById('stack');
  if (!t) return;  // shown once the events are read
  const place = t.site[event];
  if (!place) {
    box.innerHTML = `<p class="hint">Event ${event}: no stack recorded.</p>`;
    return;
  }
  const frames = t.stacks.length ? t.stacks[place - 1].map((f) => escapeText(t.frames[f])) : [];
  box.innerHTML = `<h3>Event ${event}: ${t.actions[t.action[event]]} of ${formatSize(t.size[event])}</h3>` +
      (frames.length ? '<ol class="frames"><li>' + frames.join('</li><li>') + '</li></ol>'
                     : `<p>${escapeText(t.sites[place - 1])}</p>`);
}

// The segments and blocks after a moment's event: each segment a bar, each block a cell sized by
// its bytes, coloured by state; the largest free block outlined; at an OOM, the failed request.
function drawSegmentMap(run, moment) {
  const segments = moment.segments;
  let largestSegment = 1, reserved = 0, allocated = 0, pending = 0, cached = 0, split = 0;
  let largestFree = null;
  for (const [address, size, , , , , blocks] of segments) {
    largestSegment = Math.max(largestSegment, size);
    reserved += size;
    let offset = 0;
    const whole = blocks.length === 1;
    for (const [bytes, state] of blocks) {
      if (state === 1) allocated += bytes;
      else if (state === 2) pending += bytes;
      else if (whole) cached += bytes;
      else split += bytes;
      if (state === 0 && (!largestFree || bytes > largestFree.bytes)) largestFree = {address: address + offset, bytes};
      offset += bytes;
    }
  }
  const oom = run.oom && run.oom.event === moment.event ? run.oom : null;
  // Segments in address order, laid out left to right and wrapped into rows, on one scale of
  // bytes to pixels that fits the largest segment (or the failed request) in a row.
  const width = PLOT_W + LEFT, rowH = 16, gap = 3;
  const scale = width / Math.max(largestSegment, oom ? oom.size : 0);
  const rows = [];
  let x = 0, y = 0;
  if (oom) {  // its size on the segments' scale, above them
    const w = Math.max(2, oom.size * scale);
    rows.push(`<text x="1" y="11" fill="#c00">the request that failed: ${formatSize(oom.size)}</text>` +
              `<rect class="failed-request" x="1" y="15" width="${(w - 2).toFixed(2)}" height="${rowH - 4}" fill="none" stroke="#c00" stroke-width="2" stroke-dasharray="4 2"/>`);
    y += 15 + rowH + 6;
  }
  for (const [address, size, stream, small, expandable, pool, blocks] of segments) {
    const segmentW = Math.max(1, size * scale);
    if (x > 0 && x + segmentW > width) {
      x = 0;
      y += rowH;
    }
    const cells = [];
    const whole = blocks.length === 1;
    let cx = x, offset = 0;
    for (const [bytes, state, requested] of blocks) {
      const w = bytes * scale;
      const kind = state === 1 ? 'allocated' : state === 2 ? 'pending' : whole ? 'cached' : 'split';
      const largest = largestFree && largestFree.address === address + offset;
      cells.push(`<rect class="block ${kind}${largest ? ' largest-free' : ''}" data-bytes="${bytes}" x="${cx.toFixed(2)}" y="${y}" width="${Math.max(0.5, w).toFixed(2)}" height="${rowH - 4}">` +
                 `<title>${kind === 'split' ? 'inactive split (free)' : kind === 'cached' ? 'cached free' : kind === 'pending' ? 'freed, stream uses outstanding' : 'allocated'} ${formatSize(bytes)}` +
                 `${state ? ' (requested ' + formatSize(requested) + ')' : ''} at 0x${(address + offset).toString(16)}</title></rect>`);
      cx += w;
      offset += bytes;
    }
    const free = blocks.filter(([, state]) => state === 0).reduce((sum, [bytes]) => sum + bytes, 0);
    const what = `segment at 0x${address.toString(16)}: ${formatSize(size)}${small ? ' (small pool)' : ''}${expandable ? ' expandable' : ''}` +
                 `${pool !== '0,0' ? ', private pool ' + pool : ''}, stream ${stream}, ${blocks.length} blocks, ${Math.round(100 * free / size)}% free`;
    rows.push(`<g class="segment" data-address="${address}" data-bytes="${size}"><title>${what}</title>${cells.join('')}` +
              `<rect x="${x.toFixed(2)}" y="${y}" width="${segmentW.toFixed(2)}" height="${rowH - 4}" fill="none" stroke="#555" stroke-width="0.6"/></g>`);
    x += segmentW + gap;
  }
  y += rowH;
  const head = `<h3>${escapeText(run.title)}: segments after event ${moment.event.toLocaleString('en-US')}${moment.label ? ' (' + escapeText(moment.label) + ')' : ''}</h3>` +
      `<p class="figures">reserved ${formatSize(reserved)} in ${segments.length} segment${segments.length === 1 ? "" : "s"} · allocated ${formatSize(allocated)}` +
      (pending ? ` · freed with stream uses outstanding ${formatSize(pending)}` : '') +
      ` · cached free (whole segments) ${formatSize(cached)} · inactive split (free in used segments) ${formatSize(split)}` +
      ` · largest free block ${largestFree ? formatSize(largestFree.bytes) : 'none'}</p>` +
      (oom ? `<p class="oom-note">OOM: ${formatSize(oom.size)} could not be allocated; the largest free block is ${largestFree ? formatSize(largestFree.bytes) : 'none'}.</p>` : '');
  return head + `<div class="segmap-box"><svg class="segmap" width="${width}" height="${y}" font-family="sans-serif" font-size="11">${rows.join('')}</svg></div>`;
}

function nearestMoment(run, event) {
  let best = null;
  for (const m of run.moments) {
    if (!best || Math.abs(m.event - event) < Math.abs(best.event - event)) best = m;
  }
  return best;
}

function select(event, exactMoment) {
  page.selected = event;
  const parts = [];
  for (const run of page.data.runs) {
    const m = exactMoment && run.moments.find((x) => x.event === event) || nearestMoment(run, event);
    run.shown = m;
    if (m) parts.push(drawSegmentMap(run, m));
  }
  document.getElementById('segmap').innerHTML = parts.length
      ? '<p class="hint">Segment maps are kept for the moments marked &#9650; under the axis (the nearest to the event clicked is shown); <code>--timeline-at</code> keeps more.</p>' +
        '<p class="legend"><span class="allocated"></span>allocated <span class="pending"></span>freed, stream uses outstanding <span class="cached"></span>cached free <span class="split"></span>inactive split <span class="largest"></span>largest free block</p>' +
        parts.join('')
      : '';
  showStack(page.data.runs[0], Math.max(0, Math.min(page.data.runs[0].events - 1, event)));
  draw();
}

function setView(a, b) {
  const total = page.data.events;
  const span = Math.min(total, Math.max(MIN_SPAN, b - a));
  a = Math.max(0, Math.min(total - span, a));
  page.view = [a, a + span];
  draw();
}

function zoom(factor, around) {
  const [a, b] = page.view;
  setView(around - (around - a) * factor, around + (b - around) * factor);
}

function plotX(ev, panel) {
  const box = panel.getBoundingClientRect();
  return (ev.clientX - box.left) * W / box.width;
}

function hover(ev, panel, run) {
  const tip = document.getElementById('tip');
  const x = plotX(ev, panel);
  if (x < LEFT || x > LEFT + PLOT_W) {
    tip.style.display = 'none';
    return;
  }
  const event = Math.floor(eventAt(x));
  let text;
  if (run.stopped !== null && event > run.stopped) {
    text = `<b>event ${event}</b><br>the replay stopped at the OOM at event ${run.stopped}:<br>the job would have ended there`;
  } else if (page.view[1] - page.view[0] <= PLOT_W * 64 && page.events) {
    const [allocated, active, reserved] = seriesOf(run).map((s) => s[Math.max(0, Math.min(run.events - 1, event))]);
    text = `<b>event ${event}</b><br>reserved ${formatSize(reserved)}<br>active ${formatSize(active)}<br>` +
           `allocated ${formatSize(allocated)}<br>reserved − allocated ${formatSize(reserved - allocated)}`;
  } else {
    const c = columnsOf(run, page.view[0], page.view[1])[Math.floor(x - LEFT)];
    if (!c) return;
    text = `<b>events ${c.first}–${c.last}</b><br>reserved ${formatSize(c.min[RESERVED])} – ${formatSize(c.max[RESERVED])}<br>` +
           `allocated ${formatSize(c.min[ALLOCATED])} – ${formatSize(c.max[ALLOCATED])}<br>zoom in for single events`;
  }
  tip.innerHTML = text;
  tip.style.left = (ev.pageX + 14) + 'px';
  tip.style.top = (ev.pageY + 14) + 'px';
  tip.style.display = 'block';
}

function wire(panel, run) {
  panel.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const x = plotX(ev, panel);
    // In proportion to the turn: a mouse wheel's notch (120 pixels) zooms 1.5 times, a touchpad's
    // small steps a little each; lines and pages (deltaMode 1, 2) as pixels.
    const pixels = ev.deltaY * (ev.deltaMode === 1 ? 40 : ev.deltaMode === 2 ? 800 : 1);
    zoom(Math.pow(1.0034, Math.max(-600, Math.min(600, pixels))),
         eventAt(Math.max(LEFT, Math.min(LEFT + PLOT_W, x))));
  }, {passive: false});
  panel.addEventListener('mousedown', (ev) => {
    page.dragging = {x: plotX(ev, panel), view: page.view.slice(), moved: false};
    ev.preventDefault();
  });
  panel.addEventListener('mousemove', (ev) => {
    const d = page.dragging;
    if (d) {
      const dx = plotX(ev, panel) - d.x;
      if (Math.abs(dx) > 3) d.moved = true;
      if (d.moved) {
        const perPixel = (d.view[1] - d.view[0]) / PLOT_W;
        setView(d.view[0] - dx * perPixel, d.view[1] - dx * perPixel);
      }
    }
    hover(ev, panel, run);
  });
  panel.addEventListener('mouseleave', () => { document.getElementById('tip').style.display = 'none'; });
  panel.addEventListener('mouseup', (ev) => {
    const d = page.dragging;
    page.dragging = null;
    if (!d || d.moved) return;
    const marker = ev.target.closest && ev.target.closest('.moment');
    if (marker) return select(+marker.dataset.event, true);
    const x = plotX(ev, panel);
    if (x >= LEFT && x <= LEFT + PLOT_W) select(Math.floor(eventAt(x)), false);
  });
  panel.addEventListener('dblclick', () => setView(0, page.data.events));
}

async function main() {
  try {
    page.data = await loadSummary();
  } catch (e) {
    document.getElementById('status').textContent = 'This page could not read its data: ' + e;
    return;
  }
  document.getElementById('status').remove();
  const panels = document.getElementById('panels');
  page.data.runs.forEach((run, k) => {
    const heading = document.createElement('div');
    heading.className = 'panel-title';
    heading.textContent = run.title;
    panels.appendChild(heading);
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('id', 'panel' + k);
    svg.setAttribute('class', 'panel');
    svg.setAttribute('viewBox', `0 0 ${W} ${PANEL_H}`);
    svg.setAttribute('width', W);
    svg.setAttribute('height', PANEL_H);
    panels.appendChild(svg);
    wire(svg, run);
  });
  const jumps = document.getElementById('jumps');
  const labelled = new Map();  // "event label" -> [event, label, panels]
  page.data.runs.forEach((run, k) => {
    for (const m of run.moments) {
      if (!m.label) continue;
      const key = m.event + ' ' + m.label;
      if (!labelled.has(key)) labelled.set(key, [m.event, m.label, []]);
      labelled.get(key)[2].push(k + 1);
    }
  });
  for (const [event, label, panelsOf] of [...labelled.values()].sort((x, y) => x[0] - y[0])) {
    const button = document.createElement('button');
    const which = page.data.runs.length > 1 && panelsOf.length < page.data.runs.length
        ? ' in panel ' + panelsOf.join(', ') : '';
    button.textContent = `${label}${which} (event ${event.toLocaleString('en-US')})`;
    button.addEventListener('click', () => {
      setView(event - 100, event + 100);
      select(event, true);
    });
    jumps.appendChild(button);
  }
  document.getElementById('whole').addEventListener('click', () => setView(0, page.data.events));
  document.getElementById('events').addEventListener('click', (ev) => {
    const row = ev.target.closest('tr[data-event]');
    if (row) select(+row.dataset.event, false);
  });
  page.view = [0, page.data.events];
  const first = page.data.runs[0].moments.find((m) => m.label) || page.data.runs[0].moments[0];
  if (first) select(first.event, true);
  else draw();
  document.body.dataset.ready = '1';
  // After the first picture is painted.
  setTimeout(() => loadEvents().catch((e) => {
    document.getElementById('events').textContent = 'This page could not read its events: ' + e;
  }), 0);
}

main();
