#include "sim/report/timeline_svg.hpp"

#include <algorithm>
#include <cstdio>

#include "core/format_size.hpp"

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

std::string escape_markup(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string timeline_svg(const std::vector<TimelineRun>& runs) {
  const uint64_t max_events = timeline_events(runs);
  const TimelineScale scale = timeline_scale(runs);
  const double top = static_cast<double>(scale.axis.top);

  const double plot_w = kWidth - kLeft - kRight, plot_h = kPanelHeight - kTop - kBottom;
  std::string svg;
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" +
         num(kPanelHeight * static_cast<double>(runs.size())) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (size_t k = 0; k < runs.size(); ++k) {
    const ReplayResult& r = *runs[k].result;
    const double y0 = kPanelHeight * static_cast<double>(k);
    auto x_of = [&](uint64_t event) {
      return kLeft + plot_w * static_cast<double>(event) / static_cast<double>(max_events);
    };
    auto y_of = [&](double bytes) { return y0 + kTop + plot_h * (1 - bytes / top); };
    svg += "<text x=\"" + num(kLeft) + "\" y=\"" + num(y0 + 20) +
           "\" font-size=\"14\" font-weight=\"bold\">" + escape_markup(runs[k].title) + "</text>\n";
    // Axes and grid.
    for (size_t t = 0; t < scale.axis.ticks.size(); ++t) {
      const double v = static_cast<double>(scale.axis.ticks[t]);
      svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + plot_w) + "\" y1=\"" +
             num(y_of(v)) + "\" y2=\"" + num(y_of(v)) + "\" stroke=\"#e4e4e4\"/>\n";
      svg += "<text class=\"tick\" x=\"" + num(kLeft - 6) + "\" y=\"" + num(y_of(v) + 4) +
             "\" text-anchor=\"end\">" + escape_markup(scale.axis.labels[t]) + "</text>\n";
    }
    svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft) + "\" y1=\"" + num(y0 + kTop) +
           "\" y2=\"" + num(y0 + kTop + plot_h) + "\" stroke=\"#444\"/>\n";
    svg += "<text x=\"" + num(kLeft + plot_w) + "\" y=\"" + num(y0 + kPanelHeight - 12) +
           "\" text-anchor=\"end\">trace event (of " + std::to_string(r.outcome.events_total) +
           ")</text>\n";
    // The limit: the cap, or the device less its context memory.
    if (r.setup.limit_bytes > 0 && !limit_in_view(scale, r.setup.limit_bytes)) {
      // Far above the data: an arrow at the top with its value.
      svg += "<text class=\"limit-above\" x=\"" + num(kLeft + plot_w - 4) + "\" y=\"" +
             num(y0 + kTop - 4) + "\" text-anchor=\"end\" fill=\"#c00\">&#8593; limit " +
             escape_markup(format_size(r.setup.limit_bytes)) + " (above the axis)</text>\n";
    } else if (r.setup.limit_bytes > 0) {
      svg += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kLeft + plot_w) + "\" y1=\"" +
             num(y_of(static_cast<double>(r.setup.limit_bytes))) + "\" y2=\"" +
             num(y_of(static_cast<double>(r.setup.limit_bytes))) +
             "\" stroke=\"#c00\" stroke-dasharray=\"6 4\"/>\n";
      svg += "<text x=\"" + num(kLeft + plot_w - 4) + "\" y=\"" +
             num(y_of(static_cast<double>(r.setup.limit_bytes)) - 4) +
             "\" text-anchor=\"end\" fill=\"#c00\">limit " +
             escape_markup(format_size(r.setup.limit_bytes)) + "</text>\n";
    }
    // The series, each bucket drawn at its largest value.
    const auto& pts = r.recording.timeline;
    const size_t bucket = std::max<size_t>(1, pts.size() / kMaxPoints);
    struct Series {
      const char* name;
      const char* color;
      int64_t TimelinePoint::*field;
    };
    const Series series[] = {{"reserved", "#e67e22", &TimelinePoint::reserved},
                             {"active", "#2e86c1", &TimelinePoint::active},
                             {"allocated", "#27ae60", &TimelinePoint::allocated}};
    for (const Series& s : series) {
      std::string path;
      for (size_t i = 0; i < pts.size(); i += bucket) {
        int64_t v = 0;
        for (size_t j = i; j < std::min(pts.size(), i + bucket); ++j)
          v = std::max(v, pts[j].*s.field);
        path += (path.empty() ? "M" : " L") + num(x_of(pts[i].event_index)) + "," +
                num(y_of(static_cast<double>(v)));
      }
      svg += "<path d=\"" + path + "\" fill=\"none\" stroke=\"" + s.color +
             "\" stroke-width=\"1.4\"/>\n";
    }
    double legend_x = kLeft;
    for (const Series& s : series) {
      svg += "<rect x=\"" + num(legend_x) + "\" y=\"" + num(y0 + 32) +
             "\" width=\"14\" height=\"4\" fill=\"" + s.color + "\"/><text x=\"" +
             num(legend_x + 18) + "\" y=\"" + num(y0 + 38) + "\">" + s.name + "</text>\n";
      legend_x += 90;
    }
    // The largest reserved-but-unallocated gap.
    const TimelinePoint* gap = nullptr;
    for (const TimelinePoint& p : pts) {
      if (!gap || p.reserved - p.allocated > gap->reserved - gap->allocated) gap = &p;
    }
    if (gap && gap->reserved > gap->allocated) {
      const double x = x_of(gap->event_index);
      svg += "<line x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" +
             num(y_of(static_cast<double>(gap->reserved))) + "\" y2=\"" +
             num(y_of(static_cast<double>(gap->allocated))) +
             "\" stroke=\"#8e44ad\" stroke-width=\"3\"/>\n";
      svg += "<text x=\"" + num(x + 5) + "\" y=\"" +
             num(y_of(static_cast<double>(gap->reserved)) - 6) +
             "\" fill=\"#8e44ad\">largest reserved-but-unallocated: " +
             escape_markup(format_size(static_cast<uint64_t>(gap->reserved - gap->allocated))) +
             "</text>\n";
    }
    if (r.outcome.oom) {
      const double x = x_of(r.outcome.oom->event_index);
      svg += "<line x1=\"" + num(x) + "\" x2=\"" + num(x) + "\" y1=\"" + num(y0 + kTop) +
             "\" y2=\"" + num(y0 + kTop + plot_h) + "\" stroke=\"#c00\" stroke-width=\"2\"/>\n";
      svg += "<text x=\"" + num(x - 5) + "\" y=\"" + num(y0 + kTop + 14) +
             "\" text-anchor=\"end\" fill=\"#c00\">OOM: " +
             escape_markup(format_size(r.outcome.oom->alloc_size)) + " at event " +
             std::to_string(r.outcome.oom->event_index) + "</text>\n";
    }
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace allocsim
