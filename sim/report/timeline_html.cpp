#include "sim/report/timeline_html.hpp"

#include "sim/report/escape_markup.hpp"
#include "sim/report/timeline_page_data.hpp"
#include "sim/report/timeline_page_script.hpp"
#include "sim/report/timeline_svg.hpp"

namespace allocsim {
namespace {

constexpr const char* kStyle = R"CSS(
body { margin: 16px; font-family: sans-serif; font-size: 13px; color: #222; }
.panel-title { font-weight: bold; font-size: 14px; margin: 10px 0 0 80px; }
svg.panel { display: block; max-width: 100%; height: auto; cursor: crosshair; user-select: none; }
#controls button { margin: 0 6px 6px 0; }
#view { color: #555; margin-left: 8px; }
.hint { color: #666; }
#tip { position: absolute; display: none; background: #fff; border: 1px solid #888;
       padding: 6px 8px; font-size: 12px; line-height: 1.4; pointer-events: none;
       box-shadow: 2px 2px 6px rgba(0,0,0,.2); }
.moment { cursor: pointer; }
#events { max-height: 360px; overflow-y: auto; margin-top: 8px; }
table.events { border-collapse: collapse; font-size: 12px; }
table.events td, table.events th { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: left; }
table.events tr[data-event] { cursor: pointer; }
table.events tr.selected { background: #fff3c4; }
#segmap { max-width: 960px; }
svg.segmap { display: block; }
.segmap-box { max-height: 520px; overflow-y: auto; border: 1px solid #eee; padding: 4px; }
.block.allocated, .legend .allocated { fill: #27ae60; background: #27ae60; }
.block.pending, .legend .pending { fill: #f1c40f; background: #f1c40f; }
.block.cached, .legend .cached { fill: #c8ccd0; background: #c8ccd0; }
.block.split, .legend .split { fill: #e74c3c; background: #e74c3c; }
.block.largest-free { stroke: #000; stroke-width: 2; }
.legend span { display: inline-block; width: 12px; height: 10px; margin: 0 4px 0 12px; }
.legend .largest { border: 2px solid #000; width: 8px; height: 6px; }
.oom-note { color: #c00; font-weight: bold; }
ol.frames { font-family: monospace; font-size: 12px; }
)CSS";

}  // namespace

std::string timeline_html(const std::vector<TimelineRun>& runs) {
  const std::string title = escape_markup(runs.empty() ? "allocsim timeline" : runs.front().title);
  const TimelinePageData data = timeline_page_data(runs);
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + title +
         "</title>\n<style>" + kStyle +
         "</style>\n</head>\n<body>\n"
         "<div id=\"controls\"><button id=\"whole\">whole run</button><span id=\"jumps\"></span>"
         "<span id=\"view\"></span></div>\n"
         "<p class=\"hint\">Wheel: zoom. Drag: pan. Double-click: the whole run. Click: the cursor "
         "in every panel, and the segments at the nearest kept moment.</p>\n"
         "<p id=\"status\">Reading the replay's data (this needs a browser with "
         "DecompressionStream: Chrome 80, Firefox 113, Safari 16.4 or later)&hellip;</p>\n"
         "<div id=\"panels\"></div>\n<div id=\"segmap\"></div>\n<div id=\"events\"></div>\n"
         "<div id=\"stack\"></div>\n<div id=\"tip\"></div>\n"
         "<script id=\"timeline-summary\" type=\"application/octet-stream\">\n" +
         data.summary +
         "\n</script>\n<script id=\"timeline-events\" type=\"application/octet-stream\">\n" +
         data.events + "\n</script>\n<script>\n" + kTimelinePageScript +
         "</script>\n</body>\n</html>\n";
}

}  // namespace allocsim
