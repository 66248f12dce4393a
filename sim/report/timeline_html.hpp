// The timeline as a self-contained HTML page: the same picture as timeline_svg, with a cursor that
// reads allocated, active and reserved memory (and the gap between reserved and allocated) at any
// trace event of any panel. No network, no libraries: one file to open or attach to a bug.
#pragma once

#include <string>
#include <vector>

#include "sim/report/timeline_svg.hpp"

namespace allocsim {

std::string timeline_html(const std::vector<TimelineRun>& runs);

}  // namespace allocsim
