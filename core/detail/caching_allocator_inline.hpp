// CachingAllocator's steps that are forced inline into its fast path and that more than one of its
// files use (core/caching_allocator.cpp, core/expandable_segments.cpp). Internal to core/.
#pragma once

#include "core/caching_allocator.hpp"

namespace allocsim {

// Inlined, with the arena's growth out of line: left to itself gcc moved it all out of line when
// the fast path grew (a call on every split).
[[gnu::always_inline]] inline BlockId CachingAllocator::new_block() {
  if (free_slots_.empty()) return grow_arena();
  const BlockId id = free_slots_.back();
  free_slots_.pop_back();
  blocks_[id] = Block{};
  blocks_[id].live = true;
  return id;
}

inline SizeKey CachingAllocator::size_key(BlockId b) const {
  const Block& block = blocks_[b];
  return SizeKey{block.stream, block.size, block.ptr, b};
}

[[gnu::always_inline]] inline void CachingAllocator::insert_into_blocks(BlockId b) {
  Block& block = blocks_[b];
  BlockPool& pool = pool_of(block);
  block.gc_count_base = pool.get_free_blocks_call_count;
  pool.blocks.insert(size_key(b));
}

}  // namespace allocsim
