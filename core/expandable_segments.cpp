// CachingAllocator's expandable segments (expandable_segments:True): one reserved address range per
// stream and pool, whose pages are mapped as blocks need them and unmapped when they are released
// (docs/pytorch-caching-allocator.md §4). Off the fast path: reached when no cached block fits.
#include <algorithm>

#include "core/caching_allocator.hpp"
#include "core/detail/caching_allocator_inline.hpp"
#include "core/size_rounding.hpp"

namespace allocsim {

BlockId CachingAllocator::find_expandable_block(StreamId stream, BlockPool& pool, uint64_t size) {
  auto allocatable = [this](BlockId id) {
    return id != kNoBlock && !blocks_[id].allocated && blocks_[id].event_count == 0;
  };
  auto has_room = [&](BlockId id) {
    uint64_t bytes = 0;
    while (bytes < size && allocatable(id)) {
      bytes += blocks_[id].size;
      id = blocks_[id].next;
    }
    return bytes >= size;
  };
  // The lowest address that fits wins, so holes left by unmapping fill before the tail grows.
  for (auto it = pool.unmapped.lower_bound(AddressKey{stream, 0, 0});
       it != pool.unmapped.end() && it->stream == stream; ++it) {
    BlockId c = it->id;
    if (allocatable(blocks_[c].prev)) c = blocks_[c].prev;
    if (has_room(c)) return c;
  }
  return new_expandable_segment(stream, pool);
}

BlockId CachingAllocator::new_expandable_segment(StreamId stream, BlockPool& pool,
                                                 uint64_t at_least) {
  const uint64_t page = pool.small ? kSmallBuffer : conf_.large_segment_size;
  const uint64_t total = device_.mem_get_info().total;
  ExpandableSegment es;
  es.page = page;
  es.max_pages = std::max((total + total / 8 + page - 1) / page,  // 1 1/8 of the device
                          (at_least + page - 1) / page);
  es.stream = stream;
  es.small = pool.small;
  es.live = true;
  const auto base = device_.reserve_address(es.page * es.max_pages, page);
  if (!base) return kNoBlock;
  es.base = *base;
  expandable_segments_.push_back(std::move(es));
  const ExpandableSegment& seg = expandable_segments_.back();
  const BlockId id = new_block();
  Block& b = blocks_[id];
  b.ptr = seg.base;
  b.size = seg.page * seg.max_pages;
  b.stream = stream;
  b.small = pool.small;
  b.owner = pool.owner;
  b.mapped = false;
  b.expandable = static_cast<uint32_t>(expandable_segments_.size() - 1);
  insert_unmapped(id);
  return id;
}

bool CachingAllocator::map_block(BlockId to_map, uint64_t size, bool restoring) {
  ExpandableSegment& es = expandable_segments_[blocks_[to_map].expandable];
  const uint64_t start = blocks_[to_map].ptr - es.base;
  const uint64_t begin = start / es.page;
  const uint64_t end = (start + size + es.page - 1) / es.page;
  if (begin == end) return false;
  const uint64_t mapped_size = (end - begin) * es.page;
  if (!device_.map(es.base + begin * es.page, mapped_size, es.page)) return false;
  if (es.page_mapped.size() < end) es.page_mapped.resize(end, false);
  for (uint64_t i = begin; i < end; ++i) es.page_mapped[i] = true;

  erase_unmapped(to_map);
  blocks_[to_map].mapped = true;
  if (mapped_size < blocks_[to_map].size) {
    // to_map -> remaining (still unmapped) -> old next
    const BlockId rem = split_block(to_map, blocks_[to_map].ptr + mapped_size);
    blocks_[rem].mapped = false;
    insert_unmapped(rem);
  }
  BlockPool& pool = pool_of(blocks_[to_map]);
  try_merge_blocks(to_map, blocks_[to_map].prev, pool);
  try_merge_blocks(to_map, blocks_[to_map].next, pool);
  insert_into_blocks(to_map);

  const Block& m = blocks_[to_map];
  if (m.owner != 0) reserve_in_private_pool(m.owner, m.small, mapped_size);
  total_allocated_memory_ += mapped_size;
  stats_.reserved_bytes.increase(m.small, mapped_size);
  if (restoring) return true;
  stats_.num_device_alloc++;
  record(DeviceOpKind::kSegmentMap, es.base + begin * es.page, mapped_size, m.stream);
  return true;
}

BlockId CachingAllocator::new_block_like(BlockId b) {
  const BlockId id = new_block();  // may move blocks_: references are taken after it
  Block& block = blocks_[id];
  const Block& like = blocks_[b];
  block.stream = like.stream;
  block.small = like.small;
  block.owner = like.owner;
  block.mapped = like.mapped;
  block.expandable = like.expandable;
  return id;
}

BlockId CachingAllocator::split_block(BlockId b, uint64_t at) {
  const BlockId id = new_block_like(b);
  Block& rest = blocks_[id];
  Block& head = blocks_[b];
  rest.ptr = at;
  rest.size = head.ptr + head.size - at;
  rest.prev = b;
  rest.next = head.next;
  if (head.next != kNoBlock) blocks_[head.next].prev = id;
  head.next = id;
  head.size = at - head.ptr;
  return id;
}

std::optional<std::vector<BlockId>> CachingAllocator::restore_expandable_range(
    uint64_t base, uint64_t address, uint64_t size, StreamId stream, bool small,
    const std::vector<RestoredBlock>& allocated, MempoolId pool_id) {
  if (!caching_) return std::nullopt;
  const uint16_t owner = pool_id.ordinary() ? 0 : find_pool(pool_id);
  if (!pool_id.ordinary() && owner == 0) return std::nullopt;
  BlockPool& pool = owner == 0 ? pools_[small] : private_pools_[owner - 1].pools[small];
  const uint64_t page = small ? kSmallBuffer : conf_.large_segment_size;
  if (size == 0 || size % page != 0 || address < base || (address - base) % page != 0)
    return std::nullopt;
  if (!restored_blocks_fit(address, size, allocated)) return std::nullopt;
  // The unmapped block of the stream's segment in this pool that holds the range.
  auto holding = [&]() -> BlockId {
    for (auto it = pool.unmapped.lower_bound(AddressKey{stream, 0, 0});
         it != pool.unmapped.end() && it->stream == stream; ++it) {
      const Block& u = blocks_[it->id];
      if (expandable_segments_[u.expandable].base == base && u.ptr <= address &&
          address + size <= u.ptr + u.size)
        return it->id;
    }
    return kNoBlock;
  };
  BlockId unmapped = holding();
  if (unmapped == kNoBlock) {
    for (const ExpandableSegment& es : expandable_segments_) {
      if (es.live && es.base == base) return std::nullopt;  // the range overlaps a mapped one
    }
    // A range restored on a smaller device than the one that mapped it still fits its reservation.
    unmapped = new_expandable_segment(stream, pool, address + size - base);
    if (unmapped == kNoBlock) return std::nullopt;
    if (blocks_[unmapped].ptr != base || address + size > base + blocks_[unmapped].size) {
      release_expandable_segment(unmapped);
      return std::nullopt;
    }
  }
  if (blocks_[unmapped].ptr < address) {
    erase_unmapped(unmapped);
    const BlockId upper = split_block(unmapped, address);
    insert_unmapped(unmapped);
    insert_unmapped(upper);
    unmapped = upper;
  }
  if (!map_block(unmapped, size, /*restoring=*/true)) return std::nullopt;
  if (owner != 0) ++private_pools_[owner - 1].device_allocs;  // one for each range, unknowable

  // map_block left [address, address + size) in one free block (with a free mapped neighbour
  // merged in, where one adjoins it). Carve the allocated blocks out of it.
  std::vector<BlockId> result;
  BlockId free_rest = unmapped;
  erase_from_blocks(free_rest);
  for (const RestoredBlock& r : allocated) {
    if (blocks_[free_rest].ptr < r.address) {
      const BlockId at = split_block(free_rest, r.address);
      insert_into_blocks(free_rest);
      free_rest = at;
    }
    BlockId block = free_rest;
    free_rest = kNoBlock;
    if (blocks_[block].size > r.size) free_rest = split_block(block, r.address + r.size);
    blocks_[block].allocated = true;
    blocks_[block].requested_size = r.requested;
    count_restored_allocation(block);
    result.push_back(block);
    if (free_rest == kNoBlock) break;
  }
  if (free_rest != kNoBlock) insert_into_blocks(free_rest);
  free_restored_pending(result, allocated);
  return result;
}

BlockId CachingAllocator::try_allocate_expandable_block(StreamId stream, BlockPool& pool,
                                                        uint64_t size) {
  BlockId candidate = find_expandable_block(stream, pool, size);
  if (candidate == kNoBlock) return kNoBlock;
  // candidate is unmapped, or free and followed by enough unmapped room.
  if (!blocks_[candidate].mapped &&
      !map_block(candidate, std::min(blocks_[candidate].size, size))) {
    return kNoBlock;
  }
  while (blocks_[candidate].size < size) {
    const uint64_t remaining = size - blocks_[candidate].size;
    const BlockId next = blocks_[candidate].next;
    if (!map_block(next, std::min(remaining, blocks_[next].size))) return kNoBlock;
    candidate = next;  // map_block merged the old candidate into it
  }
  erase_from_blocks(candidate);
  return candidate;
}

void CachingAllocator::unmap_block(BlockId id) {
  ExpandableSegment& es = expandable_segments_[blocks_[id].expandable];
  const uint64_t start = blocks_[id].ptr - es.base;
  const uint64_t begin = (start + es.page - 1) / es.page;  // whole pages inside the block only
  const uint64_t end = (start + blocks_[id].size) / es.page;
  if (begin >= end) return;
  const uint64_t unmapped_ptr = es.base + begin * es.page;
  const uint64_t unmapped_size = (end - begin) * es.page;
  device_.unmap(unmapped_ptr, unmapped_size, es.page);
  for (uint64_t i = begin; i < end; ++i) es.page_mapped[i] = false;
  while (!es.page_mapped.empty() && !es.page_mapped.back()) es.page_mapped.pop_back();

  erase_from_blocks(id);
  const uint64_t before_size = unmapped_ptr - blocks_[id].ptr;
  if (before_size > 0) {  // prev -> before_free -> block
    const BlockId before = new_block_like(id);
    Block& b = blocks_[id];
    Block& f = blocks_[before];
    f.ptr = b.ptr;
    f.size = before_size;
    f.prev = b.prev;
    f.next = id;
    if (b.prev != kNoBlock) blocks_[b.prev].next = before;
    b.prev = before;
    insert_into_blocks(before);
  }
  const uint64_t after_size = blocks_[id].size - (before_size + unmapped_size);
  if (after_size > 0) {  // block -> after_free -> next
    insert_into_blocks(split_block(id, unmapped_ptr + unmapped_size));
  }
  Block& b = blocks_[id];
  b.ptr = unmapped_ptr;
  b.size = unmapped_size;
  b.mapped = false;
  BlockPool& pool = pool_of(b);
  try_merge_blocks(id, blocks_[id].prev, pool);
  try_merge_blocks(id, blocks_[id].next, pool);
  insert_unmapped(id);

  const Block& u = blocks_[id];
  if (u.owner != 0) release_in_private_pool(u.owner, u.small, unmapped_size);
  count_device_free(u.owner);
  total_allocated_memory_ -= unmapped_size;
  stats_.reserved_bytes.decrease(u.small, unmapped_size);
  stats_.num_device_free++;
  record(DeviceOpKind::kSegmentUnmap, unmapped_ptr, unmapped_size, u.stream);
}

void CachingAllocator::release_expandable_segment(BlockId id) {
  ExpandableSegment& es = expandable_segments_[blocks_[id].expandable];
  device_.release_address(es.base, es.page * es.max_pages);
  es.live = false;
  erase_unmapped(id);
  delete_block(id);
}

}  // namespace allocsim
