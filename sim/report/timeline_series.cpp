#include "sim/report/timeline_series.hpp"

#include <algorithm>

namespace allocsim {

TimelineSeries timeline_series(const ReplayResult& result) {
  const uint64_t events = result.outcome.events_total;
  TimelineSeries series;
  for (auto& v : series.values) v.assign(events, 0);
  std::array<int64_t, kQuantities> now{};
  uint64_t next = 0;  // the first event not yet filled
  const auto fill_to = [&](uint64_t end) {
    for (; next < std::min(end, events); ++next) {
      for (size_t q = 0; q < kQuantities; ++q) series.values[q][next] = now[q];
    }
  };
  // A point is the value after its event: the events before it get the value before it.
  for (const TimelinePoint& p : result.recording.timeline) {
    fill_to(p.event_index);
    now = {p.allocated, p.active, p.reserved};
  }
  fill_to(events);
  return series;
}

std::vector<TimelineLevel> timeline_levels(const TimelineSeries& series, uint64_t base,
                                           uint64_t fanout) {
  std::vector<TimelineLevel> levels;
  const uint64_t events = series.events();
  if (events <= base) return levels;
  // The finest level from the events, each coarser one from the level below it.
  TimelineLevel first;
  first.width = base;
  for (size_t q = 0; q < kQuantities; ++q) {
    const std::vector<int64_t>& v = series.values[q];
    for (uint64_t start = 0; start < events; start += base) {
      const auto begin = v.begin() + static_cast<std::ptrdiff_t>(start);
      const auto end = v.begin() + static_cast<std::ptrdiff_t>(std::min(events, start + base));
      const auto [lo, hi] = std::minmax_element(begin, end);
      first.min[q].push_back(*lo);
      first.max[q].push_back(*hi);
    }
  }
  levels.push_back(std::move(first));
  while (levels.back().buckets() > 1) {
    const TimelineLevel& below = levels.back();
    TimelineLevel level;
    level.width = below.width * fanout;
    for (size_t q = 0; q < kQuantities; ++q) {
      for (size_t start = 0; start < below.buckets(); start += fanout) {
        const size_t end = std::min<size_t>(below.buckets(), start + fanout);
        const auto from = static_cast<std::ptrdiff_t>(start), to = static_cast<std::ptrdiff_t>(end);
        level.min[q].push_back(
            *std::min_element(below.min[q].begin() + from, below.min[q].begin() + to));
        level.max[q].push_back(
            *std::max_element(below.max[q].begin() + from, below.max[q].begin() + to));
      }
    }
    levels.push_back(std::move(level));
  }
  return levels;
}

}  // namespace allocsim
