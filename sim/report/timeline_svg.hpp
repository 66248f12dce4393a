// A picture of a replay: allocated, active and reserved memory over the trace, with the OOM and
// the largest reserved-but-unallocated gap marked; several runs (settings) stacked on one scale.
#pragma once

#include <string>
#include <vector>

#include "sim/report/timeline_run.hpp"

namespace allocsim {

// A self-contained SVG document.
std::string timeline_svg(const std::vector<TimelineRun>& runs);

// Where the picture puts things: panels of kPanelHeight stacked from the top, each plotting trace
// events from x = kLeft to kWidth - kRight.
struct TimelineLayout {
  static constexpr double kWidth = 960, kPanelHeight = 280, kLeft = 80, kRight = 20, kTop = 56,
                          kBottom = 40;
  static constexpr size_t kMaxPoints = 1500;  // per series; each keeps the largest of its bucket
};

}  // namespace allocsim
