// The allocator's state at the first event of a history that starts mid-run (a snapshot recorded
// with a bounded max_entries): reconstructed from the trace and the snapshot's final segments.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "core/alloc_conf.hpp"
#include "core/caching_allocator.hpp"
#include "sim/replay/address_map.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

// A cudaMalloc'ed segment, or a mapped range of an expandable segment (`expandable`, in the
// reservation that starts at `base`).
struct InitialSegment {
  uint64_t address;
  uint64_t size;
  StreamId stream;
  bool small;
  std::vector<RestoredBlock> blocks;  // allocated at the first event, by address
  uint16_t pool = 0;                  // 0: the ordinary pools; k: the trace's private_pools[k - 1]
  bool expandable = false;
  uint64_t base = 0;
};

struct InitialState {
  std::vector<InitialSegment> segments;
  // Blocks the trace frees before allocating them whose space up to the next block the trace does
  // not show: taken as split off when allocated (their request's rounded size), where an earlier
  // request may have left them larger.
  uint64_t blocks_of_assumed_size = 0;
  bool empty() const { return segments.empty(); }
};

// What a pass over the events learns about the time before them, one event at a time, so that
// a replay reads its events once for this and everything else it gathers up front. The segment
// events alone tell whether the history is whole (most traces): only one that is not needs its
// block events scanned as well.
class HistoryScan {
 public:
  void observe_segment(const TraceEvent& e) {
    if (e.action == TraceAction::kSegmentAlloc) {
      window_segments_.put(e.addr, 1);
    } else if (e.action == TraceAction::kSegmentFree && !window_segments_.find(e.addr)) {
      pre_segments_.emplace(e.addr, std::make_pair(e.size, e.stream));
    } else if (e.action == TraceAction::kSegmentMap || e.action == TraceAction::kSegmentUnmap) {
      mappings_.push_back({e.addr, e.size, e.stream, e.action == TraceAction::kSegmentMap});
    }
  }

  void observe_block(const TraceEvent& e) {
    if (e.action == TraceAction::kAlloc) {
      addresses_.put(e.addr, kAllocatedAt | kLive);
    } else if (e.action == TraceAction::kFreeRequested || e.action == TraceAction::kFreeCompleted) {
      observe_free(e);
    }
  }

  // Whether the trace holds its whole history (nothing existed before its first event, so that
  // finish() is empty), once every event has been observed, by observe_segment() at least: no
  // segment is freed, or left at the end, that the trace did not allocate, and no expandable
  // segment's range unmapped, or mapped at the end, that the trace did not map.
  bool whole(const Trace& trace) const;

  // The state at the first event, once every event has been observed (by both observers, or by
  // observe_segment() alone where whole() is true); empty for a trace that holds its whole history.
  // Blocks the trace frees before allocating them existed at its start; so did segments it frees
  // without allocating, and the final segments it never allocated. A block's size comes from the
  // final snapshot when it is still there, else from the rounding and split rules (the space up to
  // the next block, when the allocator would not have split it off). An expandable segment's
  // ranges mapped at the first event are those mapped at the end, less those the trace mapped,
  // plus those it unmapped (walking back); its reservation starts at the lowest address known of
  // its stream and pool.
  InitialState finish(const Trace& trace, const AllocConf& conf) const;

 private:
  // Every address an alloc event used, and whether its block is still live.
  enum : uint8_t { kAllocatedAt = 1, kLive = 2 };
  struct PreBlock {
    uint64_t requested;
    StreamId stream;
    std::optional<uint64_t> size;  // known when the final snapshot still holds it
    bool pending_free = false;     // freed, its stream uses outstanding, all through the trace
  };

  void observe_free(const TraceEvent& e) {
    uint32_t* flags = addresses_.lookup(e.addr);
    if (flags && (*flags & kLive)) {
      if (e.action == TraceAction::kFreeCompleted) *flags = kAllocatedAt;
    } else if (!flags && !pre_blocks_.count(e.addr)) {
      pre_blocks_.emplace(e.addr, PreBlock{e.size, e.stream, std::nullopt});
    }
  }

  struct Mapping {
    uint64_t address, size;
    StreamId stream;
    bool map;  // else unmap
  };
  struct MappedRange {
    uint64_t end;
    StreamId stream;
  };
  // The ranges of expandable segments mapped at the first event, by address.
  std::map<uint64_t, MappedRange> mapped_at_start(const Trace& trace) const;
  // Appends them to `state`, with the blocks of `pre_blocks` they hold added later as for the
  // others.
  void add_expandable_ranges(const Trace& trace, const std::map<uint64_t, PreBlock>& pre_blocks,
                             InitialState& state) const;

  AddressMap addresses_;
  std::vector<Mapping> mappings_;            // segment_map and segment_unmap events, in order
  std::map<uint64_t, PreBlock> pre_blocks_;  // allocated before the window, by address
  AddressMap window_segments_;               // segments allocated inside the window
  std::map<uint64_t, std::pair<uint64_t, StreamId>> pre_segments_;  // address -> size, stream
};

}  // namespace allocsim
