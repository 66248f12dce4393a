#include "sim/report/timeline_svg.hpp"

#include <algorithm>
#include <cstdio>

#include "core/format_size.hpp"
#include "sim/report/escape_markup.hpp"

namespace allocsim {
namespace {

constexpr double kWidth = TimelineLayout::kWidth, kPanelHeight = TimelineLayout::kPanelHeight,
                 kLeft = TimelineLayout::kLeft, kRight = TimelineLayout::kRight,
                 kTop = TimelineLayout::kTop, kBottom = TimelineLayout::kBottom;
constexpr size_t kMaxPoints = TimelineLayout::kMaxPoints;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

namespace {

// One run's panel: where an event and a byte count fall in it.
struct Panel {
  double y0;  // its top
  double plot_w, plot_h;
  double top;  // the byte axis' top
  uint64_t max_events;

  double x_of(uint64_t event) const {
    return kLeft + plot_w * static_cast<double>(event) / static_cast<double>(max_events);
  }
  double y_of(double bytes) const { return y0 + kTop + plot_h * (1 - bytes / top); }
};

struct Series {
  const char* name;
  const char* color;
  int64_t TimelinePoint::*field;
};
constexpr Series kSeries[] = {{"reserved", "#e67e22", &TimelinePoint::reserved},
                              {"active", "#2e86c1", &TimelinePoint::active},
                              {"allocated", "#27ae60", &TimelinePoint::allocated}};

// The title, the grid with its tick labels, the axis and its caption.
void panel_axes(std::string& svg, const Panel& p, const TimelineScale& scale,
                const std::string& title, uint64_t events_total) {
  svg += "<text x=\"" + num(kLeft) + "\" y=\"" + num(p.y0 + 20) +
         "\" font-size=\"14\" font-weight=\"bold\">" + escape_markup(title) + "</text>\n";
  for (size_t t = 0; t < scale.axis.ticks.size(); ++t) {
    const double v = static_cast<double>(scale.axis.ticks[t]);
    svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + p.plot_w) + "\" y1=\"" +
           num(p.y_of(v)) + "\" y2=\"" + num(p.y_of(v)) + "\" stroke=\"#e4e4e4\"/>\n";
    svg += "<text class=\"tick\" x=\"" + num(kLeft - 6) + "\" y=\"" + num(p.y_of(v) + 4) +
           "\" text-anchor=\"end\">" + escape_markup(scale.axis.labels[t]) + "</text>\n";
  }
  svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft) + "\" y1=\"" + num(p.y0 + kTop) +
         "\" y2=\"" + num(p.y0 + kTop + p.plot_h) + "\" stroke=\"#444\"/>\n";
  svg += "<text x=\"" + num(kLeft + p.plot_w) + "\" y=\"" + num(p.y0 + kPanelHeight - 12) +
         "\" text-anchor=\"end\">trace event (of " + std::to_string(events_total) + ")</text>\n";
}

// The limit: the cap, or the device less its context memory; far above the data, an arrow.
void panel_limit(std::string& svg, const Panel& p, const TimelineScale& scale, uint64_t limit) {
  if (limit == 0) return;
  if (!limit_in_view(scale, limit)) {
    svg += "<text class=\"limit-above\" x=\"" + num(kLeft + p.plot_w - 4) + "\" y=\"" +
           num(p.y0 + kTop - 4) + "\" text-anchor=\"end\" fill=\"#c00\">&#8593; limit " +
           escape_markup(format_size(limit)) + " (above the axis)</text>\n";
    return;
  }
  const double y = p.y_of(static_cast<double>(limit));
  svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + p.plot_w) + "\" y1=\"" + num(y) +
         "\" y2=\"" + num(y) + "\" stroke=\"#c00\" stroke-dasharray=\"6 4\"/>\n";
  svg += "<text x=\"" + num(kLeft + p.plot_w - 4) + "\" y=\"" + num(y - 4) +
         "\" text-anchor=\"end\" fill=\"#c00\">limit " + escape_markup(format_size(limit)) +
         "</text>\n";
}

