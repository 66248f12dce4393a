// The moments of a replay whose segment maps a timeline page shows: where allocated and reserved
// memory peaked, the OOM, evenly spaced events, and any the user asked for.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/replay/replay.hpp"

namespace allocsim {

struct TimelineMoment {
  uint64_t event_index;  // the state after this event
  std::string label;     // "peak allocated", "OOM", ... joined by ", "; empty for the others
};

// Ascending, one per event; none past the event where a replay stopped at an OOM. `result` was
// replayed with record_timeline.
std::vector<TimelineMoment> timeline_moments(const ReplayResult& result, size_t evenly_spaced,
                                             std::span<const uint64_t> asked);

// Their event indices, for ReplayOptions::segment_maps_at.
std::vector<uint64_t> moment_events(std::span<const TimelineMoment> moments);

}  // namespace allocsim
