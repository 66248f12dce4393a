// The replay engine: a source of requests run through the allocator core on the device the caller
// gives, with an observer told of each request. Internal to sim/replay/: replay.cpp,
// prepared_trace.cpp and streamed_replay.cpp build the device and the requests and call
// run_replay().
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/simulated_device.hpp"
#include "core/caching_allocator.hpp"
#include "core/probe/replay_probe.hpp"
#include "core/size_rounding.hpp"
#include "sim/replay/detail/pre_pass.hpp"
#include "sim/replay/detail/replay_observers.hpp"
#include "sim/replay/detail/request_stream.hpp"
#include "sim/replay/initial_state.hpp"
#include "sim/replay/memory_breakdown.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim::replay_engine {

// What a replay takes besides its events, requests, options and device.
struct ReplayStart {
  std::string source;  // the trace's name, for errors
  AllocConf conf;
  TorchVersion torch_version;
  InitialState initial;  // the state at the first event (a history that starts mid-run)
  uint64_t recorded_ooms = 0;
  int device = 0;  // the trace's CUDA device
  // CUDA graphs' private pools, where the trace used them (Trace::private_pools, request_pools).
  std::span<const PrivatePoolUse> private_pools = {};
  std::span<const uint16_t> request_pools = {};
  std::span<const uint8_t> request_pool_guessed = {};  // empty: every pool known
  // Under the settings the trace was recorded with (not a what-if's): its runs of segment
  // releases are told apart (empty_cache() or a malloc's own) by what the recorded settings do.
  bool recorded_settings = true;
  // The trace records segment operations (a snapshot; an RMM log does not): where it shows none
  // before an OOM, the malloc released none.
  bool records_segments = true;
  // Where allocsim's recorder marked every call (Trace::calls_marked_from, recorded_calls): the
  // calls are made where they were, and a run of releases it did not mark as an empty_cache()'s
  // after its first marked event was the malloc's own.
  std::optional<uint64_t> calls_marked_from = std::nullopt;
  std::span<const RecordedCall> recorded_calls = {};
  std::span<const std::string> settings_changes = {};  // Trace::settings_changes
  // The recorder marked every capture (Trace::capture_marks): an OOM it did not mark came outside
  // any capture, where PyTorch retries.
  bool captures_marked = false;
  std::span<const MemPoolOptions> mem_pool_options = {};  // Trace::mem_pool_options
};

// What a replay of a decoded `trace` under `conf` starts from, `scans` of it made.
inline ReplayStart replay_start(const Trace& trace, const AllocConf& conf, const PrePass& scans,
                                const ReplayOptions& options) {
  return ReplayStart{
      trace.source,
      conf,
      replay_torch_version(trace, options.torch_version),
      scans.initial_state(trace, conf),
      scans.addresses.ooms,
      trace.device,
      trace.private_pools,
      trace.request_pools,
      trace.request_pool_guessed,
      conf == trace.settings.value_or(AllocConf{}) && options.empty_cache_before.empty(),
      scans.addresses.records_segments(),
      trace.calls_marked_from,
      trace.recorded_calls,
      trace.settings_changes,
      !trace.capture_marks.empty(),
      trace.mem_pool_options};
}

// The settings a replay runs under: the what-if's, else the recorded ones.
inline AllocConf replay_conf(const Trace& trace, const ReplayOptions& options) {
  AllocConf conf = options.alloc_conf.value_or(trace.settings.value_or(AllocConf{}));
  check_replayable(conf);  // before any work
  if (options.alloc_conf) check_known_to(conf, replay_torch_version(trace, options.torch_version));
  return conf;
}

// The device a replay runs on. `simulated` is the same device when it is allocsim's own: a
// recorded OOM then calibrates its context memory, and allocations are checked against the
// recorded addresses it hands out.
struct ReplayDevice {
  Device& device;
  SimulatedDevice* simulated = nullptr;
};

// A simulated device for a replay under `options`: its capacity and context memory, and the
// addresses it hands out (the restored segments', then the trace's, or a GPU run's).
inline void use_recorded_addresses(SimulatedDevice& device, const InitialState& initial,
                                   const RecordedAddresses& addresses,
                                   const ReplayOptions& options) {
  if (options.segment_addresses) {
    device.use_recorded_segments(*options.segment_addresses);
    device.use_recorded_reservations(options.reservation_addresses);
    return;
  }
  // The segments that existed before the trace began come first, at their own addresses (they
  // are restored there even where the rest is placed by the address model); so do the
  // reservations of expandable segments mapped then, in the order they are restored.
  std::vector<RecordedSegment> recorded;
  std::vector<uint64_t> reservations;
  for (const InitialSegment& seg : initial.segments) {
    if (!seg.expandable) {
      recorded.push_back({seg.address, seg.size});
    } else if (std::find(reservations.begin(), reservations.end(), seg.base) ==
               reservations.end()) {
      reservations.push_back(seg.base);
    }
  }
  if (options.use_recorded_addresses) {
    recorded.insert(recorded.end(), addresses.segments.begin(), addresses.segments.end());
    reservations =
        reservations.empty() ? addresses.reservations : addresses.reservations_after(reservations);
  }
  device.use_recorded_segments(std::move(recorded));
  device.use_recorded_reservations(std::move(reservations));
}

