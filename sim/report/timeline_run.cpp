#include "sim/report/timeline_run.hpp"

#include <algorithm>

namespace allocsim {

uint64_t timeline_events(const std::vector<TimelineRun>& runs) {
  uint64_t max_events = 1;
  for (const TimelineRun& run : runs)
    max_events = std::max(max_events, run.result->outcome.events_total);
  return max_events;
}

TimelineScale timeline_scale(const std::vector<TimelineRun>& runs) {
  TimelineScale scale;
  for (const TimelineRun& run : runs) {
    for (const TimelinePoint& p : run.result->recording.timeline)
      scale.data_max =
          std::max(scale.data_max, static_cast<uint64_t>(std::max<int64_t>(0, p.reserved)));
  }
  uint64_t largest = scale.data_max;
  for (const TimelineRun& run : runs) {
    const uint64_t limit = run.result->setup.limit_bytes;
    if (limit > 0 && limit / 5 * 4 <= scale.data_max) largest = std::max(largest, limit);
  }
  scale.axis = byte_axis(largest);
  return scale;
}

}  // namespace allocsim
