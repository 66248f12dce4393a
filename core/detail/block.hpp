// A block: a contiguous piece of one segment, free or handed out (PyTorch's Block). Internal to
// core/.
#pragma once

#include <cstdint>
#include <limits>

#include "core/types.hpp"

namespace allocsim {

// kNoBlock, besides a malloc that failed and a segment's end, is a real slot: the first of every
// allocator's arena, never live and read as allocated. The fast path reads a missing neighbour,
// and writes its links, as it would a real one, where a test of whether it exists would be a
// branch on data the predictor cannot learn.
static_assert(kNoBlock == 0, "Block::is_split tests both links at once");
inline constexpr uint32_t kNotExpandable = std::numeric_limits<uint32_t>::max();

struct Block {
  uint64_t ptr = 0;
  uint64_t size = 0;
  uint64_t requested_size = 0;  // what the user asked for (stats and trace only)
  StreamId stream = 0;          // allocation stream
  int64_t gc_count_base = 0;    // the pool's get_free_block count when last inserted
  BlockId prev = kNoBlock;      // neighbours inside the same segment
  BlockId next = kNoBlock;
  uint32_t expandable = kNotExpandable;  // index of its expandable segment, if any
  int32_t event_count = 0;               // outstanding stream uses after a deferred free
  uint16_t owner = 0;  // 0: the ordinary pools; k: the allocator's k-th private pool
  bool small = false;  // which pool it belongs to (of its owner's two)
  bool allocated = false;
  bool mapped = true;  // false only for unmapped address range of an expandable segment
  bool live = false;   // slot in use (blocks live in an arena with a free list)
  // Free, and in no pool's sets: its private pool was freed while it still held blocks, which
  // PyTorch leaves pointing at the freed pool (see CachingAllocator::erase_pool). Reached only by
  // merging with a neighbour that is freed or unmapped.
  bool lost = false;

  bool is_split() const { return (prev | next) != kNoBlock; }  // one test: kNoBlock is 0
};

}  // namespace allocsim
