// The replay engine: a trace's events turned into requests and run through the allocator core,
// over any source of events: the decoded trace (replay()), or events still being decoded
// (StreamedReplay); and over any source of requests: turned from the events as the replay goes,
// or listed once for many replays (PreparedTrace). Internal to sim/replay/replay.cpp,
// sim/replay/prepared_trace.cpp and sim/replay/streamed_replay.cpp.
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/simulated_device.hpp"
#include "core/size_rounding.hpp"
#include "sim/replay/detail/address_map.hpp"
#include "sim/replay/initial_state.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim::replay_engine {

// The decoded trace as an event source: has(i) says whether event i exists.
class DecodedEvents {
 public:
  explicit DecodedEvents(std::span<const TraceEvent> events) : events_(events) {}
  bool has(uint64_t i) const { return i < events_.size(); }
  const TraceEvent& operator[](uint64_t i) const { return events_[i]; }
  uint64_t size() const { return events_.size(); }

 private:
  std::span<const TraceEvent> events_;
};

// A trace turned into requests: each alloc gets a slot, frees refer to it by slot.
struct Request {
  // kEmptyCache: segments freed outside any malloc, so torch.cuda.empty_cache() was called.
  // kMaybeEmptyCache: segments freed just before a malloc that got a new segment; that malloc's
  // own slow path may have freed them, or empty_cache did. Decided during the replay.
  enum Kind : uint8_t {
    kAlloc,
    kFree,
    kFreeDeferred,
    kCompleteFree,
    kOom,
    kEmptyCache,
    kMaybeEmptyCache
  };
  Kind kind;
  uint32_t slot;
  uint64_t size;
  StreamId stream;
  uint64_t event_index;
};

// Where the trace's segments and expandable reservations were: the simulated device hands them
// out again while the replay's requests match the recorded ones.
class RecordedAddresses {
 public:
  explicit RecordedAddresses(uint64_t capacity)
      : va_size_((capacity + capacity / 8 + kLargeBuffer - 1) / kLargeBuffer * kLargeBuffer) {}

  void observe(const TraceEvent& e) {
    if (e.action == TraceAction::kSegmentAlloc) {
      segments.push_back({e.addr, e.size});
    } else if (e.action == TraceAction::kOom) {
      ++ooms;
    } else if (e.action == TraceAction::kSegmentMap) {
      bool known = false;
      for (const auto& [base, size] : reservation_ranges_)
        known |= e.addr >= base && e.addr < base + size;
      if (!known) {
        reservation_ranges_.emplace_back(e.addr, va_size_);
        reservations.push_back(e.addr);
      }
    }
  }

  std::vector<RecordedSegment> segments;
  std::vector<uint64_t> reservations;
  uint64_t ooms = 0;

 private:
  uint64_t va_size_;  // what the device reserves for one expandable segment
  std::vector<std::pair<uint64_t, uint64_t>> reservation_ranges_;
};

// Slots for blocks restored from before the trace began; their alloc event index.
constexpr uint64_t kBeforeTrace = UINT64_MAX;

// The trace as requests, one at a time: each alloc gets a slot, frees refer to it by slot. A slot
// is reused once its block's free has completed, so what the stream and the replay keep per block
// grows with the live blocks, not with the trace.
template <class Events>
class RequestStream {
 public:
  RequestStream(const Events& events, const InitialState& initial) : ev_(events) {
    for (const InitialSegment& seg : initial.segments) {
      for (const RestoredBlock& b : seg.blocks) {
        const uint32_t slot = take_slot();  // one per restored block, as the replay counts them
        if (!live_.find(b.address)) live_.put(b.address, slot);
      }
    }
  }

