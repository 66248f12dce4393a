#include "sim/replay/streamed_replay.hpp"

#include <optional>
#include <system_error>

#include "sim/replay/detail/replay_run.hpp"

namespace allocsim {

using replay_engine::RecordedAddresses;

struct StreamedReplay::Run {
  Run(EventFeed& feed, uint64_t capacity) : feed(feed), addresses(capacity) {}

  // The replay's source of events. Each time the replay passes the events published so far, the
  // scans that replay() makes before it starts (bounded history, recorded addresses) catch up with
  // them, so that they end with the decoding instead of after it.
  class Events {
   public:
    explicit Events(Run& run) : run_(run) {}
    bool has(uint64_t i) const {
      if (i < known_) return true;
      const bool there = run_.feed.wait_for(i);
      known_ = run_.feed.published();
      run_.scan_to(known_);
      return there;
    }
    const TraceEvent& operator[](uint64_t i) const { return run_.feed.events()[i]; }
    uint64_t size() const { return run_.feed.published(); }  // once has() has said no

   private:
    Run& run_;
    mutable uint64_t known_ = 0;  // events published when last asked
  };

  void scan_to(uint64_t end) {
    const TraceEvent* events = feed.events();
    for (; scanned < end; ++scanned) {
      history.observe_segment(events[scanned]);  // enough to check the guess of a whole history
      addresses.observe(events[scanned]);
    }
  }

  // The device's recorded addresses ran out: gives it those found since, reading further into the
  // trace while there are none; false at its end. The device sees the same addresses in the same
  // order as from a scan of the whole trace up front, only later.
  bool read_more(SimulatedDevice& device) {
    for (;;) {
      const bool found = given_segments < addresses.segments.size() ||
                         given_reservations < addresses.reservations.size();
      for (; given_segments < addresses.segments.size(); ++given_segments)
        device.add_recorded_segment(addresses.segments[given_segments]);
      for (; given_reservations < addresses.reservations.size(); ++given_reservations)
        device.add_recorded_reservation(addresses.reservations[given_reservations]);
      if (found) return true;
      if (!feed.wait_for(scanned)) return false;
      scan_to(feed.published());
    }
  }

  EventFeed& feed;
  uint64_t scanned = 0;  // events the scans have seen
  HistoryScan history;
  RecordedAddresses addresses;
  size_t given_segments = 0;  // addresses handed to the device
  size_t given_reservations = 0;
  AllocConf conf;
  std::optional<ReplayResult> result;  // set when the replay ran to the end
};

bool StreamedReplay::supports(const ReplayOptions& options) {
  return !options.segment_addresses && options.empty_cache_before.empty();
}

StreamedReplay::StreamedReplay(const ReplayOptions& options, std::string source)
    : options_(options),
      source_(std::move(source)),
      run_(std::make_unique<Run>(feed_, options.capacity)) {
  run_->conf = options_.alloc_conf.value_or(AllocConf{});
  feed_.attach();  // before the decoder can publish or abandon
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error&) {
    feed_.detach();  // no second thread to be had: finish() replays after the reading
  }
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
    // Without a what-if's settings the trace's are taken to be the defaults, checked at the end.
    // Without a release named, the trace's fields are taken to tell none, checked at the end.
    ReplayStart start{
        source_, run_->conf, options_.torch_version.value_or(kDefaultTorchVersion), {}, 0};
    start.recorded_settings = !options_.alloc_conf;
    SimulatedDevice device(options_.capacity, context_bytes(options_));
    use_recorded_addresses(device, start.initial, RecordedAddresses(options_.capacity), options_);
    if (options_.use_recorded_addresses) {
      device.read_recorded_with([this, &device] { return run_->read_more(device); });
    }
    const Run::Events events(*run_);
    RequestStream<Run::Events> requests(events, start.initial);
    ReplayResult result = run_replay(events, requests, start, options_, {device, &device});
    run_->scan_to(run_->feed.published());  // the replay read to the end: the feed has finished
    run_->result = std::move(result);
  } catch (...) {
    // Abandoned, or a replay error: the ordinary replay after the decoding says what is wrong.
  }
  feed_.detach();
}

ReplayResult StreamedReplay::finish(const Trace& trace) {
  if (!thread_.joinable()) return replay(trace, options_);
  if (!feed_.finished()) feed_.abandon();  // not a snapshot, or not its events
  thread_.join();
  Run& run = *run_;
  // The guess: the same events, the same settings, a whole history, no device size recorded,
  // device 0 (whose index the OOM message names).
  streamed_ =
      run.result && trace.device == 0 && feed_.events() == trace.events.data() &&
      feed_.published() == trace.events.size() &&
      (options_.alloc_conf || trace.settings.value_or(AllocConf{}) == run.conf) &&
      run.history.whole(trace) && trace.private_pools.empty() && !trace.calls_marked_from &&
      trace.mem_pool_options.empty() && !trace.device_memory &&
      replay_torch_version(trace, options_.torch_version) ==
          run.result->setup.torch_version;  // a recorder's calls and release runs: replayed anew
  // Settings given that are the recorded ones: the streamed replay took them for a what-if's,
  // which tells its runs of releases apart otherwise, where it met any.
  if (streamed_ && options_.alloc_conf && trace.settings.value_or(AllocConf{}) == run.conf &&
      run.result->outcome.releases_before_new_segment > 0) {
    streamed_ = false;
  }
  if (!streamed_) return replay(trace, options_);
  ReplayResult result = std::move(*run.result);
  result.outcome.events_total = trace.events.size();
  result.outcome.recorded_ooms = run.addresses.ooms;
  return result;
}

}  // namespace allocsim