inline uint64_t context_bytes(const ReplayOptions& options) {
  return options.context_bytes.value_or(kDefaultContextBytes);
}

// One replay: `requests` (RequestStream or RequestCursor), the requests of `events`, through a
// CachingAllocator on `device`, `observer` told of each (NoObserver: nothing watches, and the
// loop has no tests for it).
template <class Observer, class Events, class Requests>
class ReplayRun {
 public:
  ReplayRun(const Events& events, Requests& requests, const ReplayStart& start,
            const ReplayOptions& options, ReplayDevice device, Observer& observer)
      : events_(events),
        requests_(requests),
        start_(start),
        options_(options),
        device_(device),
        observer_(observer),
        allocator_(device.device, allocator_options(start, options)),
        stats_(allocator_.stats()),
        check_addresses_(options.use_recorded_addresses && device.simulated &&
                         !options.segment_addresses),
        pool_users_(start.private_pools.size(), 0) {}

  // Runs every request and takes the report's figures. Once only.
  ReplayResult run() {
    setup();
    restore_initial();
    requests_.run([this](const Request& r)
                      __attribute__((always_inline)) { return on_request(r); });
    // A replay stopped at an OOM still reports every free of a block it never saw.
    requests_.run([](const Request&) { return true; });
    finish();
    return std::move(result_);
  }

  // For observers.
  const CachingAllocator& allocator() const { return allocator_; }
  CachingAllocator& allocator() { return allocator_; }
  const Events& events() const { return events_; }
  const std::vector<SlotRecord>& slots() const { return slots_; }
  const std::vector<uint32_t>& pending() const { return pending_; }
  bool synced() const { return stats_.num_sync_all_streams != syncs_seen_; }

 private:
  static AllocatorOptions allocator_options(const ReplayStart& start,
                                            const ReplayOptions& options) {
    check_replayable(start.conf);
    AllocatorOptions o;
    o.conf = start.conf;
    o.caching = !options.no_caching;
    o.record_device_ops = options.record_device_ops;
    o.device_index = start.device;
    o.torch_version = start.torch_version;
    return o;
  }

  void setup() {
    result_.setup.conf = start_.conf;
    result_.setup.torch_version = start_.torch_version;
    result_.setup.torch_version_given = options_.torch_version.has_value();
    result_.setup.capacity = options_.capacity;
    result_.setup.context_bytes = context_bytes(options_);
    result_.outcome.recorded_ooms = start_.recorded_ooms;
    result_.setup.memory_fraction = options_.memory_fraction;
    if (!result_.setup.memory_fraction && result_.setup.conf.per_process_memory_fraction) {
      result_.setup.memory_fraction = result_.setup.conf.per_process_memory_fraction;
    }
    if (options_.memory_fraction) allocator_.set_memory_fraction(*options_.memory_fraction);
    if (options_.memory_limit) allocator_.set_memory_limit(*options_.memory_limit);
    for (const MemPoolOptions& o : start_.mem_pool_options) {
      if (o.use_on_oom) allocator_.set_use_on_oom(o.pool, true);
      if (o.no_split) allocator_.set_no_split(o.pool);
    }
    result_.setup.adds_empty_cache = !options_.empty_cache_before.empty();
    if (result_.setup.adds_empty_cache) next_added_empty_cache_ = options_.empty_cache_before[0];
    if (!start_.recorded_calls.empty()) next_recorded_call_ = start_.recorded_calls[0].event;
    slots_.resize(requests_.slots());
  }

  // The segments that existed before the trace began, with their blocks, in the slots the
  // requests gave them.
  void restore_initial() {
    const InitialState& initial = start_.initial;
    if (!device_.simulated && !initial.segments.empty()) {
      throw InputError(start_.source +
                       ": the history starts mid-run; its first segments cannot be recreated at "
                       "their recorded addresses on a real device");
    }
    uint32_t restored = 0;
    if (device_.simulated) device_.simulated->set_overcommit(true);
    for (const InitialSegment& seg : initial.segments) {
      // A private pool's segment: the pool begins with it, used by the graphs captured into it
      // before the trace, which are gone when its segments are released as the trace records.
      MempoolId pool{};
      if (seg.pool != 0 && seg.pool <= pool_users_.size()) {
        pool = start_.private_pools[seg.pool - 1].id;
        if (pool_users_[seg.pool - 1] == 0) {
          allocator_.begin_allocate_to_pool(pool, seg.stream);
          allocator_.end_allocate_to_pool(pool);
          pool_users_[seg.pool - 1] = 1;
        }
      }
      const auto ids =
          seg.expandable ? probe_.restore_expandable_range(seg.base, seg.address, seg.size,
                                                           seg.stream, seg.small, seg.blocks, pool)
                         : probe_.restore_segment(seg.address, seg.size, seg.stream, seg.small,
                                                  seg.blocks, pool);
      if (!ids) {
        throw InputError(start_.source + ": cannot reconstruct the segment at " +
                         std::to_string(seg.address) +
                         " that existed before the trace's first event");
      }
      for (size_t i = 0; i < ids->size(); ++i) {
        slots_[restored].block = (*ids)[i];
        if (seg.blocks[i].pending_free) {  // restored as freed, its uses outstanding
          slots_[restored].state = SlotState::kPending;
          pending_.push_back(restored);
        } else {
          slots_[restored].state = SlotState::kLive;
        }
        ++restored;
      }
    }
    result_.restored.segments = initial.segments.size();
    result_.restored.blocks = restored;
    result_.restored.blocks_of_assumed_size = initial.blocks_of_assumed_size;
    if (device_.simulated) {
      device_.simulated->set_overcommit(false);
      result_.restored.over_capacity = device_.simulated->overcommitted();
      result_.restored.reserved_bytes =
          static_cast<uint64_t>(stats_.reserved_bytes[kAggregate].current);
    }
    // The peaks so far: a peak no event exceeds was there before event 0.
    allocated_peak_seen_ = stats_.allocated_bytes.current();
    reserved_peak_seen_ = stats_.reserved_bytes.current();
    result_.fragmentation.reserved_unallocated_at_peak =
        static_cast<uint64_t>(reserved_peak_seen_ - allocated_peak_seen_);
    observer_.started(*this, restored);
  }

