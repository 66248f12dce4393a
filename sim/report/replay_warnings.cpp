#include "sim/report/replay_warnings.hpp"

#include <algorithm>

#include "sim/report/recording_departure.hpp"

namespace allocsim {

std::vector<std::string> contradiction_warnings(const Trace& trace, const ReplayResult& result) {
  std::vector<std::string> lines;
  const TraceContradictions& c = result.outcome.contradictions;
  const std::string where =
      trace.source + ": device_traces[" + std::to_string(trace.device) + "]: ";
  // With expandable segments, such frees are what a history that starts mid-run shows: the
  // ranges mapped before its first event, and the blocks in them, are not rebuilt.
  const bool expandable = (trace.settings && trace.settings->expandable_segments) ||
                          std::any_of(trace.segments.begin(), trace.segments.end(),
                                      [](const SnapshotSegment& s) { return s.expandable; });
  if (c.frees_of_unknown_blocks > 0 && expandable) {
    lines.push_back(where + std::to_string(c.frees_of_unknown_blocks) +
                    " free(s) of a block from before the first event, the first at event " +
                    std::to_string(c.first_free_of_unknown_block) +
                    ": skipped (a history that starts mid-run restores no expandable segment's "
                    "ranges mapped before it: their blocks are left out of the figures)");
  } else if (c.frees_of_unknown_blocks > 0) {
    lines.push_back(where + std::to_string(c.frees_of_unknown_blocks) +
                    " free(s) of a block that was neither allocated nor live at the first event, "
                    "the first at event " +
                    std::to_string(c.first_free_of_unknown_block) + ": skipped");
  }
  if (c.allocs_at_live_addresses > 0) {
    lines.push_back(where + std::to_string(c.allocs_at_live_addresses) +
                    " alloc(s) at the address of a block still live (a free is missing), the "
                    "first at event " +
                    std::to_string(c.first_alloc_at_live_address) +
                    ": the older block is kept live to the end");
  }
  return lines;
}

std::vector<std::string> replay_warnings(const Trace& trace, const ReplayResult& result) {
  std::vector<std::string> lines = contradiction_warnings(trace, result);
  if (const auto departure = recording_departure(trace, result))
    lines.push_back(departure_warning(trace, *departure));
  return lines;
}

}  // namespace allocsim