  // Hands the requests to `take` in order while it returns true. `take` is inlined where an alloc
  // and an immediate free are made, so that the replay's tests of a request's kind fold into this
  // switch on the event's action there, instead of a second dispatch on the same outcome.
  template <class Take>
  [[gnu::always_inline]] void run(Take&& take) {
    uint64_t i = i_;
    bool more = true;
    for (; more && ev_.has(i); ++i) {
      const TraceEvent& e = ev_[i];
      Request other;  // a request of the other kinds, made below
      switch (e.action) {
        case TraceAction::kAlloc: {
          const uint32_t slot = take_slot();
          // PyTorch never hands out a live address twice; if the trace lost a free, the newer
          // block is the one later frees refer to (the older one stays live to the end).
          live_.put(e.addr, slot);
          more = take(Request{Request::kAlloc, slot, e.size, e.stream, i});
          continue;
        }
        case TraceAction::kFreeRequested: {
          const bool immediate = ev_.has(i + 1) &&
                                 ev_[i + 1].action == TraceAction::kFreeCompleted &&
                                 ev_[i + 1].addr == e.addr;
          const std::optional<uint32_t> slot = immediate ? live_.erase(e.addr) : live_.find(e.addr);
          if (!slot) {
            ++unknown_frees_;  // allocated before a bounded history began
            continue;          // (and its free_completed, if next, finds nothing either)
          }
          if (immediate) {
            release_slot(*slot);
            more = take(Request{Request::kFree, *slot, 0, e.stream, i});
            ++i;  // its free_completed is part of the same free
            continue;
          }
          other = Request{Request::kFreeDeferred, *slot, 0, e.stream, i};
          break;
        }
        // Listed rather than left to default, so that the switch stays a jump table (as two
        // tests it mispredicted more in callgrind's model).
        case TraceAction::kFreeCompleted:
        case TraceAction::kOom:
        case TraceAction::kSegmentFree:
        case TraceAction::kSegmentUnmap:
          if (!other_request(i, other)) continue;
          break;
        default:
          continue;
      }
      more = take(other);
    }
    i_ = i;
  }

  uint32_t slots() const { return slots_; }
  uint64_t unknown_frees() const { return unknown_frees_; }

 private:
  static constexpr uint32_t kNoSlot = UINT32_MAX;

  // The freed slots are a stack threaded through next_free_, so that freeing one is two stores.
  uint32_t take_slot() {
    if (free_head_ == kNoSlot) {
      next_free_.push_back(kNoSlot);
      return slots_++;
    }
    const uint32_t slot = free_head_;
    free_head_ = next_free_[slot];
    return slot;
  }
  void release_slot(uint32_t slot) {
    next_free_[slot] = free_head_;
    free_head_ = slot;
  }

  // The request of event i other than an alloc or a free_requested, if it makes one.
  [[gnu::noinline]] bool other_request(uint64_t i, Request& request) {
    const TraceEvent& e = ev_[i];
    switch (e.action) {
      case TraceAction::kFreeCompleted: {
        const std::optional<uint32_t> slot = live_.erase(e.addr);
        if (!slot) return false;
        release_slot(*slot);
        request = Request{Request::kCompleteFree, *slot, 0, e.stream, i};
        return true;
      }
      case TraceAction::kOom:
        request = Request{Request::kOom, 0, e.size, e.stream, i};
        return true;
      case TraceAction::kSegmentFree:
      case TraceAction::kSegmentUnmap:
        if (const std::optional<Request> r = segment_release(i)) {
          request = *r;
          return true;
        }
        return false;
      default:
        return false;
    }
  }

  // A run of segment releases: inside a malloc's slow path, or torch.cuda.empty_cache().
  std::optional<Request> segment_release(uint64_t i) const {
    auto releases = [](TraceAction a) {
      return a == TraceAction::kSegmentFree || a == TraceAction::kSegmentUnmap;
    };
    if (i > 0 && releases(ev_[i - 1].action)) return std::nullopt;  // the same run of releases
    uint64_t j = i;
    while (ev_.has(j) && releases(ev_[j].action)) ++j;
    const bool then_new_segment = ev_.has(j) && (ev_[j].action == TraceAction::kSegmentAlloc ||
                                                 ev_[j].action == TraceAction::kSegmentMap ||
                                                 ev_[j].action == TraceAction::kOom);
    if (!then_new_segment) return Request{Request::kEmptyCache, 0, 0, ev_[i].stream, i};
    while (ev_.has(j) && ev_[j].action != TraceAction::kAlloc && ev_[j].action != TraceAction::kOom)
      ++j;
    if (!ev_.has(j)) return std::nullopt;
    return Request{Request::kMaybeEmptyCache, 0, ev_[j].size, ev_[j].stream, i};
  }

  const Events& ev_;
  uint64_t i_ = 0;
  AddressMap live_;  // block address -> slot, until free_completed
  uint32_t slots_ = 0;
  std::vector<uint32_t> next_free_;  // per slot: the freed slot taken after it
  uint32_t free_head_ = kNoSlot;     // the freed slot taken next
  uint64_t unknown_frees_ = 0;
};

