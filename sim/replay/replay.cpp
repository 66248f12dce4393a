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
  PrePass scans(trace, options.capacity);
  const ReplayStart start{trace.source, conf, scans.initial_state(trace, conf),
                          std::move(scans.addresses), nullptr};
  const DecodedEvents events(trace.events);
  RequestStream<DecodedEvents> requests(events, start.initial);
  ReplayResult result = replay_requests(events, requests, start, options);
  result.events_total = trace.events.size();
  result.recorded_ooms = start.addresses.ooms;
  return result;
}

}  // namespace allocsim
