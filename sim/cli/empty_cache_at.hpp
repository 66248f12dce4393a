// --empty-cache-at: where a what-if calls torch.cuda.empty_cache(), as trace events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/trace/trace.hpp"

namespace allocsim::cli {

// The events before which torch.cuda.empty_cache() is called, ascending. `spec` is "step" (before
// every training step after the first: at each step boundary the report finds, from the
// snapshot's record_function annotations, that more requests follow) or event indices "E1,E2,...".
// Throws InputError for a spec it cannot read, an event past the trace, or "step" on a trace
// without steps.
std::vector<uint64_t> empty_cache_events(const Trace& trace, const std::string& spec);

// Where each step after the first begins (a step boundary with requests after it); empty for a
// trace without steps.
std::vector<uint64_t> step_starts(const Trace& trace);

}  // namespace allocsim::cli
