#include "sim/replay/prepared_trace.hpp"

#include <optional>

#include "sim/replay/detail/replay_run.hpp"

namespace allocsim {

using namespace replay_engine;

struct PreparedTrace::Work {
  // The requests depend on the blocks a bounded history restores, which no setting changes (only
  // their sizes, which follow the rounding): listed for the recorded settings, they serve all.
  Work(const Trace& trace, uint64_t capacity)
      : scans(trace, capacity),
        requests(DecodedEvents(trace.events),
                 scans.initial_state(trace, trace.settings.value_or(AllocConf{}))) {}

  PrePass scans;
  RequestList requests;
};

PreparedTrace::PreparedTrace(const Trace& trace, uint64_t capacity)
    : trace_(trace), capacity_(capacity), work_(std::make_unique<const Work>(trace, capacity)) {}

PreparedTrace::~PreparedTrace() = default;

ReplayResult replay(const PreparedTrace& prepared, const ReplayOptions& options) {
  const Trace& trace = prepared.trace();
  const AllocConf conf = replay_conf(trace, options);
  std::optional<PrePass> rescanned;  // the recorded reservations depend on the device's size
  const PrePass& scans = options.capacity == prepared.capacity()
                             ? prepared.work_->scans
                             : rescanned.emplace(trace, options.capacity);
  const ReplayStart start = replay_start(trace, conf, scans, options);
  SimulatedDevice device(options.capacity, context_bytes(options));
  use_recorded_addresses(device, start.initial, scans.addresses, options);
  const DecodedEvents events(trace.events);
  RequestCursor requests(prepared.work_->requests);
  ReplayResult result = run_replay(events, requests, start, options, {device, &device});
  result.outcome.events_total = trace.events.size();
  return result;
}

}  // namespace allocsim
