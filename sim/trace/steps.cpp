#include "sim/trace/steps.hpp"

#include <algorithm>

namespace allocsim {

std::vector<uint64_t> annotation_times(const Trace& trace, std::string_view part, bool start) {
  std::vector<uint64_t> times;
  for (const Annotation& a : trace.annotations) {
    if (a.start == start && a.name.find(part) != std::string::npos) times.push_back(a.time_us);
  }
  std::sort(times.begin(), times.end());
  return times;
}

std::string step_marker(const Trace& trace) {
  for (const char* want : {"zero_grad", "Optimizer.step"}) {
    for (const Annotation& a : trace.annotations) {
      if (!a.start && a.name.find(want) != std::string::npos) return a.name;
    }
  }
  return "";
}

std::vector<uint64_t> step_end_times(const Trace& trace, const std::string& marker) {
  std::vector<uint64_t> ends;
  if (marker.empty()) return ends;
  for (const Annotation& a : trace.annotations) {
    if (!a.start && a.name == marker) ends.push_back(a.time_us);
  }
  std::sort(ends.begin(), ends.end());
  return ends;
}

std::vector<uint64_t> first_events_after(const Trace& trace, const std::vector<uint64_t>& times) {
  std::vector<uint64_t> out;
  out.reserve(times.size());
  uint64_t i = 0;
  for (const uint64_t t : times) {
    while (i < trace.events.size() && trace.events[i].time_us <= t) ++i;
    out.push_back(i);
  }
  return out;
}

}  // namespace allocsim