// Everything a RequestStream yields, kept: a trace's requests worked out once (every address
// looked up, every run of segment releases classified) for replaying them many times.
struct RequestList {
  template <class Events>
  RequestList(const Events& events, const InitialState& initial) {
    RequestStream<Events> stream(events, initial);
    stream.run([&](const Request& r) {
      requests.push_back(r);
      return true;
    });
    slots = stream.slots();
    unknown_frees = stream.unknown_frees();
  }

  std::vector<Request> requests;
  uint32_t slots = 0;
  uint64_t unknown_frees = 0;
};

// A RequestList read with RequestStream's interface.
class RequestCursor {
 public:
  explicit RequestCursor(const RequestList& list) : list_(list) {}

  // Hands the listed requests to `take` in order while it returns true.
  template <class Take>
  [[gnu::always_inline]] void run(Take&& take) {
    const size_t n = list_.requests.size();
    for (size_t i = i_; i < n;) {
      if (!take(list_.requests[i++])) {
        i_ = i;
        return;
      }
    }
    i_ = n;
  }
  uint32_t slots() const { return list_.slots; }
  uint64_t unknown_frees() const { return list_.unknown_frees; }

 private:
  const RequestList& list_;
  size_t i_ = 0;
};

enum class SlotState : uint8_t { kNone, kLive, kPending, kDone, kFailed };

// What a replay made of one slot.
struct SlotRecord {
  // The alloc event of the block the slot holds (kBeforeTrace: restored). Kept by the replay, not
  // by the requests: after a stop at an OOM they go on to reuse slots the replay still holds.
  uint64_t event = kBeforeTrace;
  BlockId block = kNoBlock;
  SlotState state = SlotState::kNone;
};

// What a replay takes besides its events and options.
struct ReplayStart {
  std::string source;  // the trace's name, for errors
  AllocConf conf;
  InitialState initial;         // the state at the first event (a history that starts mid-run)
  RecordedAddresses addresses;  // the trace's segment and reservation addresses known up front
  // For events still being decoded: reads further until the simulated device has another recorded
  // address, or the trace ends (false then).
  std::function<bool(SimulatedDevice&)> read_more;
};

// The settings a replay runs under: the what-if's, else the recorded ones.
inline AllocConf replay_conf(const Trace& trace, const ReplayOptions& options) {
  AllocConf conf = options.alloc_conf.value_or(trace.settings.value_or(AllocConf{}));
  check_replayable(conf);  // before any work
  return conf;
}

// The pass over a decoded trace's events for everything gathered before its replay starts. It
// looks at segment events only, which are few; a trace whose history is not whole has its block
// events scanned in a second pass (an address lookup per event, whose outcome follows the trace's
// data: a fifth of llama-varlen's replay() in instructions and mispredicted branches).
struct PrePass {
  PrePass(const Trace& trace, uint64_t capacity) : addresses(capacity) {
    // Unrolled: the loop's own test and increment were a third of its instructions.
#pragma GCC unroll 4
    for (const TraceEvent& e : trace.events) {
      if (!is_block_action(e.action)) observe(e);  // neither scan's, and most events: one test
    }
    whole = history.whole(trace);
    if (!whole) {
      for (const TraceEvent& e : trace.events) history.observe_block(e);
    }
  }
  // The state at the first event, under `conf` (whose rounding sizes restored blocks).
  InitialState initial_state(const Trace& trace, const AllocConf& conf) const {
    return whole ? InitialState{} : history.finish(trace, conf);
  }
  HistoryScan history;
  RecordedAddresses addresses;
  bool whole = true;  // the trace holds its whole history: history.whole(), asked once

 private:
  // Out of line, so that the loop over the events stays a load and a test.
  [[gnu::noinline]] void observe(const TraceEvent& e) {
    history.observe_segment(e);
    addresses.observe(e);
  }
};

