// Where the memory is: a fragmentation breakdown of the allocator's state by pool and by segment
// size (rendered by sim/report/breakdown_format.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/caching_allocator.hpp"

namespace allocsim {

struct BreakdownRow {
  std::string group;  // "large pool", "small pool", "private pools, large" or "private pools,
                      // small" (CUDA graphs'), or a segment size class
  uint64_t segments = 0;
  uint64_t reserved = 0;
  uint64_t allocated = 0;
  uint64_t cached_free = 0;  // free blocks the allocator keeps
  uint64_t largest_free = 0;
  uint64_t free_in_split =
      0;  // free bytes in segments that also hold live blocks (cannot be released)
};

struct MemoryBreakdown {
  std::vector<BreakdownRow> by_pool;
  std::vector<BreakdownRow> by_segment_size;
};

MemoryBreakdown memory_breakdown(const CachingAllocator& allocator);
}  // namespace allocsim
