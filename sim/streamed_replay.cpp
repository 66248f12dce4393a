#include "sim/streamed_replay.hpp"

#include <optional>

#include "sim/replay_engine.hpp"

namespace allocsim {

using replay_engine::RecordedAddresses;

struct StreamedReplay::Run {
  explicit Run(EventFeed& feed, uint64_t capacity) : events(feed), addresses(capacity) {}

  // Reads events into the pre-pass scans (bounded history, recorded addresses) up to the first
  // that gives the device another recorded address, passing it on; false at the end of the trace.
  bool read_more(SimulatedDevice* device) {
    while (events.has(scanned)) {
      const TraceEvent& e = events[scanned++];
      history.observe(e);
      const size_t segments = addresses.segments.size();
      const size_t reservations = addresses.reservations.size();
      addresses.observe(e);
      if (addresses.segments.size() > segments) {
        if (device) device->add_recorded_segment(addresses.segments.back());
        return true;
      }
      if (addresses.reservations.size() > reservations) {
        if (device) device->add_recorded_reservation(addresses.reservations.back());
        return true;
      }
    }
    return false;
  }

  FedEvents events;
  uint64_t scanned = 0;  // events the scans have seen
  HistoryScan history;
  RecordedAddresses addresses;
  AllocConf conf;
  std::optional<ReplayResult> result;  // set when the replay ran to the end
};

bool StreamedReplay::supports(const ReplayOptions& options) {
  return !options.device && !options.blocks && !options.segment_addresses;
}

StreamedReplay::StreamedReplay(const ReplayOptions& options, std::string source)
    : options_(options),
      source_(std::move(source)),
      run_(std::make_unique<Run>(feed_, options.capacity)) {
  run_->conf = options_.alloc_conf.value_or(AllocConf{});
  feed_.attach();  // before the decoder can publish or abandon
  thread_ = std::thread([this] { run(); });
}

StreamedReplay::~StreamedReplay() {
  if (thread_.joinable()) {
    feed_.abandon();
    thread_.join();
  }
}

void StreamedReplay::run() {
  try {
    using namespace replay_engine;
    ReplayStart start{source_, run_->conf, {}, RecordedAddresses(options_.capacity), nullptr};
    if (options_.use_recorded_addresses) {
      start.read_more = [this](SimulatedDevice& device) { return run_->read_more(&device); };
    }
    ReplayResult result = replay_requests(run_->events, start, options_);
    while (run_->read_more(nullptr)) {
    }  // the scans see every event
    run_->result = std::move(result);
  } catch (...) {
    // Abandoned, or a replay error: the ordinary replay after the decoding says what is wrong.
  }
  feed_.detach();
}

ReplayResult StreamedReplay::finish(const Trace& trace) {
  if (!feed_.finished()) feed_.abandon();  // not a snapshot, or not its events
  thread_.join();
  Run& run = *run_;
  // The guess: the same events, the same settings, a whole history.
  streamed_ = run.result && feed_.events() == trace.events.data() &&
              run.events.size() == trace.events.size() &&
              (options_.alloc_conf || trace.settings.value_or(AllocConf{}) == run.conf) &&
              run.history.finish(trace, run.conf).empty();
  if (!streamed_) return replay(trace, options_);
  ReplayResult result = std::move(*run.result);
  result.events_total = trace.events.size();
  result.recorded_ooms = run.addresses.ooms;
  return result;
}

}  // namespace allocsim
