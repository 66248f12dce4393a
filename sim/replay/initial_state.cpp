#include "sim/replay/initial_state.hpp"

#include <algorithm>

#include "core/size_rounding.hpp"

namespace allocsim {

bool HistoryScan::whole(const Trace& trace) const {
  if (!pre_segments_.empty()) return false;
  return std::all_of(trace.segments.begin(), trace.segments.end(), [&](const SnapshotSegment& seg) {
    return seg.expandable || window_segments_.find(seg.address);
  });
}

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
  for (const auto& [address, pre] : pre_blocks) {
    auto it = std::find_if(state.segments.begin(), state.segments.end(),
                           [a = address](const InitialSegment& s) {
                             return a >= s.address && a < s.address + s.size;
                           });
    if (it == state.segments.end()) continue;  // in no segment known to have been there
    it->blocks.push_back({address, pre.size.value_or(0), pre.requested, pre.pending_free});
  }
  for (InitialSegment& seg : state.segments) {
    auto& blocks = seg.blocks;
    std::sort(blocks.begin(), blocks.end(),
              [](const auto& a, const auto& b) { return a.address < b.address; });
    for (size_t i = 0; i < blocks.size(); ++i) {
      const uint64_t limit = i + 1 < blocks.size() ? blocks[i + 1].address : seg.address + seg.size;
      const uint64_t room = limit - blocks[i].address;
      if (blocks[i].size == 0) {
        const uint64_t rounded = round_size(blocks[i].requested, conf.roundup_power2_divisions);
        uint64_t size = rounded;
        if (!seg.small && rounded <= room) {
          const uint64_t slack = room - rounded;
          // Left unsplit when allocated: the space up to the next block was part of it.
          if (rounded >= conf.max_split_size ? slack < conf.max_non_split_rounding
                                             : slack <= kSmallSize)
            size = room;
        }
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