  // One request; false stops the replay. Inlined where the requests are made: a RequestStream
  // makes its allocs and immediate frees at places of their own, where the tests of their kind
  // below fold away.
  [[gnu::always_inline]] bool on_request(const Request& r) {
    if constexpr (Observer::kWatches) {
      if (r.event_index >= next_added_empty_cache_) [[unlikely]]
        add_empty_cache(r.event_index);
      // The recorder's calls (run_replay watches a trace that has any). One test for both: a call
      // due before this request, or before the completion a free request stands for.
      if (r.event_index + 1 >= next_recorded_call_) [[unlikely]] {
        if (r.kind == Request::kFree && r.event_index + 1 == next_recorded_call_) {
          observer_.before(*this, r);
          free_around_recorded_calls(r);
          observer_.after(*this, r);
          return true;
        }
        if (r.event_index >= next_recorded_call_) make_recorded_calls(r);
      }
    }
    if (r.kind == Request::kAlloc && requests_.slots() > slots_.size()) {  // a new slot
      slots_.resize(requests_.slots());
    }
    observer_.before(*this, r);
    switch (r.kind) {
      case Request::kAlloc:
        on_alloc(r);
        break;
      case Request::kOom:
        on_recorded_oom(r);
        break;
      case Request::kFree:
      case Request::kFreeDeferred:
        on_free(r);
        break;
      case Request::kEmptyCache:
        if (r.event_index == recorded_empty_cache_at_) break;  // made as the recorder marked it
        empty_cache_releasing_pools(r.event_index);
        ++result_.outcome.inferred_empty_cache_calls;
        break;
      case Request::kMaybeEmptyCache:
        // The pools this run gave back go back, also where a recorded call made the run's first
        // releases (a MemPool's deletion, whose releases the malloc's own retry continued). The
        // order stays set: where the run was the malloc's own, its retry, still to come,
        // releases the pools.
        if (!pool_users_.empty()) release_pools(r.event_index);
        if (r.event_index == recorded_empty_cache_at_) break;
        // A recorder that marks every empty_cache() did not mark this run: the malloc's own.
        if (start_.calls_marked_from && r.event_index > *start_.calls_marked_from) break;
        on_maybe_empty_cache(r);
        break;
      case Request::kCompleteFree:
        on_complete_free(r);
        break;
    }
    observer_.after(*this, r);
    // A free lowers allocated and leaves reserved and the synchronisations alone: it skips their
    // checks, and only a failed alloc stops the replay.
    if (r.kind == Request::kFree || r.kind == Request::kFreeDeferred ||
        r.kind == Request::kCompleteFree) {
      return true;
    }
    note_sync_and_peaks(r);
    if (!result_.outcome.stopped_at_oom) return true;
    result_.outcome.events_replayed = r.event_index + 1;
    return false;
  }

  [[gnu::always_inline]] void on_alloc(const Request& r) {
    SlotRecord& slot = slots_[r.slot];
    slot.event = r.event_index;
    // A request of a CUDA graph's capture: served from its private pool, as the capture was on.
    const uint16_t pool = pool_users_.empty() ? 0 : start_.request_pools[r.event_index];
    if (pool != 0) [[unlikely]] {
      allocator_.begin_allocate_to_pool(start_.private_pools[pool - 1].id, r.stream);
      ++pool_users_[pool - 1];
    }
    const BlockId b = allocator_.malloc(r.size, r.stream);
    if (pool != 0) [[unlikely]]
      allocator_.end_allocate_to_pool(start_.private_pools[pool - 1].id);
    if (b == kNoBlock) {
      note_oom(r, false);
      slots_[r.slot].state = SlotState::kFailed;
      if (options_.on_oom == OnOom::kStop) result_.outcome.stopped_at_oom = true;
      return;
    }
    slot.block = b;
    slot.state = SlotState::kLive;
    const uint64_t address = allocator_.block_address(b);
    observer_.allocated(*this, r.slot, address, r.event_index);
    if (check_addresses_) {
      ++result_.addresses.checks;
      if (address != events_[r.event_index].addr) {
        if (result_.addresses.mismatches++ == 0) {
          result_.addresses.first_mismatch_event = r.event_index;
          result_.addresses.first_mismatch_address = address;
        }
      }
    }
  }

