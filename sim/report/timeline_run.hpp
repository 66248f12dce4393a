// One panel of a timeline: a replay of a trace under one setting, on one device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/replay/replay.hpp"
#include "sim/report/axis_ticks.hpp"
#include "sim/report/timeline_moments.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

struct TimelineRun {
  std::string title;
  const ReplayResult* result;    // replayed with record_timeline (and segment_maps_at its moments)
  const Trace* trace = nullptr;  // the replayed trace: the page lists its events
  std::vector<TimelineMoment> moments;  // the segment maps the page shows, from result
};

// The events the x axis spans: the longest run's.
uint64_t timeline_events(const std::vector<TimelineRun>& runs);

// The byte axis the panels share: up to the largest reserved memory of any run, and up to a
// run's limit as well where the limit is within a quarter above that; a limit far above the data
// is marked with its value instead, so that a run far below its card does not draw as a flat
// line along the bottom.
struct TimelineScale {
  uint64_t data_max = 0;
  ByteAxis axis;
};
TimelineScale timeline_scale(const std::vector<TimelineRun>& runs);
inline bool limit_in_view(const TimelineScale& scale, uint64_t limit) {
  return limit <= scale.axis.top;
}

}  // namespace allocsim
