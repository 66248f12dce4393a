// Two recordings' requests matched one to one: the request list of a recording (the blocks alive
// at its first event, then its allocs and frees) and a shortest edit script between two
// sequences. Predict aligns recordings at several sizes by them; diff aligns two runs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/replay/initial_state.hpp"
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

// The allocator's state at a recording's first event: empty where it holds its whole history.
InitialState state_at_first_event(const Trace& trace);

// A recording's requests: the blocks alive at its first event (allocated first, by address),
// then its alloc and free events.
std::vector<RecordedRequest> recorded_requests(const Trace& trace);

// Request `i` of a recording, for a message: its event (or the blocks alive at the start, or the
// end of the requests), its action, size and stream.
std::string describe_request(const Trace& trace, const std::vector<RecordedRequest>& requests,
                             size_t i);

// A predicted request stream as a trace: each of `requests` (an aligned stream: action, stream,
// addr, alloc, time_us) as an event, an allocation of `size_of(i)` bytes, each free of its
// allocation's size.
template <class Request, class SizeOf>
void append_requests(Trace& t, const std::vector<Request>& requests, const SizeOf& size_of) {
  std::vector<uint64_t> sizes(requests.size(), 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& q = requests[i];
    TraceEvent e;
    e.action = q.action;
    e.addr = q.addr;
    e.stream = q.stream;
    e.time_us = q.time_us;
    if (q.action == TraceAction::kAlloc) {
      sizes[i] = size_of(i);
      e.size = sizes[i];
    } else {
      e.size = q.alloc >= 0 ? sizes[static_cast<size_t>(q.alloc)] : 0;
    }
    t.events.push_back(e);
  }
}

// How a request's size in another recording compares with the reference recording's: no larger
// (recorded at a smaller batch or length), or no smaller (fewer ranks sharing the state).
enum class SizeOrder : uint8_t { kOtherNoLarger, kOtherNoSmaller };

// The most items two sequences may differ by (inserted in one, or in the other) for
// shortest_edit_match to find their script.
inline constexpr int kMaxEdits = 2048;

// A shortest edit script (Myers' diff) between sequences of n and m items, `same(x, y)` saying
// whether item x of the first may be item y of the second: for each item of the first, its match
// in the second or -1; nullopt when they differ by more than `max_edits` items. (A template, so
// that `same` is inlined into the walk along each diagonal.)
template <class Same>
std::optional<std::vector<int64_t>> shortest_edit_match(int64_t n, int64_t m, const Same& same,
                                                        int max_edits = kMaxEdits);

// Another recording `r` of the program recorded as `ref`, aligned to it: for each request of
// `ref`, its index in `r`, or -1. Allocations are matched by a shortest edit script over their
// streams and sizes (in `order`), each free follows its allocation. `refuse(i, j)` makes the
// InputError's text for recordings that do not align (request i of ref, j of r): allocations
// that differ by more than kMaxEdits, or less than nine in ten requests in common.
std::vector<int64_t> align_recordings(const std::vector<RecordedRequest>& ref,
                                      const std::vector<RecordedRequest>& r, SizeOrder order,
                                      const std::function<std::string(size_t, size_t)>& refuse);

template <class Same>
std::optional<std::vector<int64_t>> shortest_edit_match(int64_t n, int64_t m, const Same& same,
                                                        int max_edits) {
  const int64_t offset = max_edits + 1;
  std::vector<int64_t> v(static_cast<size_t>(2 * offset + 1), 0);
  // The furthest x on diagonal k (-offset < k < offset).
  auto at = [offset](std::vector<int64_t>& round, int64_t k) -> int64_t& {
    return round[static_cast<size_t>(offset + k)];
  };
  // Before each round d, the diagonals it reads (-d - 1 to d + 1): the backtrack's only input,
  // kept as a band so that memory grows with the edits squared, not with max_edits times them.
  std::vector<std::vector<int64_t>> bands;
  int64_t edits = -1;
  for (int64_t d = 0; d <= max_edits && edits < 0; ++d) {
    bands.emplace_back(v.begin() + (offset - d - 1), v.begin() + (offset + d + 2));
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x =
          (k == -d || (k != d && at(v, k - 1) < at(v, k + 1))) ? at(v, k + 1) : at(v, k - 1) + 1;
      int64_t y = x - k;
      while (x < n && y < m && same(x, y)) ++x, ++y;
      at(v, k) = x;
      if (x >= n && y >= m) {
        edits = d;
        break;
      }
    }
  }
  if (edits < 0) return std::nullopt;
  std::vector<int64_t> match(static_cast<size_t>(n), -1);
  int64_t x = n, y = m;
  for (int64_t d = edits; d >= 0; --d) {
    const std::vector<int64_t>& band = bands[static_cast<size_t>(d)];
    const auto before = [&](int64_t diagonal) {
      return band[static_cast<size_t>(diagonal + d + 1)];
    };
    const int64_t k = x - y;
    int64_t px = 0, py = 0;
    if (d > 0) {
      const int64_t pk = (k == -d || (k != d && before(k - 1) < before(k + 1))) ? k + 1 : k - 1;
      px = before(pk);
      py = px - pk;
    }
    while (x > px && y > py) {
      --x, --y;
      match[static_cast<size_t>(x)] = y;
    }
    x = px, y = py;
  }
  return match;
}

}  // namespace allocsim
