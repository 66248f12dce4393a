// What a replay gathers from a decoded trace before it starts: the recorded segment and
// reservation addresses, and whether the history is whole (else the state at its first event).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/device.hpp"
#include "core/size_rounding.hpp"
#include "sim/replay/initial_state.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim::replay_engine {

// Where the trace's segments and expandable reservations were: the simulated device hands them
// out again while the replay's requests match the recorded ones.
class RecordedAddresses {
 public:
  // A segment_map outside every reservation seen starts a new one. The small pool's reservations
  // are the smallest (1 1/8 of the device in 2 MiB pages; the large pool's round up to 20 MiB),
  // and the driver may place the next one right after one: measured by the small.
  explicit RecordedAddresses(uint64_t capacity)
      : va_size_((capacity + capacity / 8 + kSmallBuffer - 1) / kSmallBuffer * kSmallBuffer) {}

  void observe(const TraceEvent& e) {
    if (e.action == TraceAction::kSegmentAlloc) {
      segments.push_back({e.addr, e.size});
    } else if (e.action == TraceAction::kOom) {
      ++ooms;
    } else if (e.action == TraceAction::kSegmentMap) {
      maps_.push_back(e.addr);
      Reservation* r = containing(e.addr);
      // A map outside every reservation starts a new one; so may a map into one whose every page
      // was unmapped: empty_cache() releases such a segment, and the driver may hand out the same
      // range, or one over it, for the next (a kept segment grows from its base: where it was
      // kept, its base is still reserved when the replay asks for a new one, and the device
      // passes over it). The new one is the latest seen: the maps into its range are its own.
      if (r == nullptr || r->mapped == 0) {
        reservations.push_back(e.addr);
        if (r != nullptr) seen_.erase(seen_.begin() + (r - seen_.data()));
        seen_.push_back({e.addr, e.size});
      } else {
        r->mapped += e.size;
      }
    } else if (e.action == TraceAction::kSegmentUnmap) {
      if (Reservation* r = containing(e.addr)) r->mapped -= std::min(r->mapped, e.size);
    }
  }

  // The reservations of a history that starts mid-run, whose expandable segments reserved at
  // `restored` before its first event: those, then the ones its segment_maps start outside them
  // (its first map into a restored reservation may lie anywhere in it).
  std::vector<uint64_t> reservations_after(const std::vector<uint64_t>& restored) const {
    std::vector<uint64_t> all = restored;
    for (const uint64_t address : maps_) {
      if (!inside(address, all)) all.push_back(address);
    }
    return all;
  }

  bool records_segments() const { return !segments.empty() || !maps_.empty(); }

  std::vector<RecordedSegment> segments;
  std::vector<uint64_t> reservations;
  uint64_t ooms = 0;

 private:
  bool inside(uint64_t address, const std::vector<uint64_t>& bases) const {
    return std::any_of(bases.begin(), bases.end(),
                       [&](uint64_t base) { return address >= base && address < base + va_size_; });
  }

  struct Reservation {
    uint64_t base;
    uint64_t mapped;  // bytes mapped in it now
  };

  // The latest reservation whose range holds `address`: a range given back may hold a newer one,
  // whose maps are its own.
  Reservation* containing(uint64_t address) {
    for (auto r = seen_.rbegin(); r != seen_.rend(); ++r) {
      if (address >= r->base && address < r->base + va_size_) return &*r;
    }
    return nullptr;
  }

  uint64_t va_size_;  // what the device reserves for one expandable segment of the small pool
  std::vector<Reservation> seen_;  // every reservation seen, by its first base
  std::vector<uint64_t> maps_;     // every segment_map's address, in order
};

// The pass over a decoded trace's events for everything gathered before its replay starts. It
// looks at segment events only, which are few; a trace whose history is not whole has its block
// events scanned in a second pass (an address lookup per event, whose outcome follows the trace's
// data and so mispredicts: too dear to pay for a whole history).
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

}  // namespace allocsim::replay_engine
