#include "sim/replay/memory_breakdown.hpp"

#include <algorithm>
#include <array>
#include <iterator>

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

// Segment size classes, in display order.
constexpr const char* kSizeClassNames[] = {"2 MiB (small pool)", "<= 20 MiB", "20-128 MiB",
                                           "128 MiB-1 GiB",      "> 1 GiB",   "expandable"};

size_t size_class(uint64_t segment_size, bool expandable) {
  if (expandable) return 5;
  if (segment_size <= 2 * MiB) return 0;
  if (segment_size <= 20 * MiB) return 1;
  if (segment_size <= 128 * MiB) return 2;
  if (segment_size <= 1024 * MiB) return 3;
  return 4;
}

}  // namespace

MemoryBreakdown memory_breakdown(const CachingAllocator& allocator) {
  // Group blocks into segments (an expandable segment's mapped ranges count one each).
  struct Segment {
    bool small, expandable, private_pool;
    uint64_t size = 0, allocated = 0, free = 0, largest_free = 0;
  };
  std::vector<Segment> segments;
  allocator.for_each_block([&](const BlockInfo& b) {
    if (!b.mapped) return;
    if (b.segment_start || segments.empty())
      segments.push_back({b.small, b.expandable, !b.pool.ordinary()});
    Segment& s = segments.back();
    s.size += b.size;
    if (b.allocated || b.pending_free) {
      s.allocated += b.size;
    } else {
      s.free += b.size;
      s.largest_free = std::max(s.largest_free, b.size);
    }
  });
  // Rows by index, named and kept if used at the end: the large pool before the small (as the
  // names sort), then CUDA graphs' private pools likewise, the size classes in display order. Run
  // after every replay, so no maps.
  std::array<BreakdownRow, 4> pools{};
  std::array<BreakdownRow, std::size(kSizeClassNames)> classes{};
  for (const Segment& s : segments) {
    for (BreakdownRow* row : {&pools[(s.private_pool ? 2u : 0u) + (s.small ? 1u : 0u)],
                              &classes[size_class(s.size, s.expandable)]}) {
      row->segments += 1;
      row->reserved += s.size;
      row->allocated += s.allocated;
      row->cached_free += s.free;
      row->largest_free = std::max(row->largest_free, s.largest_free);
      if (s.allocated > 0) row->free_in_split += s.free;
    }
  }
  MemoryBreakdown out;
  auto keep_used = [](std::vector<BreakdownRow>& to, BreakdownRow& row, const char* name) {
    if (row.segments == 0) return;
    row.group = name;
    to.push_back(std::move(row));
  };
  keep_used(out.by_pool, pools[0], "large pool");
  keep_used(out.by_pool, pools[1], "small pool");
  keep_used(out.by_pool, pools[2], "private pools, large");
  keep_used(out.by_pool, pools[3], "private pools, small");
  for (size_t c = 0; c < classes.size(); ++c)
    keep_used(out.by_segment_size, classes[c], kSizeClassNames[c]);
  return out;
}

}  // namespace allocsim
