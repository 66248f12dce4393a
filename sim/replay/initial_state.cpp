#include "sim/replay/initial_state.hpp"

#include <algorithm>

#include "core/size_rounding.hpp"

namespace allocsim {

std::map<uint64_t, HistoryScan::MappedRange> HistoryScan::mapped_at_start(
    const Trace& trace) const {
  std::map<uint64_t, MappedRange> ranges;
  auto add = [&](uint64_t begin, uint64_t end, StreamId stream) {
    auto it = ranges.lower_bound(begin);
    if (it != ranges.begin()) {
      const auto before = std::prev(it);
      if (before->second.end >= begin && before->second.stream == stream) {
        begin = before->first;
        end = std::max(end, before->second.end);
        it = ranges.erase(before);
      }
    }
    while (it != ranges.end() && it->first <= end && it->second.stream == stream) {
      end = std::max(end, it->second.end);
      it = ranges.erase(it);
    }
    ranges[begin] = MappedRange{end, stream};
  };
  auto remove = [&](uint64_t begin, uint64_t end) {
    auto it = ranges.lower_bound(begin);
    if (it != ranges.begin()) {
      const auto before = std::prev(it);
      if (before->second.end > begin) {
        const MappedRange whole_range = before->second;
        before->second.end = begin;
        if (whole_range.end > end) ranges[end] = MappedRange{whole_range.end, whole_range.stream};
      }
    }
    it = ranges.lower_bound(begin);
    while (it != ranges.end() && it->first < end) {
      if (it->second.end > end) ranges[end] = MappedRange{it->second.end, it->second.stream};
      it = ranges.erase(it);
    }
  };
  for (const SnapshotSegment& seg : trace.segments) {
    if (seg.expandable) add(seg.address, seg.address + seg.total_size, seg.stream);
  }
  for (auto m = mappings_.rbegin(); m != mappings_.rend(); ++m) {
    if (m->map) {
      remove(m->address, m->address + m->size);
    } else {
      add(m->address, m->address + m->size, m->stream);
    }
  }
  return ranges;
}

void HistoryScan::add_expandable_ranges(const Trace& trace,
                                        const std::map<uint64_t, PreBlock>& pre_blocks,
                                        InitialState& state) const {
  const std::map<uint64_t, MappedRange> mapped = mapped_at_start(trace);
  auto pool_index = [&](MempoolId id) -> uint16_t {
    for (size_t k = 0; k < trace.private_pools.size(); ++k) {
      if (trace.private_pools[k].id == id) return static_cast<uint16_t>(k + 1);
    }
    return 0;
  };
  const size_t first = state.segments.size();
  for (const auto& entry : mapped) {
    const uint64_t address = entry.first;  // not a structured binding: the lambdas below use it
    const MappedRange range = entry.second;
    InitialSegment seg{address, range.end - address, range.stream, false, {}};
    seg.expandable = true;
    // Its pool: that of a final segment it overlaps (still mapped at the end), else small if the
    // blocks in it are (requests of at most 1 MiB go to the small pool), else if it is not whole
    // large pages; a private pool's where the inference listed one.
    const auto final_segment =
        std::find_if(trace.segments.begin(), trace.segments.end(), [&](const SnapshotSegment& s) {
          return s.expandable && s.stream == range.stream && s.address < range.end &&
                 address < s.address + s.total_size;
        });
    if (final_segment != trace.segments.end()) {
      seg.small = final_segment->small;
      seg.pool = pool_index(final_segment->pool);
    } else {
      bool any = false, large = false;
      for (auto it = pre_blocks.lower_bound(address);
           it != pre_blocks.end() && it->first < range.end; ++it) {
        any = true;
        large |= it->second.requested > kSmallSize;
      }
      const uint64_t page = trace.settings ? trace.settings->large_segment_size : kLargeBuffer;
      seg.small = any ? !large : seg.size % page != 0;
      const auto pool = std::lower_bound(trace.initial_pools.begin(), trace.initial_pools.end(),
                                         std::pair<uint64_t, uint16_t>(address, 0));
      if (pool != trace.initial_pools.end() && pool->first < range.end) seg.pool = pool->second;
    }
    state.segments.push_back(std::move(seg));
  }
  // Each stream's segment in a pool is one reservation, mapped from its start as it grows: it
  // starts at the lowest address known of it, at the first event or at the end.
  for (size_t i = first; i < state.segments.size(); ++i) {
    InitialSegment& seg = state.segments[i];
    auto same = [&](StreamId stream, bool small, uint16_t pool) {
      return stream == seg.stream && small == seg.small && pool == seg.pool;
    };
    seg.base = seg.address;
    for (size_t j = first; j < state.segments.size(); ++j) {
      const InitialSegment& other = state.segments[j];
      if (same(other.stream, other.small, other.pool)) seg.base = std::min(seg.base, other.address);
    }
    for (const SnapshotSegment& s : trace.segments) {
      if (s.expandable && same(s.stream, s.small, pool_index(s.pool)))
        seg.base = std::min(seg.base, s.address);
    }
  }
}

bool HistoryScan::whole(const Trace& trace) const {
  if (!pre_segments_.empty()) return false;
  if (!mapped_at_start(trace).empty()) return false;
  return std::all_of(trace.segments.begin(), trace.segments.end(), [&](const SnapshotSegment& seg) {
    return seg.expandable || window_segments_.find(seg.address);
  });
}

namespace {

// For each block of unknown size restored in an ordinary large-pool segment (one the trace frees
// before allocating it), the lowest address the trace allocated at after it, below the next block
// known at the first event, while it was still allocated: the free space after it began there
// (best fit allocates from the start of a free block), so the block reached that far.
std::map<uint64_t, uint64_t> first_allocs_after(const Trace& trace, const InitialState& state) {
  struct Unknown {
    uint64_t limit;
    bool freed = false;
    uint64_t lowest = UINT64_MAX;
  };
  std::map<uint64_t, Unknown> unknown;  // by the block's address
  for (const InitialSegment& seg : state.segments) {
    if (seg.small || seg.expandable) continue;
    for (size_t i = 0; i < seg.blocks.size(); ++i) {
      if (seg.blocks[i].size != 0) continue;
      const uint64_t limit =
          i + 1 < seg.blocks.size() ? seg.blocks[i + 1].address : seg.address + seg.size;
      unknown.emplace(seg.blocks[i].address, Unknown{limit});
    }
  }
  std::map<uint64_t, uint64_t> starts;
  if (unknown.empty()) return starts;
  for (const TraceEvent& e : trace.events) {
    auto it = unknown.upper_bound(e.addr);
    if (it == unknown.begin()) continue;
    --it;
    Unknown& u = it->second;
    if (e.action == TraceAction::kAlloc && !u.freed && e.addr > it->first && e.addr < u.limit) {
      u.lowest = std::min(u.lowest, e.addr);
    } else if ((e.action == TraceAction::kFreeRequested ||
                e.action == TraceAction::kFreeCompleted) &&
               e.addr == it->first) {
      u.freed = true;
    }
  }
  for (const auto& [address, u] : unknown) {
    if (u.lowest != UINT64_MAX) starts.emplace(address, u.lowest);
  }
  return starts;
}

}  // namespace

InitialState HistoryScan::finish(const Trace& trace, const AllocConf& conf) const {
  InitialState state;
  // Without segments from before the trace, its blocks from before are in none: nothing to restore.
  if (whole(trace)) return state;
  std::map<uint64_t, std::pair<uint64_t, StreamId>> pre_segments = pre_segments_;
  std::map<uint64_t, PreBlock> pre_blocks = pre_blocks_;
  std::map<uint64_t, bool> small_by_segment;
  for (const SnapshotSegment& seg : trace.segments) {
    if (seg.expandable || window_segments_.find(seg.address)) continue;
    pre_segments.emplace(seg.address, std::make_pair(seg.total_size, seg.stream));
    small_by_segment[seg.address] = seg.small;
    for (const SnapshotBlock& b : seg.blocks) {
      if (!b.active || addresses_.find(b.address)) continue;
      // Untouched by the trace: as the snapshot holds it, also at the first event.
      pre_blocks[b.address] = PreBlock{b.requested, seg.stream, b.size, !b.allocated};
    }
  }

  // Expandable segments' blocks untouched by the trace, as for the others above.
  for (const SnapshotSegment& seg : trace.segments) {
    if (!seg.expandable) continue;
    for (const SnapshotBlock& b : seg.blocks) {
      if (!b.active || addresses_.find(b.address)) continue;
      pre_blocks[b.address] = PreBlock{b.requested, seg.stream, b.size, !b.allocated};
    }
  }

  for (const auto& [address, info] : pre_segments) {
    InitialSegment seg{address, info.first, info.second, false, {}};
    // Only small-pool segments are 2 MiB: large-pool ones are 20 MiB or at least 10 MiB.
    const auto known = small_by_segment.find(address);
    seg.small = known != small_by_segment.end() ? known->second : info.first == kSmallBuffer;
    const auto pool = std::lower_bound(trace.initial_pools.begin(), trace.initial_pools.end(),
                                       std::pair<uint64_t, uint16_t>(address, 0));
    if (pool != trace.initial_pools.end() && pool->first == address) seg.pool = pool->second;
    state.segments.push_back(std::move(seg));
  }
  add_expandable_ranges(trace, pre_blocks, state);
  for (const auto& [address, pre] : pre_blocks) {
    auto it = std::find_if(state.segments.begin(), state.segments.end(),
                           [a = address](const InitialSegment& s) {
                             return a >= s.address && a < s.address + s.size;
                           });
    if (it == state.segments.end()) continue;  // in no segment known to have been there
    it->blocks.push_back({address, pre.size.value_or(0), pre.requested, pre.pending_free});
  }
  for (InitialSegment& seg : state.segments) {
    std::sort(seg.blocks.begin(), seg.blocks.end(),
              [](const auto& a, const auto& b) { return a.address < b.address; });
  }
  const std::map<uint64_t, uint64_t> free_block_starts = first_allocs_after(trace, state);
  for (InitialSegment& seg : state.segments) {
    auto& blocks = seg.blocks;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const uint64_t limit = i + 1 < blocks.size() ? blocks[i + 1].address : seg.address + seg.size;
      const uint64_t room = limit - blocks[i].address;
      if (blocks[i].size == 0) {
        const uint64_t rounded = round_size(blocks[i].requested, conf.roundup_power2_divisions);
        uint64_t size = rounded;
        // Left unsplit when allocated, the space up to the next block was part of it; the next
        // block is the next one known at the first event, or where the trace first allocated
        // after it while it lived (the free space after it began there). An expandable segment's
        // blocks are split whatever is left over.
        const auto start = free_block_starts.find(blocks[i].address);
        const bool shown = start != free_block_starts.end();
        for (const uint64_t space : {shown ? start->second - blocks[i].address : room, room}) {
          if (seg.small || seg.expandable || rounded > space || size != rounded) continue;
          const uint64_t slack = space - rounded;
          if (rounded >= conf.max_split_size ? slack < conf.max_non_split_rounding
                                             : slack <= kSmallSize)
            size = space;
        }
        // Split with free space after it that no allocation of the trace bounds.
        state.blocks_of_assumed_size +=
            !seg.small && !seg.expandable && !shown && size == rounded && rounded < room;
        blocks[i].size = size;
      }
      blocks[i].size = std::min(blocks[i].size, room);
    }
    blocks.erase(std::remove_if(blocks.begin(), blocks.end(),
                                [](const RestoredBlock& b) { return b.size == 0; }),
                 blocks.end());
  }
  return state;
}

}  // namespace allocsim