// The series, each bucket drawn at its largest value, and their legend.
void panel_series(std::string& svg, const Panel& p, const std::vector<TimelinePoint>& pts) {
  const size_t bucket = std::max<size_t>(1, pts.size() / kMaxPoints);
  for (const Series& s : kSeries) {
    std::string path;
    for (size_t i = 0; i < pts.size(); i += bucket) {
      int64_t v = 0;
      for (size_t j = i; j < std::min(pts.size(), i + bucket); ++j)
        v = std::max(v, pts[j].*s.field);
      path += (path.empty() ? "M" : " L") + num(p.x_of(pts[i].event_index)) + "," +
              num(p.y_of(static_cast<double>(v)));
    }
    svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + s.color +
           "\" stroke-width=\"1.4\"/>\n";
  }
  double legend_x = kLeft;
  for (const Series& s : kSeries) {
    svg += "<rect x=\"" + num(legend_x) + "\" y=\"" + num(p.y0 + 32) +
           "\" width=\"14\" height=\"4\" fill=\"" + s.color + "\"/><text x=\"" +
           num(legend_x + 18) + "\" y=\"" + num(p.y0 + 38) + "\">" + s.name + "</text>\n";
    legend_x += 90;
  }
}

// The largest reserved-but-unallocated gap.
void panel_gap(std::string& svg, const Panel& p, const std::vector<TimelinePoint>& pts) {
  const TimelinePoint* gap = nullptr;
  for (const TimelinePoint& pt : pts) {
    if (!gap || pt.reserved - pt.allocated > gap->reserved - gap->allocated) gap = &pt;
  }
  if (!gap || gap->reserved <= gap->allocated) return;
  const double x = p.x_of(gap->event_index);
  svg += "<line x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" +
         num(p.y_of(static_cast<double>(gap->reserved))) + "\" y2=\"" +
         num(p.y_of(static_cast<double>(gap->allocated))) +
         "\" stroke=\"#8e44ad\" stroke-width=\"3\"/>\n";
  svg += "<text x=\"" + num(x + 5) + "\" y=\"" +
         num(p.y_of(static_cast<double>(gap->reserved)) - 6) +
         "\" fill=\"#8e44ad\">largest reserved-but-unallocated: " +
         escape_markup(format_size(static_cast<uint64_t>(gap->reserved - gap->allocated))) +
         "</text>\n";
}

void panel_oom(std::string& svg, const Panel& p, const ReplayOom& oom) {
  const double x = p.x_of(oom.event_index);
  svg += "<line x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" + num(p.y0 + kTop) + "\" y2=\"" +
         num(p.y0 + kTop + p.plot_h) + "\" stroke=\"#c00\" stroke-width=\"2\"/>\n";
  svg += "<text x=\"" + num(x - 5) + "\" y=\"" + num(p.y0 + kTop + 14) +
         "\" text-anchor=\"end\" fill=\"#c00\">OOM: " + escape_markup(format_size(oom.alloc_size)) +
         " at event " + std::to_string(oom.event_index) + "</text>\n";
}

}  // namespace

std::string timeline_svg(const std::vector<TimelineRun>& runs) {
  const TimelineScale scale = timeline_scale(runs);
  Panel panel{0, kWidth - kLeft - kRight, kPanelHeight - kTop - kBottom,
              static_cast<double>(scale.axis.top), timeline_events(runs)};
  std::string svg;
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" +
         num(kPanelHeight * static_cast<double>(runs.size())) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (size_t k = 0; k < runs.size(); ++k) {
    const ReplayResult& r = *runs[k].result;
    panel.y0 = kPanelHeight * static_cast<double>(k);
    panel_axes(svg, panel, scale, runs[k].title, r.outcome.events_total);
    panel_limit(svg, panel, scale, r.setup.limit_bytes);
    panel_series(svg, panel, r.recording.timeline);
    panel_gap(svg, panel, r.recording.timeline);
    if (r.outcome.oom) panel_oom(svg, panel, *r.outcome.oom);
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace allocsim
