// A trace's events as the requests a replay makes of the allocator: each alloc gets a slot, frees
// refer to it by slot, runs of segment releases are classified. Sources: the events as the replay
// goes (RequestStream, over the decoded trace or events still being decoded), or listed once for
// many replays (RequestList, read through RequestCursor).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "sim/replay/address_map.hpp"
#include "sim/replay/initial_state.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

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
  // kMaybeEmptyCache: segments freed just before a malloc that got a new segment (or, unmapped,
  // just before an alloc); that malloc's own slow path may have freed them, or empty_cache did.
  // Decided during the replay.
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
          if (live_.put(e.addr, slot)) [[unlikely]]
            contradictions_.note_alloc_at_live_address(i);
          more = take(Request{Request::kAlloc, slot, e.size, e.stream, i});
          continue;
        }
        case TraceAction::kFreeRequested: {
          const bool immediate = ev_.has(i + 1) &&
                                 ev_[i + 1].action == TraceAction::kFreeCompleted &&
                                 ev_[i + 1].addr == e.addr;
          const std::optional<uint32_t> slot = immediate ? live_.erase(e.addr) : live_.find(e.addr);
          if (!slot) {
            // Not live, nor restored as live at the first event.
            contradictions_.note_free_of_unknown_block(i);
            continue;  // (and its free_completed, if next, finds nothing either)
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
        // Listed rather than left to default, so that the switch stays a jump table (two tests
        // mispredict more).
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
  const TraceContradictions& contradictions() const { return contradictions_; }

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
    // Unmaps right before an alloc: an expandable segment's retry may serve the request from
    // what the unmapping left mapped, with no new pages.
    const bool then_alloc_after_unmap = ev_.has(j) && ev_[j].action == TraceAction::kAlloc &&
                                        ev_[j - 1].action == TraceAction::kSegmentUnmap;
    if (then_alloc_after_unmap)
      return Request{Request::kMaybeEmptyCache, 0, ev_[j].size, ev_[j].stream, i};
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
  TraceContradictions contradictions_;
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
    contradictions = stream.contradictions();
  }

  std::vector<Request> requests;
  uint32_t slots = 0;
  TraceContradictions contradictions;
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
  const TraceContradictions& contradictions() const { return list_.contradictions; }

 private:
  const RequestList& list_;
  size_t i_ = 0;
};

}  // namespace allocsim::replay_engine
