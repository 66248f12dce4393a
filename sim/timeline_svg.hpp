// A picture of a replay: allocated, active and reserved memory over the trace, with the OOM and
// the largest reserved-but-unallocated gap marked; several runs (settings) stacked on one scale.
#pragma once

#include <string>
#include <vector>

#include "sim/replay.hpp"

namespace allocsim {

struct TimelineRun {
  std::string title;
  const ReplayResult* result;  // replayed with record_timeline
};

// A self-contained SVG document.
std::string timeline_svg(const std::vector<TimelineRun>& runs);

}  // namespace allocsim