  // The real run ran out of memory here and the program went on.
  void on_recorded_oom(const Request& r) {
    const int64_t device_allocs = stats_.num_device_alloc;
    // A request of a capture, where the inference placed it in one: its private pool's, with no
    // full release (see on_alloc).
    const uint16_t pool = pool_users_.empty() ? 0 : start_.request_pools[r.event_index];
    if (pool == 0 && !pool_users_.empty() && !start_.captures_marked &&
        !probe_.holds_releasable_segment() &&
        result_.outcome.recorded_ooms_capture_unknown++ == 0) {
      result_.outcome.first_recorded_oom_capture_unknown = r.event_index;
    }
    if (pool != 0) [[unlikely]] {
      allocator_.begin_allocate_to_pool(start_.private_pools[pool - 1].id, r.stream);
      ++pool_users_[pool - 1];
    }
    const BlockId b = pool == 0 && release_skipped(r.event_index)
                          ? probe_.malloc_in_unknown_capture(r.size, r.stream)
                          : allocator_.malloc(r.size, r.stream);
    if (pool != 0) [[unlikely]]
      allocator_.end_allocate_to_pool(start_.private_pools[pool - 1].id);
    if (b == kNoBlock) {
      note_oom(r, true);
    } else {
      // The replay departs here: it follows the recording, which holds no block for the request,
      // nor the segment a malloc took for it.
      if (result_.outcome.recorded_ooms_not_reproduced++ == 0)
        result_.outcome.first_recorded_oom_not_reproduced = r.event_index;
      allocator_.free(b);
      if (stats_.num_device_alloc > device_allocs) probe_.release_whole_free_segment(b);
    }
  }

  // Whether the recorded malloc that ran out of memory at event i skipped its full release, as
  // PyTorch does while a CUDA graph is captured (into a pool no recorded request may show): it
  // gave back nothing first, though the replay, holding what the run held, has memory to give.
  bool release_skipped(uint64_t i) const {
    if (!start_.records_segments || i == 0) return false;
    const TraceAction before = events_[i - 1].action;
    if (before == TraceAction::kSegmentFree || before == TraceAction::kSegmentUnmap) return false;
    if (!probe_.holds_releasable_segment()) return false;
    int64_t recorded = static_cast<int64_t>(result_.restored.reserved_bytes);
    for (uint64_t k = 0; k < i; ++k) {
      const TraceEvent& e = events_[k];
      if (e.action == TraceAction::kSegmentAlloc || e.action == TraceAction::kSegmentMap)
        recorded += static_cast<int64_t>(e.size);
      if (e.action == TraceAction::kSegmentFree || e.action == TraceAction::kSegmentUnmap)
        recorded -= static_cast<int64_t>(e.size);
    }
    return recorded == stats_.reserved_bytes[kAggregate].current;
  }

  [[gnu::always_inline]] void on_free(const Request& r) {
    SlotRecord& slot = slots_[r.slot];
    if (slot.state != SlotState::kLive) return;  // its alloc failed in this replay
    observer_.freeing(*this, r.slot);
    if (r.kind == Request::kFree) {
      allocator_.free(slot.block);
      slot.state = SlotState::kDone;
    } else {
      allocator_.free(slot.block, /*pending_stream_uses=*/true);
      slot.state = SlotState::kPending;
      pending_.push_back(r.slot);
    }
  }

  [[gnu::always_inline]] void on_complete_free(const Request& r) {
    SlotRecord& slot = slots_[r.slot];
    if (slot.state == SlotState::kLive) {
      // Its free was requested before the trace began: it completes now.
      observer_.freeing(*this, r.slot);
      allocator_.free(slot.block);
      slot.state = SlotState::kDone;
    } else if (slot.state == SlotState::kPending) {
      allocator_.complete_deferred_free(slot.block);
      slot.state = SlotState::kDone;
      std::erase(pending_, r.slot);  // the slot may be reused before the next synchronisation
    }
  }

  // Private pools whose segments this run of releases gave back: their graphs were gone by then.
  // Each request routed to a pool counted as one user of it. The pools go back in the order the
  // recorded releases show (see set_pool_release_order).
  void release_pools(uint64_t run) {
    std::vector<uint64_t> addresses;
    for_each_recorded_release(run, [&](const TraceEvent& e) { addresses.push_back(e.addr); });
    probe_.set_pool_release_order(addresses);
    for (size_t p = 0; p < pool_users_.size(); ++p) {
      if (start_.private_pools[p].released_at != run) continue;
      for (; pool_users_[p] > 0; --pool_users_[p])
        allocator_.release_pool(start_.private_pools[p].id);
    }
  }

  void empty_cache() {
    allocator_.empty_cache();
    ++result_.outcome.inferred_empty_cache_calls;
  }

  // torch.cuda.empty_cache() at the run of releases of `r`: the private pools whose graphs were
  // gone go back too, in the order the run records.
  void empty_cache_releasing_pools(uint64_t run, bool during_capture = false) {
    if (!pool_users_.empty()) release_pools(run);
    if (during_capture) {
      allocator_.empty_cache_during_capture();
    } else {
      allocator_.empty_cache();
    }
    if (!pool_users_.empty()) probe_.set_pool_release_order({});
  }

