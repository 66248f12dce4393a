// A replay's allocated, active and reserved memory after every trace event, and the same as
// minimum and maximum over ranges of events at several resolutions: what a timeline draws at any
// zoom without visiting every event.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/replay/replay.hpp"

namespace allocsim {

enum TimelineQuantity : size_t { kAllocated, kActive, kReserved, kQuantities };

struct TimelineSeries {
  // values[q][i]: quantity q after trace event i; an event with no request keeps the value
  // before it; before the first request, 0. As long as the trace (a replay stopped at an OOM
  // keeps its last values to the end).
  std::array<std::vector<int64_t>, kQuantities> values;
  uint64_t events() const { return values[0].size(); }
};

// From a replay with record_timeline.
TimelineSeries timeline_series(const ReplayResult& result);

// One resolution: bucket b covers events [b * width, (b + 1) * width).
struct TimelineLevel {
  uint64_t width = 0;
  std::array<std::vector<int64_t>, kQuantities> min, max;
  size_t buckets() const { return min[0].size(); }
};

// Levels of width base, base * fanout, base * fanout^2, ..., up to the one with a single bucket
// (none for a series of at most `base` events). base >= 1, fanout >= 2.
std::vector<TimelineLevel> timeline_levels(const TimelineSeries& series, uint64_t base,
                                           uint64_t fanout);

}  // namespace allocsim
