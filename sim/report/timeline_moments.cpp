#include "sim/report/timeline_moments.hpp"

#include <map>

namespace allocsim {

std::vector<TimelineMoment> timeline_moments(const ReplayResult& result, size_t evenly_spaced,
                                             std::span<const uint64_t> asked) {
  const uint64_t events = result.outcome.events_total;
  uint64_t last = events == 0 ? 0 : events - 1;
  if (result.outcome.stopped_at_oom && result.outcome.oom) last = result.outcome.oom->event_index;
  std::map<uint64_t, std::string> labels;
  const auto add = [&](uint64_t event, const std::string& label) {
    if (events == 0 || event > last) return;
    std::string& l = labels[event];
    if (label.empty() || l.find(label) != std::string::npos) return;
    l += (l.empty() ? "" : ", ") + label;
  };
  for (uint64_t k = 1; k <= evenly_spaced; ++k) add((last + 1) * k / evenly_spaced - 1, "");
  for (uint64_t event : asked) add(event, "asked");
  // The first event after which each peaked.
  const TimelinePoint *allocated_peak = nullptr, *reserved_peak = nullptr;
  for (const TimelinePoint& p : result.recording.timeline) {
    if (!allocated_peak || p.allocated > allocated_peak->allocated) allocated_peak = &p;
    if (!reserved_peak || p.reserved > reserved_peak->reserved) reserved_peak = &p;
  }
  if (allocated_peak) add(allocated_peak->event_index, "peak allocated");
  if (reserved_peak) add(reserved_peak->event_index, "peak reserved");
  if (result.outcome.oom) add(result.outcome.oom->event_index, "OOM");
  std::vector<TimelineMoment> moments;
  moments.reserve(labels.size());
  for (auto& [event, label] : labels) moments.push_back({event, std::move(label)});
  return moments;
}

std::vector<uint64_t> moment_events(std::span<const TimelineMoment> moments) {
  std::vector<uint64_t> events;
  for (const TimelineMoment& m : moments) events.push_back(m.event_index);
  return events;
}

}  // namespace allocsim
