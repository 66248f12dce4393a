// The timeline as a self-contained HTML page, the viewer for snapshots of any length: each run's
// allocated, active and reserved memory on an axis scaled to the data, zoom (wheel) and pan
// (drag) down to single events, which are then listed with their size, stream and source line,
// a cursor linked across the panels, and the segments and blocks at the replay's kept moments.
// The data (timeline_page_data.hpp) is embedded: no network, no libraries, one file to open or
// attach to a bug.
#pragma once

#include <string>
#include <vector>

#include "sim/report/timeline_run.hpp"

namespace allocsim {

std::string timeline_html(const std::vector<TimelineRun>& runs);

}  // namespace allocsim