  // A torch.cuda.MemPool deleted: its destructor releases the pool's use (the MemPool's, here
  // each request the replay routed to it) and empties that pool's cache alone. Its synchronisation
  // waits for the pool's own deferred frees: the others stay pending.
  void free_mem_pool(MempoolId id) {
    size_t p = 0;
    while (p < pool_users_.size() && start_.private_pools[p].id != id) ++p;
    if (p < pool_users_.size() && pool_users_[p] > 0) {
      for (; pool_users_[p] > 0; --pool_users_[p]) allocator_.release_pool(id);
    } else if (!allocator_.has_pool(id)) {  // a MemPool that served no request
      allocator_.create_pool(id);
      allocator_.release_pool(id);
    }
    allocator_.empty_cache(id);
    syncs_seen_ = stats_.num_sync_all_streams;
  }

  // The calls allocsim's recorder marked before the event of `r` (Trace::recorded_calls). A cap
  // the caller gave replaces the recorded starting cap, and with replace_recorded_caps every
  // recorded change too.
  [[gnu::noinline]] void make_recorded_calls(const Request& r) {
    const auto& calls = start_.recorded_calls;
    const bool cap_given = options_.memory_fraction || options_.memory_limit;
    for (;
         recorded_calls_made_ < calls.size() && calls[recorded_calls_made_].event <= r.event_index;
         ++recorded_calls_made_) {
      const RecordedCall& call = calls[recorded_calls_made_];
      switch (call.kind) {
        case RecordedCall::kEmptyCache:
          // Its releases may follow another call's in one run (a MemPool deleted just before):
          // the pools whose graphs were gone by it go back with its releases
          // (PrivatePoolUse::released_at).
          empty_cache_releasing_pools(call.event, call.during_capture);
          // Its synchronisation completed the deferred frees (none while a pool took requests).
          if (!call.during_capture) complete_pending_frees();
          // The run of releases it made, where the trace records one here.
          if (call.event == r.event_index) recorded_empty_cache_at_ = r.event_index;
          break;
        case RecordedCall::kSetMemoryFraction:
          if (cap_given && (call.starting_cap || options_.replace_recorded_caps)) {
            if (call.starting_cap) {
              result_.outcome.recorded_starting_cap_replaced = true;
            } else {
              ++result_.outcome.recorded_limit_changes_replaced;
            }
            continue;
          }
          allocator_.set_memory_fraction(call.memory_fraction);
          result_.setup.memory_fraction = call.memory_fraction;
          break;
        case RecordedCall::kResetPeakStats:
          allocator_.reset_peak_stats();
          break;
        case RecordedCall::kResetAccumulatedStats:
          allocator_.reset_accumulated_stats();
          syncs_seen_ = stats_.num_sync_all_streams;
          break;
        case RecordedCall::kSetAllocatorSettings:
          // A what-if's settings replace the run's own changes too.
          if (options_.alloc_conf) {
            ++result_.outcome.recorded_settings_changes_replaced;
            continue;
          }
          change_settings(start_.settings_changes[call.settings]);
          break;
        case RecordedCall::kFreeMemPool:
          free_mem_pool(call.pool);
          // The run of releases its destructor made, where the trace records one here.
          if (call.event == r.event_index) recorded_empty_cache_at_ = r.event_index;
          break;
      }
      ++result_.outcome.recorded_calls_made;
    }
    next_recorded_call_ =
        recorded_calls_made_ < calls.size() ? calls[recorded_calls_made_].event : kNever;
  }

  // A settings string the run set, applied over the settings in force as PyTorch applies it; one
  // PyTorch refused changed nothing there either.
  void change_settings(const std::string& text) {
    try {
      allocator_.change_settings(change_alloc_conf(allocator_.conf(), text, start_.torch_version));
    } catch (const AllocConfError&) {
      ++result_.outcome.recorded_settings_refused;
    }
  }

  // A free whose completion, the next entry, came after calls the recorder marked: its block
  // waited for another stream (record_stream), and the next malloc found its use over after those
  // calls. Freed, the calls made, then completed, as PyTorch did (a stats reset in between counts).
  [[gnu::noinline]] void free_around_recorded_calls(const Request& r) {
    SlotRecord& slot = slots_[r.slot];
    Request completion = r;
    ++completion.event_index;
    if (slot.state != SlotState::kLive) {  // its alloc failed in this replay
      make_recorded_calls(completion);
      return;
    }
    observer_.freeing(*this, r.slot);
    allocator_.free(slot.block, /*pending_stream_uses=*/true);
    make_recorded_calls(completion);
    // (An empty_cache() among the calls completed it already.)
    if (allocator_.is_pending_free(slot.block)) allocator_.complete_deferred_free(slot.block);
    slot.state = SlotState::kDone;
  }

