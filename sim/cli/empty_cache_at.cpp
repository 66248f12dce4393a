#include "sim/cli/empty_cache_at.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "sim/report/step_analysis.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim::cli {
namespace {

std::vector<uint64_t> listed_events(const Trace& trace, const std::string& spec) {
  std::vector<uint64_t> events;
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, comma - pos);
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || item[0] == '-' || errno == ERANGE) {
      throw InputError("--empty-cache-at: '" + spec +
                       "': expected \"step\" or event indices such as 1200,5400");
    }
    if (v >= trace.events.size()) {
      throw InputError("--empty-cache-at " + item + ": " + trace.source + " has " +
                       std::to_string(trace.events.size()) + " events");
    }
    events.push_back(v);
    pos = comma + 1;
  }
  std::sort(events.begin(), events.end());
  events.erase(std::unique(events.begin(), events.end()), events.end());
  return events;
}

// Where each step starts: its first request after the boundary, as a job calling empty_cache()
// at the top of its loop calls it after the frees that end the step before (the step function's
// locals, released when it returns, after the optimizer's zero_grad). A boundary with no request
// after it, after the job's last step, starts none: a call there would be no remedy but a change
// of the state the job ends in.
std::vector<uint64_t> starts_of(const Trace& trace, const StepAnalysis& steps) {
  std::vector<uint64_t> allocs;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    if (trace.events[i].action == TraceAction::kAlloc) allocs.push_back(i);
  }
  std::vector<uint64_t> events;
  for (const StepBoundary& b : steps.boundaries) {
    const auto first = std::lower_bound(allocs.begin(), allocs.end(), b.event_index);
    if (first != allocs.end() && (events.empty() || *first != events.back()))
      events.push_back(*first);
  }
  return events;
}

}  // namespace

std::vector<uint64_t> step_starts(const Trace& trace) {
  return starts_of(trace, analyze_steps(trace));
}

std::vector<uint64_t> empty_cache_events(const Trace& trace, const std::string& spec) {
  if (spec != "step") return listed_events(trace, spec);
  const StepAnalysis steps = analyze_steps(trace);
  if (steps.boundaries.empty()) {
    throw InputError("--empty-cache-at step: " + trace.source +
                     " has no step structure (the optimizer's record_function annotations); give "
                     "event indices instead");
  }
  return starts_of(trace, steps);
}

}  // namespace allocsim::cli
