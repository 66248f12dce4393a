#include "sim/predict/request_alignment.hpp"

#include <algorithm>
#include <unordered_map>

#include "sim/replay/address_map.hpp"
#include "sim/replay/initial_state.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim {

InitialState state_at_first_event(const Trace& trace) {
  // The segments alone tell whether the history is whole; the blocks are scanned only for one
  // that is not (the two observers keep apart state, so their passes need not interleave).
  HistoryScan history;
  for (const TraceEvent& e : trace.events) history.observe_segment(e);
  if (history.whole(trace)) return {};
  for (const TraceEvent& e : trace.events) history.observe_block(e);
  return history.finish(trace, trace.settings.value_or(AllocConf{}));
}

std::vector<RecordedRequest> recorded_requests(const Trace& trace) {
  std::vector<RecordedRequest> out;
  out.reserve(trace.events.size());
  AddressMap live;  // address -> its allocation's index
  const InitialState initial = state_at_first_event(trace);
  if (!initial.empty()) {
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

std::string describe_request(const Trace& trace, const std::vector<RecordedRequest>& requests,
                             size_t i) {
  if (i >= requests.size())
    return trace.source + ": its end (" + std::to_string(requests.size()) + " requests)";
  const RecordedRequest& r = requests[i];
  const std::string where =
      r.event < 0 ? "a block alive at its first event" : "event " + std::to_string(r.event);
  return trace.source + ": " + where + " (" + to_string(r.action) + " of " +
         std::to_string(r.size) + " bytes on stream " + std::to_string(r.stream) + ")";
}

// Frees are left out of the edit script because when a tensor dies moves with the size (a smaller
// run frees some buffers earlier, cuDNN's workspaces come and go with the shapes), and a script
// over frees by size pairs frees of different allocations.
std::vector<int64_t> align_recordings(const std::vector<RecordedRequest>& ref,
                                      const std::vector<RecordedRequest>& r, SizeOrder order,
                                      const std::function<std::string(size_t, size_t)>& refuse) {
  std::vector<size_t> ref_allocs, r_allocs;  // the allocations' places among the requests
  for (size_t i = 0; i < ref.size(); ++i)
    if (ref[i].action == TraceAction::kAlloc) ref_allocs.push_back(i);
  for (size_t j = 0; j < r.size(); ++j)
    if (r[j].action == TraceAction::kAlloc) r_allocs.push_back(j);
  // Allocations that may be the same: on the same stream, sizes in the order the parameter
  // sets (no larger in the smaller recording, sizes growing with the value or staying), which
  // keeps a workspace inserted at the larger size from being taken for the larger request beside
  // it.
  const bool no_larger = order == SizeOrder::kOtherNoLarger;
  const auto same = [&](int64_t x, int64_t y) {
    const RecordedRequest &a = ref[ref_allocs[static_cast<size_t>(x)]],
                          &b = r[r_allocs[static_cast<size_t>(y)]];
    return a.stream == b.stream && (no_larger ? b.size <= a.size : b.size >= a.size);
  };
  const std::optional<std::vector<int64_t>> allocs = shortest_edit_match(
      static_cast<int64_t>(ref_allocs.size()), static_cast<int64_t>(r_allocs.size()), same);
  if (!allocs) {
    size_t first = 0;  // where they first part, for the message
    while (first < ref_allocs.size() && first < r_allocs.size() &&
           same(static_cast<int64_t>(first), static_cast<int64_t>(first)))
      ++first;
    throw InputError(refuse(first < ref_allocs.size() ? ref_allocs[first] : ref.size(),
                            first < r_allocs.size() ? r_allocs[first] : r.size()) +
                     " (their allocations differ by more than " + std::to_string(kMaxEdits) + ")");
  }
  std::vector<int64_t> match(ref.size(), -1);
  for (size_t x = 0; x < ref_allocs.size(); ++x) {
    const int64_t y = (*allocs)[x];
    if (y >= 0) match[ref_allocs[x]] = static_cast<int64_t>(r_allocs[static_cast<size_t>(y)]);
  }
  // Each allocation's frees in r, by kind.
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> frees;  // alloc -> requested, completed
  for (size_t j = 0; j < r.size(); ++j) {
    if (r[j].action == TraceAction::kAlloc || r[j].alloc < 0) continue;
    auto [it, added] = frees.emplace(r[j].alloc, std::pair<int64_t, int64_t>{-1, -1});
    (r[j].action == TraceAction::kFreeRequested ? it->second.first : it->second.second) =
        static_cast<int64_t>(j);
  }
  for (size_t i = 0; i < ref.size(); ++i) {
    const RecordedRequest& q = ref[i];
    if (q.action == TraceAction::kAlloc || q.alloc < 0) continue;
    const int64_t a = match[static_cast<size_t>(q.alloc)];
    if (a < 0) continue;
    const auto it = frees.find(a);
    if (it == frees.end()) continue;
    match[i] = q.action == TraceAction::kFreeRequested ? it->second.first : it->second.second;
  }
  // Runs of requests of one recording only are a small part of a step (kernels chosen by size);
  // recordings with less than nine in ten requests in common are not the same program.
  const size_t common = static_cast<size_t>(
      std::count_if(match.begin(), match.end(), [](int64_t j) { return j >= 0; }));
  if (common * 10 < std::min(ref.size(), r.size()) * 9) {
    size_t part = 0;
    while (part < ref.size() && match[part] == static_cast<int64_t>(part)) ++part;
    throw InputError(refuse(part, part) + " (" + std::to_string(common) +
                     " requests in common of " + std::to_string(std::min(ref.size(), r.size())) +
                     ")");
  }
  return match;
}
}  // namespace allocsim
