#include "sim/predict/request_alignment.hpp"

#include <algorithm>
#include <unordered_map>

#include "sim/replay/initial_state.hpp"

namespace allocsim {

std::vector<RecordedRequest> recorded_requests(const Trace& trace) {
  // The segments alone tell whether the history is whole; the blocks are scanned only for one
  // that is not (the two observers keep apart state, so their passes need not interleave).
  HistoryScan history;
  for (const TraceEvent& e : trace.events) history.observe_segment(e);
  const bool whole = history.whole(trace);
  if (!whole) {
    for (const TraceEvent& e : trace.events) history.observe_block(e);
  }
  std::vector<RecordedRequest> out;
  out.reserve(trace.events.size());
  std::unordered_map<uint64_t, int64_t> live;  // address -> its allocation's index
  if (!whole) {
    const InitialState initial = history.finish(trace, trace.settings.value_or(AllocConf{}));
    std::vector<RecordedRequest> blocks;
    for (const InitialSegment& s : initial.segments) {
      for (const RestoredBlock& b : s.blocks) {
        if (b.pending_free) continue;  // freed already: its free completes on its own
        blocks.push_back({TraceAction::kAlloc, s.stream, b.address, b.requested, -1, -1});
      }
    }
    std::sort(blocks.begin(), blocks.end(),
              [](const RecordedRequest& a, const RecordedRequest& b) { return a.addr < b.addr; });
    for (const RecordedRequest& b : blocks) {
      live[b.addr] = static_cast<int64_t>(out.size());
      out.push_back(b);
    }
  }
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.action == TraceAction::kAlloc) {
      live[e.addr] = static_cast<int64_t>(out.size());
      out.push_back({e.action, e.stream, e.addr, e.size, -1, static_cast<int64_t>(i), e.stack});
    } else if (e.action == TraceAction::kFreeRequested || e.action == TraceAction::kFreeCompleted) {
      const auto it = live.find(e.addr);
      const int64_t alloc = it == live.end() ? -1 : it->second;
      out.push_back({e.action, e.stream, e.addr, e.size, alloc, static_cast<int64_t>(i)});
      if (e.action == TraceAction::kFreeCompleted && it != live.end()) live.erase(it);
    }
  }
  return out;
}

std::optional<std::vector<int64_t>> shortest_edit_match(
    int64_t n, int64_t m, const std::function<bool(int64_t, int64_t)>& same, int max_edits) {
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
