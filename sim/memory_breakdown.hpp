// Where the memory is: a fragmentation breakdown of the allocator's state by pool and by segment
// size, and the source lines whose blocks hold the most memory at a given moment of a trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/caching_allocator.hpp"
#include "sim/trace.hpp"

namespace allocsim {

struct BreakdownRow {
  std::string group;  // "large pool", "small pool", or a segment size class
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
nlohmann::json to_json(const MemoryBreakdown& breakdown);
std::string to_text(const MemoryBreakdown& breakdown);

struct SiteUsage {
  std::string site;  // the first frame in the user's own code, and the innermost one
  uint64_t bytes = 0;
  uint64_t blocks = 0;
};

// The allocation sites (from the trace's stack frames) of the blocks live just before an event,
// largest first. Empty when the trace carries no frames.
std::vector<SiteUsage> sites_live_at(const Trace& trace, uint64_t event_index, size_t top = 5);

}  // namespace allocsim