  // The what-if's torch.cuda.empty_cache() calls due by `event`: each synchronises (every
  // deferred free completes) and gives back every cached segment.
  [[gnu::noinline]] void add_empty_cache(uint64_t event) {
    const std::vector<uint64_t>& at = options_.empty_cache_before;
    while (added_empty_cache_calls_ < at.size() && at[added_empty_cache_calls_] <= event) {
      allocator_.empty_cache();
      ++added_empty_cache_calls_;
    }
    result_.outcome.empty_cache_calls_added = added_empty_cache_calls_;
    next_added_empty_cache_ =
        added_empty_cache_calls_ < at.size() ? at[added_empty_cache_calls_] : kNever;
    complete_pending_frees();
  }

  // The allocator synchronised: every deferred free has completed.
  void complete_pending_frees() {
    syncs_seen_ = stats_.num_sync_all_streams;
    for (uint32_t s : pending_) {
      if (slots_[s].state == SlotState::kPending) slots_[s].state = SlotState::kDone;
    }
    pending_.clear();
  }

  // Segments freed just before a malloc that got a new segment (or ran out of memory): its own
  // slow path freed them, or empty_cache() did. The slow path frees none when a cached block
  // serves it, and otherwise a known set in a known order (its garbage collection's,
  // release_available_cached_blocks', then, if still refused, every cached segment's). A run
  // that is every cached segment but not that set was empty_cache(). Where the two are the same
  // (the retry's full release), the trace reads the same either way: taken as the retry.
  void on_maybe_empty_cache(const Request& r) {
    ++result_.outcome.releases_before_new_segment;
    const auto recorded = recorded_releases(r.event_index);
    // Unmaps followed by an alloc with no new pages: the retry of a malloc no cached block could
    // serve (an expandable segment's alloc_block refused), else empty_cache().
    const uint64_t after = r.event_index + recorded.size();
    if (events_.has(after) && events_[after].action == TraceAction::kAlloc) {
      const bool ordinary_pool = pool_users_.empty() || start_.request_pools[after] == 0;
      if (!ordinary_pool || probe_.has_free_block_for(r.size, r.stream) ||
          !could_be_refused(r, /*collects=*/false)) {
        empty_cache();
      } else if (start_.recorded_settings) {
        note_read_as_retry(r);
      }
      return;
    }
    if (start_.recorded_settings && !to_private_pool(after)) {
      if (probe_.has_free_block_for(r.size, r.stream)) {
        empty_cache();
        return;
      }
      const auto own = probe_.slow_path_release_preview(r.size, r.stream);
      const auto all = probe_.empty_cache_preview();
      if (own && all) {
        if (recorded == *own) {
          if (recorded == *all) note_read_as_retry(r);
          return;
        }
        if (recorded == *all) {
          empty_cache();
          return;
        }
      }
    }
    // Otherwise (the run is neither, as under a what-if's cap; other settings than the
    // recorded; expandable segments; a request of a private pool): the malloc's own where it could
    // have been refused or collected garbage. Garbage collection gives back whole cudaMalloc'ed
    // segments only, never expandable ones. A capture's malloc frees nothing (a capture does not
    // permit it): before one, the run was empty_cache().
    const AllocConf& conf = allocator_.conf();
    const bool own =
        could_be_refused(r, conf.garbage_collection_threshold > 0 && !conf.expandable_segments);
    if (to_private_pool(after)) {
      if (own && !to_private_pool(after, /*known=*/true) &&
          result_.outcome.releases_before_guessed_capture++ == 0) {
        result_.outcome.first_release_before_guessed_capture = r.event_index;
      }
      empty_cache();
    } else if (!own) {
      empty_cache();
    } else if (start_.recorded_settings) {
      note_read_as_retry(r);
    }
  }

  // A run of releases taken as the malloc's own retry that empty_cache() could have made as well.
  void note_read_as_retry(const Request& r) {
    if (result_.outcome.releases_read_as_retry++ == 0)
      result_.outcome.first_release_read_as_retry = r.event_index;
  }

  // Whether the request that follows event `i` (the first alloc or OOM from it on) went to a
  // private pool, as far as the trace shows (with `known`: not by a guess of its segment's pool).
  bool to_private_pool(uint64_t i, bool known = false) const {
    if (pool_users_.empty()) return false;
    while (events_.has(i) && events_[i].action != TraceAction::kAlloc &&
           events_[i].action != TraceAction::kOom) {
      ++i;
    }
    if (!events_.has(i) || start_.request_pools[i] == 0) return false;
    return !known || start_.request_pool_guessed.empty() || start_.request_pool_guessed[i] == 0;
  }

  // Whether the malloc of `r`'s size could have been refused a new segment (the cap, which
  // counts a whole segment's size even where expandable pages are mapped, or the device), or,
  // with `collects`, could have collected garbage under the cap.
  bool could_be_refused(const Request& r, bool collects) const {
    const AllocConf& conf = allocator_.conf();
    const uint64_t need =
        allocation_size(round_size(r.size, conf.roundup_power2_divisions), conf.large_segment_size);
    const auto allowed = allocator_.allowed_memory_maximum();
    const auto reserved = static_cast<uint64_t>(stats_.reserved_bytes[kAggregate].current);
    return (allowed && (reserved + need > *allowed || collects)) ||
           device_.device.mem_get_info().free < need;
  }

