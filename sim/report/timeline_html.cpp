#include "sim/report/timeline_html.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace allocsim {
namespace {

// The page's script reads the picture's geometry and, per panel, each bucket's largest values,
// bucketed as the picture draws them.
nlohmann::json page_data(const std::vector<TimelineRun>& runs) {
  nlohmann::json out = {{"width", TimelineLayout::kWidth}, {"panel", TimelineLayout::kPanelHeight},
                        {"left", TimelineLayout::kLeft},   {"right", TimelineLayout::kRight},
                        {"events", timeline_events(runs)}, {"runs", nlohmann::json::array()}};
  for (const TimelineRun& run : runs) {
    const auto& pts = run.result->recording.timeline;
    const size_t bucket = std::max<size_t>(1, pts.size() / TimelineLayout::kMaxPoints);
    nlohmann::json points = nlohmann::json::array();
    for (size_t i = 0; i < pts.size(); i += bucket) {
      int64_t allocated = 0, active = 0, reserved = 0;
      for (size_t j = i; j < std::min(pts.size(), i + bucket); ++j) {
        allocated = std::max(allocated, pts[j].allocated);
        active = std::max(active, pts[j].active);
        reserved = std::max(reserved, pts[j].reserved);
      }
      points.push_back({pts[i].event_index, allocated, active, reserved});
    }
    nlohmann::json stopped = nullptr;  // where a replay that stopped at an OOM ended
    if (run.result->outcome.stopped_at_oom && run.result->outcome.oom)
      stopped = run.result->outcome.oom->event_index;
    out["runs"].push_back(
        {{"title", run.title}, {"points", std::move(points)}, {"stopped", stopped}});
  }
  return out;
}

constexpr const char* kScript = R"JS(
const svg = document.querySelector('svg');
const tip = document.getElementById('tip');
const cursor = document.createElementNS('http://www.w3.org/2000/svg', 'line');
cursor.setAttribute('stroke', '#555');
cursor.setAttribute('stroke-dasharray', '3 3');
cursor.style.display = 'none';
svg.appendChild(cursor);
function size(b) {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(b) >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(2) : b) + ' ' + units[i];
}
function hide() { tip.style.display = 'none'; cursor.style.display = 'none'; }
svg.addEventListener('mouseleave', hide);
svg.addEventListener('mousemove', (ev) => {
  const box = svg.getBoundingClientRect();
  const scale = box.width / data.width;
  const x = (ev.clientX - box.left) / scale, y = (ev.clientY - box.top) / scale;
  const k = Math.floor(y / data.panel);
  const plot = data.width - data.left - data.right;
  const event = (x - data.left) / plot * data.events;
  if (k < 0 || k >= data.runs.length || event < 0 || event > data.events) return hide();
  const p = data.runs[k].points;
  let lo = 0, hi = p.length - 1;
  if (hi < 0) return hide();
  while (lo < hi) {  // the last bucket starting at or before the cursor
    const mid = (lo + hi + 1) >> 1;
    if (p[mid][0] <= event) lo = mid; else hi = mid - 1;
  }
  const [e, allocated, active, reserved] = p[lo];
  const stopped = data.runs[k].stopped;
  const cx = data.left + plot * (stopped !== null && event > stopped ? event : e) / data.events;
  cursor.setAttribute('x1', cx); cursor.setAttribute('x2', cx);
  cursor.setAttribute('y1', k * data.panel + 50); cursor.setAttribute('y2', (k + 1) * data.panel - 40);
  cursor.style.display = '';
  if (stopped !== null && event > stopped) {
    tip.innerHTML = '<b>event ' + Math.round(event) + '</b><br>the replay stopped at the OOM at ' +
        'event ' + stopped + ':<br>the job would have ended there';
  } else {
    tip.innerHTML = '<b>event ' + e + '</b><br>reserved ' + size(reserved) + '<br>active ' +
        size(active) + '<br>allocated ' + size(allocated) + '<br>reserved − allocated ' +
        size(reserved - allocated);
  }
  tip.style.left = (ev.pageX + 14) + 'px';
  tip.style.top = (ev.pageY + 14) + 'px';
  tip.style.display = 'block';
});
)JS";

}  // namespace

std::string timeline_html(const std::vector<TimelineRun>& runs) {
  std::string data = page_data(runs).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Inside <script>, "</" could end the element early (a title holding "</script>").
  for (size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3))
    data.replace(at, 2, "<\\/");
  const std::string title = escape_markup(runs.empty() ? "allocsim timeline" : runs.front().title);
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + title +
         "</title>\n<style>\nbody { margin: 16px; font-family: sans-serif; }\n"
         "svg { max-width: 100%; height: auto; cursor: crosshair; }\n"
         "#tip { position: absolute; display: none; background: #fff; border: 1px solid #888; "
         "padding: 6px 8px; font-size: 12px; line-height: 1.4; pointer-events: none; "
         "box-shadow: 2px 2px 6px rgba(0,0,0,.2); }\n"
         "</style>\n</head>\n<body>\n" +
         timeline_svg(runs) + "<div id=\"tip\"></div>\n<script>\nconst data = " + data + ";" +
         kScript + "</script>\n</body>\n</html>\n";
}

}  // namespace allocsim
