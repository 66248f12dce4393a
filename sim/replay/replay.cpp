#include "sim/replay/replay.hpp"

#include "sim/replay/detail/replay_run.hpp"

namespace allocsim {

void check_replayable(const AllocConf& conf) {
  if (conf.use_malloc_async) {
    throw AllocConfError(
        "backend:cudaMallocAsync is the CUDA driver's own allocator; allocsim simulates the "
        "native caching allocator only");
  }
}

ReplayResult replay(const Trace& trace, const ReplayOptions& options) {
  using namespace replay_engine;
  const AllocConf conf = replay_conf(trace, options);
  const PrePass scans(trace, options.capacity);
  const ReplayStart start{trace.source, conf, scans.initial_state(trace, conf),
                          scans.addresses.ooms};
  SimulatedDevice device(options.capacity, context_bytes(options));
  use_recorded_addresses(device, start.initial, scans.addresses, options);
  const DecodedEvents events(trace.events);
  RequestStream<DecodedEvents> requests(events, start.initial);
  ReplayResult result = run_replay(events, requests, start, options, {device, &device});
  result.outcome.events_total = trace.events.size();
  return result;
}

ReplayResult replay_on(Device& device, const Trace& trace, const ReplayOptions& options,
                       BlockObserver* blocks) {
  using namespace replay_engine;
  const AllocConf conf = replay_conf(trace, options);
  const PrePass scans(trace, options.capacity);
  const ReplayStart start{trace.source, conf, scans.initial_state(trace, conf),
                          scans.addresses.ooms};
  const DecodedEvents events(trace.events);
  RequestStream<DecodedEvents> requests(events, start.initial);
  ReplayResult result = run_replay(events, requests, start, options, {device, nullptr}, blocks);
  result.outcome.events_total = trace.events.size();
  return result;
}

}  // namespace allocsim
