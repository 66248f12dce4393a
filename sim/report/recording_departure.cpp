#include "sim/report/recording_departure.hpp"

#include <algorithm>
#include <vector>

#include "core/format_address.hpp"
#include "sim/report/device_op_diff.hpp"

namespace allocsim {
namespace {

// The first OOM the replay and the recording disagree on, if any: a recorded one the replay
// served, or (where the recording has OOMs of its own) one of the replay's that the run served.
std::optional<RecordingDeparture> oom_departure(const Trace& trace, const ReplayOutcome& outcome) {
  std::optional<uint64_t> at = outcome.first_recorded_oom_not_reproduced;
  bool replay_refused = false;
  if (outcome.recorded_ooms > 0) {
    for (const auto& o : outcome.oom_events) {
      if (!o.recorded && (!at || o.event_index < *at)) {
        at = o.event_index;
        replay_refused = true;
        break;
      }
    }
  }
  if (!at) return std::nullopt;
  const TraceEvent& e = trace.events[*at];
  const std::string request =
      "a request of " + std::to_string(e.size) + " bytes on stream " + std::to_string(e.stream);
  RecordingDeparture d;
  d.kind = RecordingDeparture::kOom;
  d.event_index = *at;
  d.recorded = replay_refused ? request + " served" : "an OOM at " + request;
  d.replayed = replay_refused ? "an OOM" : "the request served";
  return d;
}

// The most the recorded run reserved at once: what it held at the first event, and its segment
// operations after.
uint64_t recorded_peak_reserved(const Trace& trace, const ReplayResult& result) {
  int64_t reserved = static_cast<int64_t>(result.restored.reserved_bytes), peak = reserved;
  for (const TraceEvent& e : trace.events) {
    if (e.action == TraceAction::kSegmentAlloc || e.action == TraceAction::kSegmentMap) {
      reserved += static_cast<int64_t>(e.size);
      peak = std::max(peak, reserved);
    } else if (e.action == TraceAction::kSegmentFree || e.action == TraceAction::kSegmentUnmap) {
      reserved -= static_cast<int64_t>(e.size);
    }
  }
  return static_cast<uint64_t>(std::max<int64_t>(peak, 0));
}

// The first block the replay placed elsewhere than the run did, where the replay checked them.
std::optional<RecordingDeparture> address_departure(const Trace& trace, const ReplayResult& result,
                                                    const std::vector<uint64_t>& recorded_at) {
  const AddressCheck& a = result.addresses;
  if (a.checks == 0 || a.mismatches == 0 || a.first_mismatch_event >= trace.events.size())
    return std::nullopt;
  RecordingDeparture d;
  d.kind = RecordingDeparture::kAddress;
  d.event_index = a.first_mismatch_event;
  d.op_index = static_cast<uint64_t>(
      std::lower_bound(recorded_at.begin(), recorded_at.end(), a.first_mismatch_event) -
      recorded_at.begin());
  d.recorded = "a block at " + format_address(trace.events[a.first_mismatch_event].addr);
  d.replayed = "one at " + format_address(a.first_mismatch_address) + " (" +
               std::to_string(a.mismatches) + " of " + std::to_string(a.checks) +
               " block addresses differ)";
  return d;
}

}  // namespace

namespace {

// Garbage collection (a cap and garbage_collection_threshold) releases the cached blocks unused
// the longest first; a history that starts mid-run restores its first state without their ages.
std::string departure_cause(const ReplayResult& result) {
  const bool restored = result.restored.segments > 0 || result.restored.blocks > 0;
  const bool capped = result.setup.limit_bytes < result.setup.capacity;
  if (restored && capped && result.setup.conf.garbage_collection_threshold > 0) {
    return "garbage collection under the cap releases the cached blocks unused the longest first, "
           "and a history that starts mid-run does not show how long the blocks there at its "
           "first event had been unused";
  }
  if (result.restored.blocks_of_assumed_size > 0) {
    return "the history starts mid-run, and " +
           std::to_string(result.restored.blocks_of_assumed_size) +
           " block(s) there at its first event may have been larger than their requests (left "
           "unsplit when allocated before it), which the trace does not show";
  }
  return "";
}

std::optional<RecordingDeparture> first_departure(const Trace& trace, const ReplayResult& result);

}  // namespace

std::optional<RecordingDeparture> recording_departure(const Trace& trace,
                                                      const ReplayResult& result) {
  std::optional<RecordingDeparture> d = first_departure(trace, result);
  if (d) d->cause = departure_cause(result);
  return d;
}

namespace {

std::optional<RecordingDeparture> first_departure(const Trace& trace, const ReplayResult& result) {
  if (!(result.setup.conf == trace.settings.value_or(AllocConf{})) ||
      result.setup.adds_empty_cache || !trace.addresses_recorded)
    return std::nullopt;
  const ReplayOutcome& outcome = result.outcome;
  std::optional<RecordingDeparture> oom = oom_departure(trace, outcome);
  // A trace without OOMs where the replay met one: the answer to a smaller device or cap. Not
  // where the replay had the room the run reserved at its peak, which a replay that repeats the
  // run never runs out of (with expandable segments the cap counts more than the mapped pages,
  // so their room says less).
  if (!oom && std::any_of(outcome.oom_events.begin(), outcome.oom_events.end(),
                          [](const auto& o) { return !o.recorded; })) {
    if (result.setup.conf.expandable_segments ||
        result.setup.limit_bytes < recorded_peak_reserved(trace, result))
      return std::nullopt;
  }
  const uint64_t until = std::min<uint64_t>(outcome.events_replayed, trace.events.size());
  std::vector<DeviceOp> recorded;
  std::vector<uint64_t> recorded_at;  // the event of each
  bool records_segments = false;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    const auto kind = device_op_kind(e.action);
    if (!kind) continue;
    records_segments = true;
    if (i >= until) continue;
    recorded.push_back({*kind, e.addr, e.size, e.stream});
    recorded_at.push_back(i);
  }
  // No segment operations recorded: nothing to compare in a trace without segments (an RMM log);
  // in a bounded history whose window has none, the block addresses in the segments restored from
  // the snapshot.
  if (!records_segments && outcome.recorded_ooms == 0) {
    if (result.restored.segments == 0) return std::nullopt;
    return address_departure(trace, result, {});
  }
  const DeviceOpDiff diff = compare_device_ops(recorded, result.device_ops);
  std::optional<RecordingDeparture> ops;
  if (!diff.identical()) {
    const uint64_t k = *diff.first_difference;
    ops = RecordingDeparture{
        RecordingDeparture::kSegmentOperation, k, std::nullopt, "none", "none", ""};
    if (k < recorded.size()) {
      ops->event_index = recorded_at[k];
      ops->recorded = describe(recorded[k]);
    }
    if (k < result.device_ops.size()) ops->replayed = describe(result.device_ops[k]);
  }
  if (!oom && !ops) return address_departure(trace, result, recorded_at);
  if (!oom) return ops;
  // The OOM comes first unless the operations differ at an earlier event.
  if (ops && ops->event_index && *ops->event_index < *oom->event_index) return ops;
  oom->op_index = static_cast<uint64_t>(
      std::lower_bound(recorded_at.begin(), recorded_at.end(), *oom->event_index) -
      recorded_at.begin());
  return oom;
}

}  // namespace

std::string departure_warning(const Trace& trace, const RecordingDeparture& d) {
  const std::string tail =
      "; its figures from there on are not the recorded run's (" +
      (d.cause.empty() ? "a device, cap or address placement unlike the recording's, or allocator "
                         "behaviour allocsim does not model"
                       : d.cause) +
      ")";
  if (d.kind == RecordingDeparture::kOom || d.kind == RecordingDeparture::kAddress) {
    return trace.source + ": the replay departs from the recorded run at event " +
           std::to_string(*d.event_index) + ": recorded " + d.recorded + ", replayed " +
           d.replayed + tail;
  }
  std::string where = "segment operation " + std::to_string(d.op_index);
  if (d.event_index) where += " (event " + std::to_string(*d.event_index) + ")";
  return trace.source + ": the replay departs from the recorded run at " + where + ": recorded " +
         d.recorded + ", replayed " + d.replayed + tail;
}

}  // namespace allocsim
