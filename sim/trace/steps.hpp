// A training job's steps, as its snapshot shows them: the optimizer's record_function
// annotations (Optimizer.step, zero_grad) around its events. One finder for every analysis that
// goes by steps (leaks across steps, gradient accumulation, empty_cache() at each step).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace/trace.hpp"

namespace allocsim {

// The times of the annotations whose name holds `part`: their starts, or their ends, sorted.
std::vector<uint64_t> annotation_times(const Trace& trace, std::string_view part, bool start);

// The annotation whose end closes a step: zero_grad's (the end of a training step), else the
// optimizer step's; empty where the trace has neither.
std::string step_marker(const Trace& trace);

// The times that annotation ends, sorted: the ends of the trace's steps (none without a marker).
std::vector<uint64_t> step_end_times(const Trace& trace, const std::string& marker);

// The first event after each time of `times` (sorted), one index per time: events.size() for a
// time after the last event.
std::vector<uint64_t> first_events_after(const Trace& trace, const std::vector<uint64_t>& times);

}  // namespace allocsim