  // The run of segment releases that starts at event i (sizes and streams: a replay may place
  // segments elsewhere than the recording).
  std::vector<ReplayProbe::SegmentRelease> recorded_releases(uint64_t i) const {
    std::vector<ReplayProbe::SegmentRelease> releases;
    for_each_recorded_release(i, [&](const TraceEvent& e) {
      releases.push_back({e.size, e.stream});
    });
    return releases;
  }

  // Visit(event) for each release of the run of them that starts at event i.
  template <typename Visit>
  void for_each_recorded_release(uint64_t i, Visit visit) const {
    for (; events_.has(i); ++i) {
      const TraceEvent& e = events_[i];
      if (e.action != TraceAction::kSegmentFree && e.action != TraceAction::kSegmentUnmap) break;
      visit(e);
    }
  }

  void note_oom(const Request& r, bool recorded) {
    ++result_.outcome.ooms;
    if (recorded) {
      ++recorded_ooms_seen_;
      last_recorded_oom_ = r.event_index;
    }
    result_.outcome.oom_events.push_back({r.event_index, r.size, recorded});
    // Report the first OOM the real run did not have (it would have ended the program); failing
    // that, the last recorded one (the one the program ended with, or caught last).
    if (result_.outcome.oom && !(recorded && result_.outcome.oom->recorded)) return;
    OutOfMemory oom = *allocator_.last_oom();
    const uint64_t recorded_free = events_[r.event_index].device_free;
    SimulatedDevice* simulated = device_.simulated;
    if (recorded && simulated && !options_.context_bytes && recorded_free > 0 &&
        options_.capacity > recorded_free + simulated->used_bytes()) {
      // The real run told us how much memory sat outside PyTorch: use it from here on.
      simulated->set_context_bytes(options_.capacity - recorded_free - simulated->used_bytes());
      result_.setup.context_bytes = simulated->context_bytes();
      oom.device_free = recorded_free;
    }
    result_.outcome.oom = ReplayOom{r.event_index,
                                    oom.requested,
                                    oom.rounded,
                                    oom.alloc_size,
                                    r.stream,
                                    recorded,
                                    allocator_.largest_free_block(),
                                    oom.reserved - oom.allocated,
                                    oom.allocated,
                                    oom.reserved,
                                    oom.message(oom.device_total - oom.device_free)};
    result_.breakdown_at_oom = memory_breakdown(allocator_);
  }

  // After a request that may synchronise or grow the peaks (any but a free).
  [[gnu::always_inline]] void note_sync_and_peaks(const Request& r) {
    if (stats_.num_sync_all_streams != syncs_seen_) complete_pending_frees();  // an OOM retry
    const int64_t allocated = stats_.allocated_bytes.current();
    if (allocated > allocated_peak_seen_) {
      allocated_peak_seen_ = allocated;
      result_.allocated_peak_event = r.event_index + 1;
    }
    const int64_t reserved = stats_.reserved_bytes.current();
    if (reserved > reserved_peak_seen_) {
      reserved_peak_seen_ = reserved;
      result_.fragmentation.reserved_unallocated_at_peak =
          static_cast<uint64_t>(reserved - allocated);
    }
  }

  // The recorded OOMs the job caught and went on after: each that a later request in the trace
  // follows (an alloc, or another OOM), which is every one but the last, and the last where the
  // trace holds a request after it. Found once at the end, off the requests' path.
  void note_caught_ooms() {
    if (recorded_ooms_seen_ == 0) return;
    bool last_followed = false;
    for (uint64_t i = last_recorded_oom_ + 1; !last_followed && events_.has(i); ++i) {
      const TraceAction a = events_[i].action;
      last_followed = a == TraceAction::kAlloc || a == TraceAction::kOom;
    }
    result_.outcome.ooms_caught = recorded_ooms_seen_ - (last_followed ? 0 : 1);
    if (result_.outcome.oom && result_.outcome.oom->recorded && last_followed)
      result_.outcome.oom->caught = true;
  }

  // The report's figures, the blocks still held, and (release_all_at_end) their release.
  void finish() {
    if (!result_.outcome.stopped_at_oom) {
      result_.outcome.events_replayed = events_.size();  // known once all read
      // Calls the recorder saw after the last entry (the snapshot's own mark of its end).
      if (next_recorded_call_ != kNever)
        make_recorded_calls(Request{Request::kEmptyCache, 0, 0, 0, kNever - 1});
    }
    note_caught_ooms();
    result_.outcome.contradictions = requests_.contradictions();
    result_.outcome.pools_freed_holding_blocks = allocator_.freed_pools_holding_blocks().pools;
    result_.outcome.freed_pools_taken_over = allocator_.freed_pools_holding_blocks().taken_over;
    result_.stats = allocator_.stats();
    result_.device_ops = allocator_.device_ops();
    if (device_.simulated) {
      result_.addresses.segments_placed_by_model = device_.simulated->placed_by_model();
      result_.addresses.segments_placed =
          device_.simulated->recorded_hits() + result_.addresses.segments_placed_by_model;
    }
    const int64_t peak_reserved = result_.stats.reserved_bytes[kAggregate].peak;
    if (peak_reserved > 0) {
      result_.fragmentation.gmlake =
          1.0 - static_cast<double>(result_.stats.active_bytes()[kAggregate].peak) /
                    static_cast<double>(peak_reserved);
    }
    result_.fragmentation.largest_free_block_end = allocator_.largest_free_block();
    result_.breakdown_end = memory_breakdown(allocator_);
    const uint64_t device_room = options_.capacity > result_.setup.context_bytes
                                     ? options_.capacity - result_.setup.context_bytes
                                     : 0;
    result_.setup.limit_bytes =
        std::min(device_room, allocator_.allowed_memory_maximum().value_or(device_room));
    observer_.finished(*this, result_);
    const std::vector<uint32_t> held = held_slots();
    list_live_blocks(held);
    if (options_.release_all_at_end) release_all(held);
  }

