// Where a replay at the recorded settings stops doing what the recorded run did: its segment
// operations (cudaMalloc / cudaFree / map / unmap) against the trace's segment_* events. Past that
// point the replay's figures are not the real run's, and a report must say so rather than
// present them as a reproduction (a cap or capacity unlike the recording's, or allocator behaviour
// allocsim does not model, such as a private pool inferred wrongly).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

struct RecordingDeparture {
  enum Kind { kSegmentOperation, kOom, kAddress };
  Kind kind = kSegmentOperation;
  // The segment operations replayed alike before it: for kSegmentOperation, the first that differs.
  uint64_t op_index = 0;
  std::optional<uint64_t> event_index;  // the recorded one's trace event, if it has one
  std::string recorded;  // "segment_alloc of 20971520 bytes on stream 0", "an OOM", or "none"
  std::string replayed;
  // Why, where the trace itself cannot tell the replay what it needed; empty where unknown.
  std::string cause;
};

// The first place where a replay at the recorded settings does what the recorded run did not:
// a segment operation unlike the recorded one, a recorded OOM whose request the replay served, or
// (in a trace with OOMs of its own) an OOM of the replay's where the run was served, whichever
// comes first; failing those, the first block placed elsewhere than the run placed it (the
// segments alike, the blocks in them not). Nothing for a what-if (other settings than the
// recorded), a trace without OOMs where the replay met one (the answer to a smaller device or cap,
// reported as such), or a trace that records no segment operations (an RMM log).
[[nodiscard]] std::optional<RecordingDeparture> recording_departure(const Trace& trace,
                                                                    const ReplayResult& result);

// The warning line for it.
std::string departure_warning(const Trace& trace, const RecordingDeparture& departure);

}  // namespace allocsim
