// Two recordings' requests matched one to one: the request list of a recording (the blocks alive
// at its first event, then its allocs and frees) and a shortest edit script between two
// sequences. Predict aligns recordings at several sizes by them; diff aligns two runs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "sim/trace/trace.hpp"

namespace allocsim {

struct RecordedRequest {
  TraceAction action;
  StreamId stream;
  uint64_t addr;
  uint64_t size;
  int64_t alloc;              // a free: the index of its allocation, -1 if none was seen
  int64_t event;              // the trace's event index, -1 for a block alive at the start
  uint32_t stack = kNoStack;  // an allocation's (the trace's stacks)
};

// A recording's requests: the blocks alive at its first event (allocated first, by address),
// then its alloc and free events.
std::vector<RecordedRequest> recorded_requests(const Trace& trace);

// The most items two sequences may differ by (inserted in one, or in the other) for
// shortest_edit_match to find their script.
inline constexpr int kMaxEdits = 2048;

// A shortest edit script (Myers' diff) between sequences of n and m items, `same(x, y)` saying
// whether item x of the first may be item y of the second: for each item of the first, its match
// in the second or -1; nullopt when they differ by more than `max_edits` items.
std::optional<std::vector<int64_t>> shortest_edit_match(
    int64_t n, int64_t m, const std::function<bool(int64_t, int64_t)>& same,
    int max_edits = kMaxEdits);

}  // namespace allocsim
