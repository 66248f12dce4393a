#include "sim/predict/request_alignment.hpp"

#include <algorithm>

#include "sim/replay/address_map.hpp"
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
  AddressMap live;  // address -> its allocation's index
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
      live.put(b.addr, static_cast<uint32_t>(out.size()));
      out.push_back(b);
    }
  }
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.action == TraceAction::kAlloc) {
      live.put(e.addr, static_cast<uint32_t>(out.size()));
      out.push_back({e.action, e.stream, e.addr, e.size, -1, static_cast<int64_t>(i), e.stack});
    } else if (e.action == TraceAction::kFreeRequested || e.action == TraceAction::kFreeCompleted) {
      const std::optional<uint32_t> found = live.find(e.addr);
      const int64_t alloc = found ? static_cast<int64_t>(*found) : -1;
      out.push_back({e.action, e.stream, e.addr, e.size, alloc, static_cast<int64_t>(i)});
      if (e.action == TraceAction::kFreeCompleted && found) live.erase(e.addr);
    }
  }
  return out;
}

}  // namespace allocsim