  // The slots still holding a block (live, or freed with uses pending), in the order their blocks
  // were allocated (slots are reused, so not slot order).
  std::vector<uint32_t> held_slots() const {
    std::vector<uint32_t> held;
    for (uint32_t s = 0; s < slots_.size(); ++s) {
      if (slots_[s].state == SlotState::kLive || slots_[s].state == SlotState::kPending)
        held.push_back(s);
    }
    auto allocated_before = [&](uint32_t a, uint32_t b) {
      const uint64_t ea = slots_[a].event, eb = slots_[b].event;
      if ((ea == kBeforeTrace) != (eb == kBeforeTrace)) return ea == kBeforeTrace;
      return ea != eb ? ea < eb : a < b;  // restored blocks keep their restore order
    };
    std::sort(held.begin(), held.end(), allocated_before);
    return held;
  }

  void list_live_blocks(const std::vector<uint32_t>& held) {
    for (uint32_t s : held) {
      if (slots_[s].state != SlotState::kLive) continue;
      const uint64_t address = allocator_.block_address(slots_[s].block);
      const uint64_t size = allocator_.block_size(slots_[s].block);
      const uint64_t event = slots_[s].event;
      if (event == kBeforeTrace) {
        result_.live_blocks.push_back(LiveBlock{address, size, 0, 0, kBeforeTrace, kNoStack});
        continue;
      }
      const TraceEvent& e = events_[event];
      result_.live_blocks.push_back(LiveBlock{address, size, e.size, e.stream, event, e.stack});
    }
  }

  // Every block freed, every private pool released and the cache emptied, so that a real device
  // can be checked for leaks.
  void release_all(const std::vector<uint32_t>& held) {
    for (uint32_t s : held) {
      if (slots_[s].state == SlotState::kLive) {
        observer_.freeing(*this, s);
        allocator_.free(slots_[s].block);
      } else {
        allocator_.complete_deferred_free(slots_[s].block);
      }
    }
    // The graphs are gone too: their private pools give their segments back.
    for (size_t p = 0; p < pool_users_.size(); ++p) {
      for (; pool_users_[p] > 0; --pool_users_[p])
        allocator_.release_pool(start_.private_pools[p].id);
    }
    allocator_.empty_cache();
  }

  const Events& events_;
  Requests& requests_;
  const ReplayStart& start_;
  const ReplayOptions& options_;
  const ReplayDevice device_;
  Observer& observer_;
  CachingAllocator allocator_;
  ReplayProbe probe_{allocator_};  // what a replay asks of the allocator besides (core/probe/)
  const DeviceStats& stats_;
  const bool check_addresses_;
  ReplayResult result_;
  // Per slot, what the replay made of it: one record, so that a request touches one cache line.
  std::vector<SlotRecord> slots_;
  std::vector<uint32_t> pending_;  // slots with a deferred free in flight
  int64_t syncs_seen_ = 0;
  int64_t allocated_peak_seen_ = 0;
  int64_t reserved_peak_seen_ = 0;
  uint64_t recorded_ooms_seen_ = 0;   // recorded OOMs the replay met too
  uint64_t last_recorded_oom_ = 0;    // the event of the last of them
  std::vector<uint64_t> pool_users_;  // per private pool: the requests that began allocating to it
  static constexpr uint64_t kNever = UINT64_MAX;
  uint64_t next_added_empty_cache_ = kNever;  // the event before which the what-if's next call is
  size_t added_empty_cache_calls_ = 0;
  uint64_t next_recorded_call_ = kNever;  // the event before which the recorder's next call is
  size_t recorded_calls_made_ = 0;
  uint64_t recorded_empty_cache_at_ = kNever;  // a run of releases a recorded call made
};

// The replay of `requests`, the requests of `events`, on `device`. Compiled twice, so that a
// replay nothing watches request by request (what plan and most replays are) has none of those
// tests in its loop.
template <class Events, class Requests>
ReplayResult run_replay(const Events& events, Requests& requests, const ReplayStart& start,
                        const ReplayOptions& options, ReplayDevice device,
                        BlockObserver* blocks = nullptr) {
  // A trace with calls the recorder marked is watched too: the unwatched loop has no test for them.
  if (WatchingObserver::wanted(options, blocks) || !start.recorded_calls.empty()) {
    WatchingObserver observer(options, blocks);
    return ReplayRun(events, requests, start, options, device, observer).run();
  }
  NoObserver observer;
  return ReplayRun(events, requests, start, options, device, observer).run();
}

}  // namespace allocsim::replay_engine
