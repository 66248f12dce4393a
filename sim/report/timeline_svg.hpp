// A picture of a replay: allocated, active and reserved memory over the trace, with the OOM and
// the largest reserved-but-unallocated gap marked; several runs (settings) stacked on one scale.
#pragma once

#include <string>
#include <vector>

#include "sim/replay/replay.hpp"

namespace allocsim {

struct TimelineRun {
  std::string title;
  const ReplayResult* result;  // replayed with record_timeline
};

// Text made safe inside SVG/HTML elements and attribute values (& < > ").
std::string escape_markup(const std::string& text);

// A self-contained SVG document.
std::string timeline_svg(const std::vector<TimelineRun>& runs);

// Where the picture puts things, for a page that draws a cursor over it: panels of kPanelHeight
// stacked from the top, each plotting trace events from x = kLeft to kWidth - kRight.
struct TimelineLayout {
  static constexpr double kWidth = 960, kPanelHeight = 280, kLeft = 80, kRight = 20, kTop = 56,
                          kBottom = 40;
  static constexpr size_t kMaxPoints = 1500;  // per series; each keeps the largest of its bucket
};
// The events the x axis spans: the longest run's.
uint64_t timeline_events(const std::vector<TimelineRun>& runs);

}  // namespace allocsim
