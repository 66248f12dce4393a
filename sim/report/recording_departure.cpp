#include "sim/report/recording_departure.hpp"

#include <algorithm>
#include <vector>

#include "sim/report/device_op_diff.hpp"

namespace allocsim {
namespace {

std::optional<DeviceOpKind> op_kind(TraceAction action) {
  switch (action) {
    case TraceAction::kSegmentAlloc:
      return DeviceOpKind::kSegmentAlloc;
    case TraceAction::kSegmentFree:
      return DeviceOpKind::kSegmentFree;
    case TraceAction::kSegmentMap:
      return DeviceOpKind::kSegmentMap;
    case TraceAction::kSegmentUnmap:
      return DeviceOpKind::kSegmentUnmap;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<RecordingDeparture> recording_departure(const Trace& trace,
                                                      const ReplayResult& result) {
  if (!(result.setup.conf == trace.settings.value_or(AllocConf{}))) return std::nullopt;
  // An OOM the run did not have, or one it had that the replay did not, is the answer to a
  // what-if (a smaller or larger device or cap), reported as such.
  const ReplayOutcome& outcome = result.outcome;
  if (outcome.recorded_ooms_not_reproduced > 0 ||
      std::any_of(outcome.oom_events.begin(), outcome.oom_events.end(),
                  [](const auto& o) { return !o.recorded; })) {
    return std::nullopt;
  }
  const uint64_t until = std::min<uint64_t>(outcome.events_replayed, trace.events.size());
  std::vector<DeviceOp> recorded;
  std::vector<uint64_t> recorded_at;  // the event of each
  bool records_segments = false;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    const auto kind = op_kind(e.action);
    if (!kind) continue;
    records_segments = true;
    if (i >= until) continue;
    recorded.push_back({*kind, e.addr, e.size, e.stream});
    recorded_at.push_back(i);
  }
  if (!records_segments && outcome.recorded_ooms == 0) return std::nullopt;  // e.g. an RMM log
  const DeviceOpDiff diff = compare_device_ops(recorded, result.device_ops);
  if (diff.identical()) return std::nullopt;
  const uint64_t k = *diff.first_difference;
  RecordingDeparture d{k, std::nullopt, "none", "none"};
  if (k < recorded.size()) {
    d.event_index = recorded_at[k];
    d.recorded = describe(recorded[k]);
  }
  if (k < result.device_ops.size()) d.replayed = describe(result.device_ops[k]);
  return d;
}

std::string departure_warning(const Trace& trace, const RecordingDeparture& d) {
  std::string where = "segment operation " + std::to_string(d.op_index);
  if (d.event_index) where += " (event " + std::to_string(*d.event_index) + ")";
  return trace.source + ": the replay departs from the recorded run at " + where + ": recorded " +
         d.recorded + ", replayed " + d.replayed +
         "; its figures from there on are not the recorded run's (a device, cap or address "
         "placement unlike the recording's, or allocator behaviour allocsim does not model)";
}

}  // namespace allocsim
