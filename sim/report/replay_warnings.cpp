#include "sim/report/replay_warnings.hpp"

#include "sim/report/recording_departure.hpp"

namespace allocsim {

std::vector<std::string> contradiction_warnings(const Trace& trace, const ReplayResult& result) {
  std::vector<std::string> lines;
  const TraceContradictions& c = result.outcome.contradictions;
  const std::string where =
      trace.source + ": device_traces[" + std::to_string(trace.device) + "]: ";
  if (c.frees_of_unknown_blocks > 0) {
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
