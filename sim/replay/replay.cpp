#include "sim/replay/replay.hpp"

#include "sim/replay/capacity_from_layout.hpp"

#include <optional>

#include "sim/replay/detail/replay_run.hpp"

namespace allocsim {

void check_replayable(const AllocConf& conf) {
  if (conf.use_malloc_async) {
    throw AllocConfError(
        "backend:cudaMallocAsync is the CUDA driver's own allocator; allocsim simulates the "
        "native caching allocator only");
  }
}

RunAddresses run_addresses(const Trace& run, uint64_t capacity) {
  replay_engine::RecordedAddresses addresses(capacity);
  for (const TraceEvent& e : run.events) addresses.observe(e);
  return {std::move(addresses.segments), std::move(addresses.reservations)};
}

uint64_t replay_capacity(const Trace& trace, const ReplayOptions& options) {
  if (!options.capacity_from_layout) return options.capacity;
  if (trace.device_memory) return *trace.device_memory;
  return capacity_from_layout(trace, options.capacity,
                              trace.settings.value_or(AllocConf{}).large_segment_size)
      .value_or(options.capacity);
}

TorchVersion replay_torch_version(const Trace& trace, std::optional<TorchVersion> given) {
  return given.value_or(trace.torch_version.value_or(kDefaultTorchVersion));
}

namespace {

// The decoded trace's requests, made as the replay goes, on `real` or, where that is null, on a
// simulated device with the recorded addresses.
ReplayResult replay_decoded(const Trace& trace, const ReplayOptions& given, Device* real,
                            BlockObserver* blocks) {
  using namespace replay_engine;
  std::optional<ReplayOptions> on_layout_card;
  if (!real && given.capacity_from_layout) {
    if (const uint64_t c = replay_capacity(trace, given); c != given.capacity) {
      on_layout_card = given;
      on_layout_card->capacity = c;
    }
  }
  const ReplayOptions& options = on_layout_card ? *on_layout_card : given;
  const AllocConf conf = replay_conf(trace, options);
  const PrePass scans(trace, options.capacity);
  const ReplayStart start = replay_start(trace, conf, scans, options);
  std::optional<SimulatedDevice> simulated;
  if (!real) {
    simulated.emplace(options.capacity, context_bytes(options));
    use_recorded_addresses(*simulated, start.initial, scans.addresses, options);
  }
  const ReplayDevice device = real ? ReplayDevice{*real} : ReplayDevice{*simulated, &*simulated};
  const DecodedEvents events(trace.events);
  RequestStream<DecodedEvents> requests(events, start.initial);
  ReplayResult result = run_replay(events, requests, start, options, device, blocks);
  result.outcome.events_total = trace.events.size();
  result.setup.capacity_from_layout = on_layout_card.has_value() && !trace.device_memory;
  return result;
}

}  // namespace

ReplayResult replay(const Trace& trace, const ReplayOptions& options) {
  return replay_decoded(trace, options, nullptr, nullptr);
}

ReplayResult replay_on(Device& device, const Trace& trace, const ReplayOptions& options,
                       BlockObserver* blocks) {
  return replay_decoded(trace, options, &device, blocks);
}

}  // namespace allocsim
