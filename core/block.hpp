// A block: a contiguous piece of one segment, free or handed out (PyTorch's Block).
#pragma once

#include <cstdint>
#include <limits>

namespace allocsim {

using BlockId = uint32_t;
using StreamId = uint64_t;  // the raw cudaStream_t value; the legacy default stream is 0

// No block: a malloc that failed, a segment's end. Also a real slot, the first of every allocator's
// arena, which is never live and reads as allocated: the fast path reads a missing neighbour, and
// writes its links, as it would a real one, where a test of whether it exists would be a branch on
// data the predictor cannot learn.
inline constexpr BlockId kNoBlock = 0;
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
  bool small = false;                    // which pool it belongs to
  bool allocated = false;
  bool mapped = true;  // false only for unmapped address range of an expandable segment
  bool live = false;   // slot in use (blocks live in an arena with a free list)

  bool is_split() const { return (prev | next) != kNoBlock; }  // one test: kNoBlock is 0
};

}  // namespace allocsim