// The replay of `requests`, the requests of `events` (RequestStream or RequestCursor). kWatched:
// whether anything watches it request by request (a simulated trace, a block observer, a timeline,
// invariant checks); replay_requests() below picks.
template <bool kWatched, class Events, class Requests>
ReplayResult replay_requests_as(const Events& events, Requests& requests, const ReplayStart& start,
                                const ReplayOptions& options) {
  ReplayResult result;
  result.conf = start.conf;
  check_replayable(result.conf);
  result.capacity = options.capacity;
  result.context_bytes = options.context_bytes.value_or(kDefaultContextBytes);
  const InitialState& initial = start.initial;

  SimulatedDevice simulated(options.capacity, result.context_bytes);
  Device& device = options.device ? *options.device : simulated;
  if (options.device && !initial.segments.empty()) {
    throw InputError(start.source +
                     ": the history starts mid-run; its first segments cannot be recreated at "
                     "their recorded addresses on a real device");
  }
  // The segments that existed before the trace began come first, at their own addresses.
  std::vector<RecordedSegment> recorded;
  for (const InitialSegment& seg : initial.segments) recorded.push_back({seg.address, seg.size});
  if (options.segment_addresses && !options.device) {
    simulated.use_recorded_segments(*options.segment_addresses);
    simulated.use_recorded_reservations(options.reservation_addresses);
  } else if (options.use_recorded_addresses && !options.device) {
    recorded.insert(recorded.end(), start.addresses.segments.begin(),
                    start.addresses.segments.end());
    simulated.use_recorded_segments(std::move(recorded));
    simulated.use_recorded_reservations(start.addresses.reservations);
    if (start.read_more) simulated.read_recorded_with([&] { return start.read_more(simulated); });
  }
  AllocatorOptions alloc_options;
  alloc_options.conf = result.conf;
  alloc_options.caching = !options.no_caching;
  alloc_options.record_device_ops = options.record_device_ops;
  CachingAllocator allocator(device, alloc_options);
  result.memory_fraction = options.memory_fraction;
  if (!result.memory_fraction && result.conf.per_process_memory_fraction) {
    result.memory_fraction = result.conf.per_process_memory_fraction;
  }
  if (options.memory_fraction) allocator.set_memory_fraction(*options.memory_fraction);
  if (options.memory_limit) allocator.set_memory_limit(*options.memory_limit);

  // Per slot, what the replay made of it: one record, so that a request touches one cache line.
  std::vector<SlotRecord> slots(requests.slots());
  uint32_t restored_slot = 0;
  for (const InitialSegment& seg : initial.segments) {
    const auto ids =
        allocator.restore_segment(seg.address, seg.size, seg.stream, seg.small, seg.blocks);
    if (!ids) {
      throw InputError(start.source + ": cannot reconstruct the segment at " +
                       std::to_string(seg.address) +
                       " that existed before the trace's first event");
    }
    for (BlockId id : *ids) {
      slots[restored_slot].block = id;
      slots[restored_slot++].state = SlotState::kLive;
    }
  }
  result.restored_segments = initial.segments.size();
  result.restored_blocks = restored_slot;
  std::vector<uint32_t> pending;  // slots with a deferred free in flight
  const DeviceStats& stats = allocator.stats();
  int64_t syncs_seen = 0;
  // The peaks so far, from the state at the first event (restored blocks): a peak no event
  // exceeds was there before event 0.
  int64_t allocated_peak_seen = stats.allocated_bytes.current();
  int64_t reserved_peak_seen = stats.reserved_bytes.current();
  result.fragmentation.reserved_unallocated_at_peak =
      static_cast<uint64_t>(reserved_peak_seen - allocated_peak_seen);

  auto note_oom = [&](const Request& r, bool recorded) {
    ++result.ooms;
    result.oom_events.push_back({r.event_index, r.size, recorded});
    // Report the first OOM the real run did not have (it would have ended the program); failing
    // that, the last recorded one (the one the program ended with, or caught last).
    if (result.oom && !(recorded && result.oom->recorded)) return;
    OutOfMemory oom = *allocator.last_oom();
    const uint64_t recorded_free = events[r.event_index].device_free;
    if (recorded && !options.device && !options.context_bytes && recorded_free > 0 &&
        options.capacity > recorded_free + simulated.used_bytes()) {
      // The real run told us how much memory sat outside PyTorch: use it from here on.
      simulated.set_context_bytes(options.capacity - recorded_free - simulated.used_bytes());
      result.context_bytes = simulated.context_bytes();
      oom.device_free = recorded_free;
    }
    result.oom = ReplayOom{r.event_index,
                           oom.requested,
                           oom.rounded,
                           oom.alloc_size,
                           r.stream,
                           recorded,
                           allocator.largest_free_block(),
                           oom.reserved - oom.allocated,
                           oom.message(oom.device_total - oom.device_free)};
    result.breakdown_at_oom = memory_breakdown(allocator);
  };

  // Each slot's block address, for the simulated trace only (kept when record_trace).
  std::vector<uint64_t> slot_address(requests.slots(), 0);
  for (uint32_t s = 0; s < restored_slot; ++s)
    slot_address[s] = allocator.block_address(slots[s].block);
  size_t device_ops_emitted = 0;
  auto emit = [&](TraceAction action, uint64_t addr, uint64_t size, StreamId stream,
                  uint64_t event_index) {
    const TraceEvent& origin = events[event_index];
    result.simulated_trace.push_back({.action = action,
                                      .stack = origin.stack,
                                      .addr = addr,
                                      .size = size,
                                      .stream = stream,
                                      .time_us = origin.time_us});
  };
  auto observe_free = [&](uint32_t slot) {
    if (slots[slot].event == kBeforeTrace) return;  // never filled
    const BlockId b = slots[slot].block;
    options.blocks->freeing(allocator.block_address(b), allocator.block_size(b), slots[slot].event);
  };
  auto requested_of = [&](uint32_t slot) {
    return slots[slot].event == kBeforeTrace ? 0 : events[slots[slot].event].size;
  };

  // The options read once: the allocator's calls could change them as far as the compiler knows.
  BlockObserver* const blocks = kWatched ? options.blocks : nullptr;
  const bool record_trace = kWatched && options.record_trace;
  const bool check_addresses =
      options.use_recorded_addresses && !options.device && !options.segment_addresses;
  const bool per_event_extras = kWatched && (options.record_timeline || options.check_invariants);
  // One request. Inlined where the requests are made: a RequestStream makes its allocs and
  // immediate frees at places of their own, where the tests of their kind below fold away.
  auto replay_request = [&](const Request& r) __attribute__((always_inline)) {
    if (r.kind == Request::kAlloc && requests.slots() > slots.size()) {  // a new slot
      slots.resize(requests.slots());
      if (record_trace) slot_address.resize(requests.slots(), 0);
    }
    const bool slot_request = r.kind == Request::kAlloc || r.kind == Request::kFree ||
                              r.kind == Request::kFreeDeferred || r.kind == Request::kCompleteFree;
    const SlotState state_before =
        record_trace && slot_request ? slots[r.slot].state : SlotState::kNone;
    switch (r.kind) {
      case Request::kAlloc: {
        slots[r.slot].event = r.event_index;
        const BlockId b = allocator.malloc(r.size, r.stream);
        if (b == kNoBlock) {
          note_oom(r, false);
          slots[r.slot].state = SlotState::kFailed;
          if (options.on_oom == OnOom::kStop) result.stopped_at_oom = true;
          break;
        }
        slots[r.slot].block = b;
        slots[r.slot].state = SlotState::kLive;
        const uint64_t address = allocator.block_address(b);
        if (record_trace) slot_address[r.slot] = address;
        if (blocks) blocks->allocated(address, allocator.block_size(b), r.event_index);
        if (check_addresses) {
          ++result.address_checks;
          if (address != events[r.event_index].addr) {
            if (result.address_mismatches++ == 0)
              result.first_address_mismatch_event = r.event_index;
          }
        }
        break;
      }
      case Request::kOom: {
        const BlockId b = allocator.malloc(r.size, r.stream);
        if (b == kNoBlock) {
          note_oom(r, true);
        } else {
          ++result.recorded_ooms_not_reproduced;
          allocator.free(b);  // the program caught the OOM and let go of the request
        }
        break;
      }
      case Request::kFree:
      case Request::kFreeDeferred:
        if (slots[r.slot].state != SlotState::kLive) break;  // its alloc failed in this replay
        if (blocks) observe_free(r.slot);
        if (r.kind == Request::kFree) {
          allocator.free(slots[r.slot].block);
          slots[r.slot].state = SlotState::kDone;
        } else {
          allocator.free(slots[r.slot].block, /*pending_stream_uses=*/true);
          slots[r.slot].state = SlotState::kPending;
          pending.push_back(r.slot);
        }
        break;
      case Request::kEmptyCache:
        allocator.empty_cache();
        ++result.inferred_empty_cache_calls;
        break;
      case Request::kMaybeEmptyCache: {
        // The malloc's slow path frees segments only after a cudaMalloc failed (or, with a cap and
        // garbage collection, above the threshold). If it could not fail here, it was empty_cache.
        const AllocConf& conf = allocator.conf();
        const uint64_t need = allocation_size(round_size(r.size, conf.roundup_power2_divisions));
        const auto allowed = allocator.allowed_memory_maximum();
        const auto reserved = static_cast<uint64_t>(stats.reserved_bytes[kAggregate].current);
        const bool could_fail =
            (allowed && (reserved + need > *allowed || conf.garbage_collection_threshold > 0)) ||
            device.mem_get_info().free < need;
        if (!could_fail) {
          allocator.empty_cache();
          ++result.inferred_empty_cache_calls;
        }
        break;
      }
      case Request::kCompleteFree:
        if (slots[r.slot].state == SlotState::kLive) {
          // Its free was requested before the trace began: it completes now.
          if (blocks) observe_free(r.slot);
          allocator.free(slots[r.slot].block);
          slots[r.slot].state = SlotState::kDone;
        } else if (slots[r.slot].state == SlotState::kPending) {
          allocator.complete_deferred_free(slots[r.slot].block);
          slots[r.slot].state = SlotState::kDone;
          std::erase(pending, r.slot);  // the slot may be reused before the next synchronisation
        }
        break;
    }
    if (record_trace) {
      const bool synced = stats.num_sync_all_streams != syncs_seen;
      if (synced) {  // the deferred frees a synchronisation completed come before its releases
        for (uint32_t s : pending) {
          if (slots[s].state == SlotState::kPending) {
            emit(TraceAction::kFreeCompleted, slot_address[s], requested_of(s), r.stream,
                 r.event_index);
          }
        }
      }
      const auto& ops = allocator.device_ops();
      for (; device_ops_emitted < ops.size(); ++device_ops_emitted) {
        const DeviceOp& op = ops[device_ops_emitted];
        static constexpr TraceAction kAction[] = {
            TraceAction::kSegmentAlloc, TraceAction::kSegmentFree, TraceAction::kSegmentMap,
            TraceAction::kSegmentUnmap};
        emit(kAction[static_cast<int>(op.kind)], op.address, op.size, op.stream, r.event_index);
      }
      auto emit_oom = [&] {
        const OutOfMemory& oom = *allocator.last_oom();
        result.simulated_trace.push_back({.action = TraceAction::kOom,
                                          .stack = events[r.event_index].stack,
                                          .size = oom.rounded,
                                          .stream = r.stream,
                                          .device_free = oom.device_free,
                                          .time_us = events[r.event_index].time_us});
      };
      switch (r.kind) {
        case Request::kAlloc:
          if (slots[r.slot].state == SlotState::kLive) {
            emit(TraceAction::kAlloc, slot_address[r.slot], r.size, r.stream, r.event_index);
          } else {
            emit_oom();
          }
          break;
        case Request::kOom:
          if (allocator.last_oom()) emit_oom();
          break;
        case Request::kFree:
        case Request::kFreeDeferred:
        case Request::kCompleteFree:
          if (state_before == SlotState::kLive) {
            emit(TraceAction::kFreeRequested, slot_address[r.slot], requested_of(r.slot), r.stream,
                 r.event_index);
          }
          if ((state_before == SlotState::kLive && r.kind != Request::kFreeDeferred) ||
              (state_before == SlotState::kPending && r.kind == Request::kCompleteFree)) {
            emit(TraceAction::kFreeCompleted, slot_address[r.slot], requested_of(r.slot), r.stream,
                 r.event_index);
          }
          break;
        default:
          break;
      }
    }
    // A free lowers allocated and leaves reserved and the synchronisations alone: it skips their
    // checks.
    const bool is_free = r.kind == Request::kFree || r.kind == Request::kFreeDeferred ||
                         r.kind == Request::kCompleteFree;
    if (!is_free) {
      if (stats.num_sync_all_streams != syncs_seen) {
        // The allocator synchronised (OOM retry): every deferred free has completed.
        syncs_seen = stats.num_sync_all_streams;
        for (uint32_t s : pending) {
          if (slots[s].state == SlotState::kPending) slots[s].state = SlotState::kDone;
        }
        pending.clear();
      }
      const int64_t allocated = stats.allocated_bytes.current();
      if (allocated > allocated_peak_seen) {
        allocated_peak_seen = allocated;
        result.allocated_peak_event = r.event_index + 1;
      }
      const int64_t reserved = stats.reserved_bytes.current();
      if (reserved > reserved_peak_seen) {
        reserved_peak_seen = reserved;
        result.fragmentation.reserved_unallocated_at_peak =
            static_cast<uint64_t>(reserved - allocated);
      }
    }
    if (per_event_extras) {
      if (options.record_timeline) {
        result.timeline.push_back({r.event_index, stats.allocated_bytes.current(),
                                   stats.active_bytes().current(), stats.reserved_bytes.current()});
      }
      if (options.check_invariants) allocator.check_invariants();
    }
    if (is_free || !result.stopped_at_oom) return true;  // only a failed alloc stops the replay
    result.events_replayed = r.event_index + 1;
    return false;
  };
  requests.run(replay_request);
  // A replay stopped at an OOM still reports every free of a block it never saw.
  requests.run([](const Request&) { return true; });
  if (!result.stopped_at_oom) result.events_replayed = events.size();  // known once all are read
  result.frees_of_unknown_blocks = requests.unknown_frees();

  result.stats = allocator.stats();
  result.device_ops = allocator.device_ops();
  const int64_t peak_reserved = result.stats.reserved_bytes[kAggregate].peak;
  if (peak_reserved > 0) {
    result.fragmentation.gmlake =
        1.0 - static_cast<double>(result.stats.active_bytes()[kAggregate].peak) /
                  static_cast<double>(peak_reserved);
  }
  result.fragmentation.largest_free_block_end = allocator.largest_free_block();
  result.breakdown_end = memory_breakdown(allocator);
  const uint64_t device_room =
      options.capacity > result.context_bytes ? options.capacity - result.context_bytes : 0;
  result.limit_bytes =
      std::min(device_room, allocator.allowed_memory_maximum().value_or(device_room));
  if (record_trace) {
    allocator.for_each_block([&](const BlockInfo& b) {
      if (!b.mapped) return;
      if (b.segment_start || result.final_segments.empty()) {
        result.final_segments.push_back({b.ptr, 0, b.stream, b.small, b.expandable, {}});
      }
      SnapshotSegment& seg = result.final_segments.back();
      seg.total_size += b.size;
      seg.blocks.push_back(
          {b.ptr, b.size, b.requested_size, b.allocated || b.pending_free, b.allocated});
    });
  }
  // Live blocks in the order they were allocated (slots are reused, so not slot order).
  std::vector<uint32_t> held;
  for (uint32_t s = 0; s < slots.size(); ++s) {
    if (slots[s].state == SlotState::kLive || slots[s].state == SlotState::kPending)
      held.push_back(s);
  }
  auto allocated_before = [&](uint32_t a, uint32_t b) {
    const uint64_t ea = slots[a].event, eb = slots[b].event;
    if ((ea == kBeforeTrace) != (eb == kBeforeTrace)) return ea == kBeforeTrace;
    return ea != eb ? ea < eb : a < b;  // restored blocks keep their restore order
  };
  std::sort(held.begin(), held.end(), allocated_before);
  for (uint32_t s : held) {
    if (slots[s].state != SlotState::kLive) continue;
    const uint64_t event = slots[s].event;
    if (event == kBeforeTrace) {
      result.live_blocks.push_back(LiveBlock{allocator.block_address(slots[s].block),
                                             allocator.block_size(slots[s].block), 0, 0,
                                             kBeforeTrace, kNoStack});
      continue;
    }
    const TraceEvent& e = events[event];
    result.live_blocks.push_back(LiveBlock{allocator.block_address(slots[s].block),
                                           allocator.block_size(slots[s].block), e.size, e.stream,
                                           event, e.stack});
  }
  if (options.release_all_at_end) {
    for (uint32_t s : held) {
      if (slots[s].state == SlotState::kLive) {
        if (blocks) observe_free(s);
        allocator.free(slots[s].block);
      } else {
        allocator.complete_deferred_free(slots[s].block);
      }
    }
    allocator.empty_cache();
  }
  return result;
}

// The replay of `requests`, the requests of `events`. Compiled twice, so that a replay nothing
// watches request by request (what plan and most replays are) has none of those tests in its loop.
template <class Events, class Requests>
ReplayResult replay_requests(const Events& events, Requests& requests, const ReplayStart& start,
                             const ReplayOptions& options) {
  const bool watched = options.record_trace || options.blocks != nullptr ||
                       options.record_timeline || options.check_invariants;
  return watched ? replay_requests_as<true>(events, requests, start, options)
                 : replay_requests_as<false>(events, requests, start, options);
}

}  // namespace allocsim::replay_engine
