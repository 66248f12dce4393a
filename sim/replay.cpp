#include "sim/replay.hpp"

#include "sim/replay_engine.hpp"

namespace allocsim {

ReplayResult replay(const Trace& trace, const ReplayOptions& options) {
  using namespace replay_engine;
  if (options.alloc_conf ? options.alloc_conf->use_malloc_async
                         : trace.settings && trace.settings->use_malloc_async) {
    throw AllocConfError(kMallocAsyncNotSimulated);  // before any work, as replay_requests would
  }
  ReplayStart start{trace.source,
                    options.alloc_conf ? *options.alloc_conf : trace.settings.value_or(AllocConf{}),
                    {},
                    RecordedAddresses(options.capacity),
                    nullptr};
  // One pass over the events for everything gathered before the replay starts.
  HistoryScan history;
  for (const TraceEvent& e : trace.events) {
    history.observe(e);
    start.addresses.observe(e);
  }
  start.initial = history.finish(trace, start.conf);
  ReplayResult result = replay_requests(DecodedEvents(trace.events), start, options);
  result.events_total = trace.events.size();
  result.recorded_ooms = start.addresses.ooms;
  return result;
}

}  // namespace allocsim
