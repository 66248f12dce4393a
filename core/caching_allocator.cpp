#include "core/caching_allocator.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "core/detail/caching_allocator_inline.hpp"
#include "core/size_rounding.hpp"

namespace allocsim {
namespace {

constexpr uint64_t kOneExaByte = uint64_t{1} << 60;

}  // namespace

CachingAllocator::CachingAllocator(Device& device, AllocatorOptions options)
    : device_(device),
      conf_(std::move(options.conf)),
      caching_(options.caching),
      record_device_ops_(options.record_device_ops),
      device_index_(options.device_index),
      torch_version_(options.torch_version),
      rounds_to_divisions_(rounds_to_divisions(conf_.roundup_power2_divisions)) {
  blocks_.emplace_back().allocated = true;  // kNoBlock's slot: never live, never mergeable
  stats_.max_split_size = static_cast<int64_t>(conf_.max_split_size);
  if (conf_.per_process_memory_fraction) set_memory_fraction(*conf_.per_process_memory_fraction);
}

void CachingAllocator::change_settings(AllocConf conf) {
  conf_ = std::move(conf);
  rounds_to_divisions_ = rounds_to_divisions(conf_.roundup_power2_divisions);
}

// ---- block arena and pool bookkeeping ----------------------------------------------------

[[gnu::noinline]] BlockId CachingAllocator::grow_arena() {
  blocks_.emplace_back().live = true;
  return static_cast<BlockId>(blocks_.size() - 1);
}

void CachingAllocator::delete_block(BlockId b) {
  blocks_[b].live = false;
  free_slots_.push_back(b);
}

void CachingAllocator::erase_from_blocks(BlockId b) {
  pool_of(blocks_[b]).blocks.erase(size_key(b));
}

void CachingAllocator::insert_unmapped(BlockId b) {
  const Block& block = blocks_[b];
  pool_of(block).unmapped.insert(AddressKey{block.stream, block.ptr, b});
}

void CachingAllocator::erase_unmapped(BlockId b) {
  const Block& block = blocks_[b];
  pool_of(block).unmapped.erase(AddressKey{block.stream, block.ptr, b});
}

void CachingAllocator::record(DeviceOpKind kind, uint64_t address, uint64_t size, StreamId stream) {
  if (record_device_ops_) device_ops_.push_back(DeviceOp{kind, address, size, stream});
}

std::optional<uint64_t> CachingAllocator::allowed_memory_maximum() const {
  if (!set_fraction_) return std::nullopt;
  return allowed_memory_maximum_;
}

void CachingAllocator::set_memory_fraction(double fraction) {
  set_fraction_ = false;  // the whole card is no limit at all
  if (fraction >= 1.0) return;
  const double bytes = fraction * static_cast<double>(device_.mem_get_info().total);
  // Truncated to whole bytes until 2.13, rounded from then on.
  set_memory_limit(
      static_cast<uint64_t>(torch_version_.rounds_fraction_limit() ? std::round(bytes) : bytes));
}

void CachingAllocator::set_memory_limit(uint64_t bytes) {
  allowed_memory_maximum_ = bytes;
  set_fraction_ = true;
}

// ---- malloc -------------------------------------------------------------------------------

BlockId CachingAllocator::malloc(uint64_t n, StreamId stream) {
  return malloc_with(n, stream, FullRelease::kAllowed);
}

BlockId CachingAllocator::malloc_in_unknown_capture(uint64_t n, StreamId stream) {
  return malloc_with(n, stream, FullRelease::kSkipped);
}

[[gnu::always_inline]] inline BlockId CachingAllocator::malloc_with(uint64_t n, StreamId stream,
                                                                    FullRelease full_release) {
  last_oom_.reset();
  if (n >= kOneExaByte) {
    OutOfMemory oom;
    oom.requested = n;
    oom.too_large = true;
    oom.device_index = device_index_;
    last_oom_ = oom;
    return kNoBlock;
  }
  if (!caching_) return malloc_uncached(n, stream);

  // Without divisions (as mostly), the rounding is one step without a table lookup.
  const uint64_t size =
      rounds_to_divisions_ ? round_size(n, conf_.roundup_power2_divisions) : round_to_min_blocks(n);
  BlockPool* pool = &pools_[is_small_size(size)];
  if (!captures_underway_.empty()) [[unlikely]]
    pool = &pool_for(size, stream);
  Request r{size, stream, pool};

  // The free-memory callbacks (CUDA IPC) have nothing to free in a simulation.
  bool found = get_free_block(r);
  if (!found) {
    if (set_fraction_ && conf_.garbage_collection_threshold > 0.0) garbage_collect_cached_blocks();
    found = alloc_block(r, false) || (!use_on_oom_pools_.empty() && try_mempool_fallback(r)) ||
            (!r.rejected && release_available_cached_blocks(r) && alloc_block(r, false)) ||
            (!r.rejected && captures_underway_.empty() && full_release == FullRelease::kAllowed &&
             release_cached_blocks() && alloc_block(r, true));
  }
  if (!found) {
    if (r.rejected) {
      OutOfMemory oom;
      oom.requested = n;
      oom.rejected = true;
      oom.device_index = device_index_;
      last_oom_ = oom;
    } else {
      raise_oom(r, n);
    }
    return kNoBlock;
  }
  const bool split =
      should_split(blocks_[r.block], size, conf_.expandable_segments && !r.from_fallback);
  return alloc_found_block(r, n, split);
}

bool CachingAllocator::holds_releasable_segment() const {
  for (const BlockPool* p : {&large_pool(), &small_pool()}) {
    for (const SizeKey& k : p->blocks) {
      const Block& b = blocks_[k.id];
      if (b.expandable == kNotExpandable) {
        if (!b.is_split()) return true;
      } else if (b.mapped) {  // as unmap_block: a whole page inside the block
        const ExpandableSegment& es = expandable_segments_[b.expandable];
        const uint64_t start = b.ptr - es.base;
        if ((start + es.page - 1) / es.page < (start + b.size) / es.page) return true;
      }
    }
  }
  return false;
}

void CachingAllocator::raise_oom(const Request& r, uint64_t n) {
  const DeviceMemInfo info = device_.mem_get_info();
  OutOfMemory oom;
  oom.requested = n;
  oom.rounded = r.size;
  oom.alloc_size = allocation_size(r.size, conf_.large_segment_size);
  oom.stream = r.stream;
  oom.device_free = info.free;
  oom.device_total = info.total;
  oom.device_index = device_index_;
  if (set_fraction_) oom.allowed = allowed_memory_maximum_;
  oom.allocated = static_cast<uint64_t>(stats_.allocated_bytes[kAggregate].current);
  oom.reserved = static_cast<uint64_t>(stats_.reserved_bytes[kAggregate].current);
  if (!private_pools_.empty()) oom.allocated_in_private_pools = free_bytes_in_private_pools();
  stats_.num_ooms += 1;
  last_oom_ = oom;
}

BlockId CachingAllocator::malloc_uncached(uint64_t n, StreamId stream) {
  const auto ptr = device_.malloc(n);
  if (!ptr) {
    const DeviceMemInfo info = device_.mem_get_info();
    OutOfMemory oom;
    oom.requested = oom.rounded = oom.alloc_size = n;
    oom.stream = stream;
    oom.device_free = info.free;
    oom.device_total = info.total;
    oom.device_index = device_index_;
    last_oom_ = oom;
    return kNoBlock;
  }
  const BlockId id = new_block();
  Block& b = blocks_[id];
  b.ptr = *ptr;
  b.size = b.requested_size = n;
  b.stream = stream;
  b.allocated = true;
  record(DeviceOpKind::kSegmentAlloc, *ptr, n, stream);
  return id;
}

[[gnu::always_inline]] inline bool CachingAllocator::get_free_block(Request& r) {
  BlockPool& pool = *r.pool;
  if (set_fraction_ && conf_.garbage_collection_threshold > 0.0) {
    ++pool.get_free_blocks_call_count;  // ages blocks for the garbage collector
  }
  const auto it = find_free_block(r);
  if (it == pool.blocks.end()) return false;
  r.block = it->id;
  r.in_pool = true;
  r.position = it;
  return true;
}

[[gnu::always_inline]] inline SizeKeySet::const_iterator CachingAllocator::find_free_block(
    const Request& r) const {
  const BlockPool& pool = *r.pool;
  auto it = pool.blocks.lower_bound(SizeKey{r.stream, r.size, 0, 0});
  if (it == pool.blocks.end() || it->stream != r.stream) return pool.blocks.end();

  if (blocks_[it->id].expandable != kNotExpandable) {
    it = skip_expandable(r, it);
    if (it == pool.blocks.end()) return it;
  }
  const uint64_t max_split = conf_.max_split_size;
  if (r.size < max_split && it->size >= max_split)
    return pool.blocks.end();  // never split oversize
  if (r.size >= max_split && it->size >= r.size + conf_.max_non_split_rounding)
    return pool.blocks.end();
  return it;
}

bool CachingAllocator::has_free_block_for(uint64_t n, StreamId stream) const {
  if (n == 0 || n >= kOneExaByte || !caching_) return false;
  const uint64_t size =
      rounds_to_divisions_ ? round_size(n, conf_.roundup_power2_divisions) : round_to_min_blocks(n);
  const BlockPool& pool = pools_[is_small_size(size)];
  // find_free_block only reads the pool a Request points to.
  const Request r{size, stream, const_cast<BlockPool*>(&pool)};
  return find_free_block_outlined(r) != pool.blocks.end();
}

// One more inlined best-fit search would tip gcc into outlining the set's search in malloc.
[[gnu::noinline]] SizeKeySet::const_iterator CachingAllocator::find_free_block_outlined(
    const Request& r) const {
  return find_free_block(r);
}

// Best fit found an expandable block at `it`: the block to use instead, or end() if none.
SizeKeySet::const_iterator CachingAllocator::skip_expandable(const Request& r,
                                                             SizeKeySet::const_iterator it) const {
  const BlockPool& pool = *r.pool;
  if (conf_.expandable_segments) {
    // Best fit measures an expandable block by what it can grow to: skip a block in front of
    // the unmapped tail when a later one is less expandable.
    auto expandable_size = [this](BlockId id) {
      const Block& b = blocks_[id];
      return b.size + (b.next != kNoBlock && !blocks_[b.next].mapped ? blocks_[b.next].size : 0);
    };
    auto next = std::next(it);
    while (blocks_[it->id].expandable != kNotExpandable && next != pool.blocks.end() &&
           next->stream == r.stream && expandable_size(next->id) < expandable_size(it->id)) {
      it = next++;
    }
    return it;
  }
  // Expandable segments were switched off: use only ordinary blocks.
  do {
    ++it;
  } while (it != pool.blocks.end() && blocks_[it->id].expandable != kNotExpandable &&
           it->stream == r.stream);
  if (it == pool.blocks.end() || it->stream != r.stream) return pool.blocks.end();
  return it;
}

// PyTorch 2.12 on, with throw_on_cudamalloc_oom: a request that would take the reserved memory
// past the settings' per_process_memory_fraction of the card is refused before any device call.
// The fraction is the settings' (1.0 without one), not set_per_process_memory_fraction's.
bool CachingAllocator::rejects(Request& r, uint64_t size) {
  const double fraction = conf_.per_process_memory_fraction.value_or(1.0);
  const auto limit =
      static_cast<uint64_t>(static_cast<double>(device_.mem_get_info().total) * fraction);
  if (total_allocated_memory_ + size <= limit) return false;
  stats_.num_oom_rejections += 1;
  r.rejected = true;
  return true;
}

bool CachingAllocator::alloc_block(Request& r, bool is_retry) {
  if (is_retry) stats_.num_alloc_retries += 1;
  const uint64_t size = allocation_size(r.size, conf_.large_segment_size);
  if (set_fraction_ && total_allocated_memory_ + size > allowed_memory_maximum_) return false;
  if (conf_.throw_on_cudamalloc_oom && torch_version_.has_oom_rejections() && rejects(r, size))
    return false;
  if (conf_.expandable_segments) {
    r.block = try_allocate_expandable_block(r.stream, *r.pool, r.size);
    if (r.block != kNoBlock && r.pool->owner != 0)
      ++private_pools_[r.pool->owner - 1].device_allocs;
    return r.block != kNoBlock;
  }
  const auto ptr = device_.malloc(size);
  if (!ptr) return false;
  total_allocated_memory_ += size;
  const BlockId id = new_block();
  Block& b = blocks_[id];
  b.ptr = *ptr;
  b.size = size;
  b.stream = r.stream;
  b.small = r.pool->small;
  b.owner = r.pool->owner;
  if (b.owner != 0) {
    reserve_in_private_pool(b.owner, b.small, size);
    ++private_pools_[b.owner - 1].device_allocs;
  }
  segments_.emplace(*ptr, size);
  stats_.segment.increase(b.small, 1);
  stats_.reserved_bytes.increase(b.small, size);
  if (size >= conf_.max_split_size) stats_.oversize_segments.increase(1);
  stats_.num_device_alloc++;
  record(DeviceOpKind::kSegmentAlloc, *ptr, size, r.stream);
  r.block = id;
  return true;
}

// Without branches: whether the block is small is data the predictor cannot learn, and the
// caller branches on the outcome anyway.
bool CachingAllocator::should_split(const Block& b, uint64_t size, bool expandable_active) const {
  if (b.owner != 0 && private_pools_[b.owner - 1].no_split) [[unlikely]]
    return false;
  const uint64_t remaining = b.size - size;
  const bool small_rule = b.small | expandable_active;
  return (small_rule & (remaining >= kMinBlockSize)) |
         (!small_rule & (size < conf_.max_split_size) & (remaining > kSmallSize));
}

[[gnu::always_inline]] inline BlockId CachingAllocator::alloc_found_block(Request& r,
                                                                          uint64_t orig_size,
                                                                          bool split_remainder) {
  BlockId id = r.block;
  const bool already_split = blocks_[id].is_split();
  const bool small = blocks_[id].small;
  if (split_remainder) {
    // The allocation takes the low addresses; the remainder keeps the rest and goes back.
    const BlockId remaining = id;
    id = new_block();
    Block& rem = blocks_[remaining];
    Block& block = blocks_[id];
    block.ptr = rem.ptr;
    block.size = r.size;
    block.stream = r.stream;
    block.small = rem.small;
    block.owner = rem.owner;
    block.expandable = rem.expandable;
    block.prev = rem.prev;
    blocks_[block.prev].next = id;  // kNoBlock's slot too, which nothing reads
    block.next = remaining;
    rem.prev = id;
    rem.ptr += r.size;
    rem.size -= r.size;
    if (r.in_pool) {  // the remainder takes the found block's place in the pool
      rem.gc_count_base = r.pool->get_free_blocks_call_count;
      r.pool->blocks.rekey(r.position, size_key(remaining));
    } else {
      insert_into_blocks(remaining);
    }
    if (block.expandable == kNotExpandable) {
      if (already_split) {
        stats_.inactive_split_bytes.decrease(small, r.size);
      } else {
        stats_.inactive_split_bytes.increase(small, rem.size);
        stats_.inactive_split.increase(small, 1);
      }
    }
  } else {
    if (r.in_pool) r.pool->blocks.erase(r.position);
    if (already_split && blocks_[id].expandable == kNotExpandable) {
      stats_.inactive_split_bytes.decrease(small, blocks_[id].size);
      stats_.inactive_split.decrease(small, 1);
    }
  }
  Block& block = blocks_[id];
  block.allocated = true;
  block.requested_size = orig_size;
  stats_.allocation.increase(small, 1);
  stats_.allocated_bytes.increase(small, block.size);
  if (stats_.deferred.any()) note_active_peaks();
  stats_.requested_bytes.increase(small, orig_size);
  if (block.size >= conf_.max_split_size) stats_.oversize_allocations.increase(1);
  return id;
}

// ---- free ---------------------------------------------------------------------------------

void CachingAllocator::free(BlockId id, bool pending_stream_uses) {
  Block& block = blocks_[id];
  assert(block.live && block.allocated);
  if (!caching_) {
    device_.free(block.ptr, block.size);
    record(DeviceOpKind::kSegmentFree, block.ptr, block.size, block.stream);
    delete_block(id);
    return;
  }
  block.allocated = false;
  stats_.allocation.decrease(block.small, 1);
  stats_.allocated_bytes.decrease(block.small, block.size);
  if (block.size >= conf_.max_split_size) stats_.oversize_allocations.decrease(1);
  if (pending_stream_uses) {
    block.event_count = 1;
    pending_frees_.push_back(id);
    stats_.deferred.add(block.small, 1);
    stats_.deferred_bytes.add(block.small, block.size);
  } else {
    free_block(id);
  }
}

bool CachingAllocator::is_pending_free(BlockId id) const {
  return blocks_[id].live && !blocks_[id].allocated && blocks_[id].event_count > 0;
}

void CachingAllocator::complete_deferred_free(BlockId id) {
  if (!is_pending_free(id)) return;
  pending_frees_.erase(std::find(pending_frees_.begin(), pending_frees_.end(), id));
  end_deferral(id);
  free_block(id);
}

void CachingAllocator::end_deferral(BlockId id) {
  Block& block = blocks_[id];
  block.event_count = 0;
  stats_.deferred.remove(block.small, 1);
  stats_.deferred_bytes.remove(block.small, block.size);
}

[[gnu::noinline]] void CachingAllocator::note_active_peaks() {
  stats_.deferred.note_active_peaks(stats_.allocation);
  stats_.deferred_bytes.note_active_peaks(stats_.allocated_bytes);
}

[[gnu::always_inline]] inline void CachingAllocator::free_block(BlockId id) {
  // Blocks are lost only once a pool was freed holding some.
  if (freed_pools_holding_blocks_.pools != 0 &&
      (blocks_[blocks_[id].prev].lost || blocks_[blocks_[id].next].lost)) [[unlikely]] {
    free_block_beside_lost(id);
    return;
  }
  merge_into_pool(id);
}

[[gnu::always_inline]] inline void CachingAllocator::merge_into_pool(BlockId id) {
  Block& block = blocks_[id];
  const uint64_t requested = block.requested_size;
  const bool small = block.small;
  BlockPool& pool = pool_of(block);
  int64_t net_split_blocks = 0;
  int64_t net_split_bytes = 0;
  // The merged block takes the first merged neighbour's place in the pool.
  std::optional<SizeKey> replaced;
  auto merge = [&](BlockId candidate) __attribute__((always_inline)) {
    // can_merge(), knowing the freed block is mapped: one test (kNoBlock's slot reads as
    // allocated), as whether a neighbour exists and is free is data the predictor cannot learn.
    const Block& c = blocks_[candidate];
    if (!(!c.allocated & (c.event_count == 0) & c.mapped)) return;
    const SizeKey key = size_key(candidate);
    if (replaced) {
      pool.blocks.erase(key);
    } else {
      replaced = key;
    }
    const uint64_t subsumed = absorb(id, candidate);
    net_split_blocks -= 1;
    net_split_bytes -= static_cast<int64_t>(subsumed);
  };
  merge(block.prev);  // a call each rather than a loop: each gets its own branches to predict
  merge(block.next);
  if (replaced) {
    blocks_[id].gc_count_base = pool.get_free_blocks_call_count;
    pool.blocks.rekey(pool.blocks.find(*replaced), size_key(id));
  } else {
    insert_into_blocks(id);
  }
  const Block& merged = blocks_[id];
  const bool split = merged.is_split();  // without a branch: data the predictor cannot learn
  net_split_blocks += split;
  net_split_bytes += static_cast<int64_t>(merged.size) & -static_cast<int64_t>(split);
  // Expandable blocks are left out of inactive_split: their free pages can always be released.
  if (merged.expandable == kNotExpandable) {
    // Signed nets, each applied as the unsigned amount of its sign.
    if (net_split_blocks > 0)
      stats_.inactive_split.increase(small, static_cast<uint64_t>(net_split_blocks));
    if (net_split_blocks < 0)
      stats_.inactive_split.decrease(small, static_cast<uint64_t>(-net_split_blocks));
    if (net_split_bytes > 0) {
      stats_.inactive_split_bytes.increase(small, static_cast<uint64_t>(net_split_bytes));
    }
    if (net_split_bytes < 0) {
      stats_.inactive_split_bytes.decrease(small, static_cast<uint64_t>(-net_split_bytes));
    }
  }
  stats_.requested_bytes.decrease(small, requested);
}

bool CachingAllocator::can_merge(BlockId dst_id, BlockId src_id) const {
  const Block& src = blocks_[src_id];  // kNoBlock's slot reads as allocated
  return !src.allocated && src.event_count == 0 && blocks_[dst_id].mapped == src.mapped;
}

// Merges free neighbour `src` into `dst` and deletes it; the pools are the caller's to update.
[[gnu::always_inline]] inline uint64_t CachingAllocator::absorb(BlockId dst_id, BlockId src_id) {
  Block& src = blocks_[src_id];
  Block& dst = blocks_[dst_id];
  if (dst.prev == src_id) {  // [src dst]
    dst.ptr = src.ptr;
    dst.prev = src.prev;
    blocks_[dst.prev].next = dst_id;  // kNoBlock's slot too, which nothing reads
  } else {                            // [dst src]
    dst.next = src.next;
    blocks_[dst.next].prev = dst_id;
  }
  const uint64_t subsumed = src.size;
  dst.size += subsumed;
  delete_block(src_id);
  return subsumed;
}

uint64_t CachingAllocator::try_merge_blocks(BlockId dst_id, BlockId src_id, BlockPool& pool) {
  if (!can_merge(dst_id, src_id)) return 0;
  const Block& src = blocks_[src_id];
  if (src.lost) {
    // in no set
  } else if (src.mapped) {
    pool.blocks.erase(size_key(src_id));
  } else {
    pool.unmapped.erase(AddressKey{src.stream, src.ptr, src_id});
  }
  return absorb(dst_id, src_id);
}

// ---- releasing cached memory ------------------------------------------------------------------

std::vector<BlockId> CachingAllocator::garbage_collection_preview() const {
  std::vector<BlockId> released;
  if (!set_fraction_ || conf_.garbage_collection_threshold <= 0.0) return released;
  const auto gc_threshold = static_cast<uint64_t>(conf_.garbage_collection_threshold *
                                                  static_cast<double>(allowed_memory_maximum_));
  if (total_allocated_memory_ <= gc_threshold) return released;
  const uint64_t target = total_allocated_memory_ - gc_threshold;
  // Passes over the large pool's whole segments, each freeing every one at least as old as the
  // average of those left, until the target is met (a pass does not stop at it).
  const BlockPool& pool = large_pool();
  auto age = [&](const Block& b) {
    // PyTorch narrows the age to int before widening it again.
    return static_cast<uint64_t>(
        static_cast<int>(pool.get_free_blocks_call_count - b.gc_count_base));
  };
  std::vector<BlockId> candidates;
  for (const SizeKey& k : pool.blocks) {
    const Block& b = blocks_[k.id];
    if (!b.is_split() && b.expandable == kNotExpandable) candidates.push_back(k.id);
  }
  std::vector<bool> gone(candidates.size(), false);
  uint64_t total_age = 0, reclaimed = 0;
  int freeable_count = static_cast<int>(candidates.size());
  for (const BlockId id : candidates) total_age += age(blocks_[id]);
  bool block_freed = true;
  while (reclaimed < target && block_freed && freeable_count > 0) {
    const double age_threshold = static_cast<double>(total_age) / freeable_count;
    block_freed = false;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const Block& b = blocks_[candidates[i]];
      if (gone[i] || static_cast<double>(age(b)) < age_threshold) continue;
      gone[i] = true;
      block_freed = true;
      reclaimed += b.size;
      total_age -= age(b);
      freeable_count--;
      released.push_back(candidates[i]);
    }
  }
  return released;
}

std::optional<std::vector<CachingAllocator::SegmentRelease>>
CachingAllocator::slow_path_release_preview(uint64_t n, StreamId stream) const {
  // Expandable segments grow by mapping pages, and a capture's request is served by its private
  // pool's own releases: not previewed.
  if (!caching_ || conf_.expandable_segments || !captures_underway_.empty() || n == 0 ||
      n >= kOneExaByte) {
    return std::nullopt;
  }
  const uint64_t size =
      rounds_to_divisions_ ? round_size(n, conf_.roundup_power2_divisions) : round_to_min_blocks(n);
  const BlockPool& pool = pools_[is_small_size(size)];
  const uint64_t need = allocation_size(size, conf_.large_segment_size);
  std::vector<BlockId> released = garbage_collection_preview();
  uint64_t freed = 0;
  for (const BlockId id : released) freed += blocks_[id].size;
  const uint64_t device_free = device_.mem_get_info().free;
  auto fits = [&] {
    return !(set_fraction_ && total_allocated_memory_ - freed + need > allowed_memory_maximum_) &&
           device_free + freed >= need;
  };
  auto releases = [&] {
    std::vector<SegmentRelease> out;
    out.reserve(released.size());
    for (const BlockId id : released) out.push_back({blocks_[id].size, blocks_[id].stream});
    return out;
  };
  auto is_released = [&](BlockId id) {
    return std::find(released.begin(), released.end(), id) != released.end();
  };
  auto release = [&](BlockId id) {
    released.push_back(id);
    freed += blocks_[id].size;
  };
  if (fits()) return releases();
  // release_available_cached_blocks, on the pool without what the collection released.
  const AvailableRelease available = available_cached_blocks(pool, size, stream, released);
  for (const BlockId id : available.ids) release(id);
  if (available.enough && fits()) return releases();
  // release_cached_blocks: every cached segment left, the large pool's first, then the freeable
  // private pools'.
  for (const BlockPool* p : cached_pools_in_release_order()) {
    for (const SizeKey& k : p->blocks) {
      if (!blocks_[k.id].is_split() && !is_released(k.id)) release(k.id);
    }
  }
  return releases();
}

std::optional<std::vector<CachingAllocator::SegmentRelease>> CachingAllocator::empty_cache_preview()
    const {
  if (!caching_ || conf_.expandable_segments || !captures_underway_.empty()) return std::nullopt;
  std::vector<SegmentRelease> releases;
  for (const BlockPool* p : cached_pools_in_release_order()) {
    for (const SizeKey& k : p->blocks) {
      if (!blocks_[k.id].is_split()) releases.push_back({blocks_[k.id].size, blocks_[k.id].stream});
    }
  }
  return releases;
}

void CachingAllocator::garbage_collect_cached_blocks() {
  for (const BlockId id : garbage_collection_preview()) release_block(id);
}

CachingAllocator::AvailableRelease CachingAllocator::available_cached_blocks(
    const BlockPool& pool, uint64_t size, StreamId stream, const std::vector<BlockId>& gone) const {
  AvailableRelease out;
  const uint64_t max_split = conf_.max_split_size;
  if (max_split == kNoMaxSplitSize) return out;
  auto left_out = [&](BlockId id) { return std::find(gone.begin(), gone.end(), id) != gone.end(); };
  // A split oversize block is not a segment to free. PyTorch never has one (it does not split
  // oversize blocks, and a segment of a request below max_split_size is at most that size), but
  // a history that starts mid-run, recorded without the setting, can restore one.
  auto releasable = [this](BlockId id) {
    return blocks_[id].expandable == kNotExpandable && !blocks_[id].is_split();
  };
  const uint64_t key_size = std::max(size, max_split);
  auto it = pool.blocks.lower_bound(SizeKey{stream, key_size, 0, 0});
  while (it != pool.blocks.end() && left_out(it->id)) ++it;
  if (it != pool.blocks.end() && it->stream == stream) {
    if (releasable(it->id)) out.ids.push_back(it->id);
    out.enough = !out.ids.empty();
    return out;
  }
  // No single block is large enough: oversize blocks from the largest down. (Releasing a whole
  // segment changes no other key, so the ones below are those the walk reads here.)
  uint64_t total = 0;
  for (auto k = it; k != pool.blocks.begin() && total < key_size;) {
    --k;
    if (left_out(k->id)) continue;
    if (k->size < max_split || k->stream != stream || !releasable(k->id)) break;
    total += k->size;
    out.ids.push_back(k->id);
  }
  out.enough = total >= key_size;
  return out;
}

bool CachingAllocator::release_available_cached_blocks(const Request& r) {
  const AvailableRelease available = available_cached_blocks(*r.pool, r.size, r.stream, {});
  for (const BlockId id : available.ids) release_block(id);
  return available.enough;
}

bool CachingAllocator::release_cached_blocks() {
  if (captures_underway_.empty()) {
    synchronize_and_free_events();
    release_blocks(large_pool());
    release_blocks(small_pool());
  }
  if (!private_pools_.empty()) release_freeable_pools();
  return true;
}

void CachingAllocator::synchronize_and_free_events(std::optional<uint16_t> only_owner) {
  stats_.num_sync_all_streams++;
  std::vector<BlockId> pending, waiting;
  pending.swap(pending_frees_);
  for (BlockId id : pending) {
    if (only_owner && blocks_[id].owner != *only_owner) {
      waiting.push_back(id);
      continue;
    }
    end_deferral(id);
    free_block(id);
  }
  pending_frees_.swap(waiting);
}

std::vector<BlockId> CachingAllocator::ids_of(const BlockPool& pool) {
  std::vector<BlockId> ids;
  ids.reserve(pool.blocks.size());
  for (const SizeKey& k : pool.blocks) ids.push_back(k.id);
  return ids;
}

void CachingAllocator::release_blocks(BlockPool& pool) {
  std::vector<BlockId> to_unmap;
  for (const BlockId id : ids_of(pool)) {
    const Block& b = blocks_[id];
    if (b.expandable != kNotExpandable) {
      to_unmap.push_back(id);  // unmapping changes the pool: do it after the walk
    } else if (!b.is_split()) {
      release_block(id);
    }
  }
  for (BlockId id : to_unmap) {
    unmap_block(id);
    if (!blocks_[id].is_split()) release_expandable_segment(id);
  }
}

bool CachingAllocator::release_whole_free_segment(BlockId id) {
  const Block& b = blocks_[id];
  if (!b.live || b.allocated || b.is_split() || b.expandable != kNotExpandable || b.owner != 0 ||
      b.event_count != 0 || !segments_.contains(b.ptr)) {
    return false;
  }
  release_block(id);
  return true;
}

void CachingAllocator::release_block(BlockId id) {
  const Block b = blocks_[id];
  stats_.num_device_free++;
  record(DeviceOpKind::kSegmentFree, b.ptr, b.size, b.stream);
  device_.free(b.ptr, b.size);
  segments_.erase(b.ptr);
  if (b.owner != 0) release_in_private_pool(b.owner, b.small, b.size);
  count_device_free(b.owner);
  total_allocated_memory_ -= b.size;
  stats_.segment.decrease(b.small, 1);
  stats_.reserved_bytes.decrease(b.small, b.size);
  if (b.size >= conf_.max_split_size) stats_.oversize_segments.decrease(1);
  erase_from_blocks(id);
  delete_block(id);
}

// ---- state reconstruction ---------------------------------------------------------------

std::optional<std::vector<BlockId>> CachingAllocator::restore_segment(
    uint64_t address, uint64_t size, StreamId stream, bool small,
    const std::vector<RestoredBlock>& allocated, MempoolId pool) {
  if (!caching_ || size == 0 || size % kMinBlockSize != 0) return std::nullopt;
  const uint16_t owner = pool.ordinary() ? 0 : find_pool(pool);
  if (!pool.ordinary() && owner == 0) return std::nullopt;
  if (!restored_blocks_fit(address, size, allocated)) return std::nullopt;
  const auto ptr = device_.malloc(size);
  if (!ptr || *ptr != address) {
    if (ptr) device_.free(*ptr, size);
    return std::nullopt;
  }
  total_allocated_memory_ += size;
  if (owner != 0) {
    reserve_in_private_pool(owner, small, size);
    ++private_pools_[owner - 1].device_allocs;
  }
  segments_.emplace(address, size);
  stats_.segment.increase(small, 1);
  stats_.reserved_bytes.increase(small, size);
  if (size >= conf_.max_split_size) stats_.oversize_segments.increase(1);

  std::vector<BlockId> chain, result;
  auto add = [&](uint64_t ptr_at, uint64_t bytes, bool is_allocated, uint64_t requested) {
    const BlockId id = new_block();
    Block& b = blocks_[id];
    b.ptr = ptr_at;
    b.size = bytes;
    b.stream = stream;
    b.small = small;
    b.owner = owner;
    b.allocated = is_allocated;
    b.requested_size = requested;
    if (!chain.empty()) {
      b.prev = chain.back();
      blocks_[chain.back()].next = id;
    }
    chain.push_back(id);
    if (is_allocated) result.push_back(id);
  };
  uint64_t cursor = address;
  for (const RestoredBlock& r : allocated) {
    if (r.address > cursor) add(cursor, r.address - cursor, false, 0);
    add(r.address, r.size, true, r.requested);
    cursor = r.address + r.size;
  }
  if (cursor < address + size) add(cursor, address + size - cursor, false, 0);
  for (BlockId id : chain) {
    const Block& b = blocks_[id];
    if (b.allocated) {
      count_restored_allocation(id);
    } else {
      insert_into_blocks(id);
      if (b.is_split()) {
        stats_.inactive_split.increase(small, 1);
        stats_.inactive_split_bytes.increase(small, b.size);
      }
    }
  }
  free_restored_pending(result, allocated);
  return result;
}

bool CachingAllocator::restored_blocks_fit(uint64_t address, uint64_t size,
                                           const std::vector<RestoredBlock>& allocated) {
  uint64_t cursor = address;
  for (const RestoredBlock& r : allocated) {
    if (r.address < cursor || r.size == 0 || r.size % kMinBlockSize != 0 ||
        r.address % kMinBlockSize != 0 || r.address + r.size > address + size) {
      return false;
    }
    cursor = r.address + r.size;
  }
  return true;
}

void CachingAllocator::count_restored_allocation(BlockId id) {
  const Block& b = blocks_[id];
  stats_.allocation.increase(b.small, 1);
  stats_.allocated_bytes.increase(b.small, b.size);
  if (stats_.deferred.any()) note_active_peaks();
  stats_.requested_bytes.increase(b.small, b.requested_size);
  if (b.size >= conf_.max_split_size) stats_.oversize_allocations.increase(1);
}

void CachingAllocator::free_restored_pending(const std::vector<BlockId>& ids,
                                             const std::vector<RestoredBlock>& allocated) {
  // As the user freed them: not allocated from here on, active until their uses complete.
  for (size_t i = 0; i < allocated.size(); ++i) {
    if (allocated[i].pending_free) free(ids[i], /*pending_stream_uses=*/true);
  }
}

// ---- empty_cache and queries ------------------------------------------------------------------

void CachingAllocator::empty_cache() {
  if (!caching_) return;
  release_cached_blocks();
}

void CachingAllocator::empty_cache_during_capture() {
  if (!caching_) return;
  if (!private_pools_.empty()) release_freeable_pools();
}

void CachingAllocator::for_each_block(const std::function<void(const BlockInfo&)>& visit) const {
  // A segment's blocks are linked in address order and segments do not overlap: sorting the first
  // blocks of the segments orders them all.
  std::vector<std::pair<uint64_t, BlockId>> heads;
  for (BlockId id = 0; id < blocks_.size(); ++id) {
    if (blocks_[id].live && blocks_[id].prev == kNoBlock) heads.emplace_back(blocks_[id].ptr, id);
  }
  std::sort(heads.begin(), heads.end());
  for (const auto& [ptr, head] : heads) {
    for (BlockId id = head; id != kNoBlock; id = blocks_[id].next) {
      const Block& b = blocks_[id];
      visit(BlockInfo{b.ptr, b.size, b.requested_size, b.stream, b.small, b.allocated, b.mapped,
                      b.expandable != kNotExpandable, b.event_count > 0,
                      b.prev == kNoBlock || !blocks_[b.prev].mapped,
                      b.owner == 0 ? MempoolId{} : private_pools_[b.owner - 1].id});
    }
  }
}

uint64_t CachingAllocator::largest_free_block() const {
  uint64_t largest = 0;
  for (const BlockPool* pool : {&large_pool(), &small_pool()}) {
    for (const SizeKey& k : pool->blocks) largest = std::max(largest, k.size);
  }
  for (const PrivatePool& p : private_pools_) {
    for (const BlockPool& pool : p.pools) {
      for (const SizeKey& k : pool.blocks) largest = std::max(largest, k.size);
    }
  }
  return largest;
}

// ---- CUDA graphs' private pools -------------------------------------------------------------

uint16_t CachingAllocator::find_pool(MempoolId id) const {
  for (size_t i = 0; i < private_pools_.size(); ++i) {
    if (!private_pools_[i].forgotten && private_pools_[i].id == id)
      return static_cast<uint16_t>(i + 1);
  }
  return 0;
}

BlockPool& CachingAllocator::pool_for(uint64_t size, StreamId stream) {
  for (const auto& [owner, capturing] : captures_underway_) {
    if (capturing == stream) return private_pools_[owner - 1].pools[is_small_size(size)];
  }
  return pools_[is_small_size(size)];
}

void CachingAllocator::begin_allocate_to_pool(MempoolId id, StreamId stream) {
  if (id.ordinary())
    throw std::invalid_argument("begin_allocate_to_pool: (0, 0) is no private pool");
  uint16_t owner = find_pool(id);
  if (owner == 0) owner = new_private_pool(id);
  PrivatePool* pool = &private_pools_[owner - 1];
  for (const auto& [capturing_owner, s] : captures_underway_) {
    if (capturing_owner == owner) {
      throw std::invalid_argument("begin_allocate_to_pool: already allocating to this pool");
    }
  }
  pool->use_count++;
  pool->freeable = false;
  captures_underway_.emplace_back(owner, stream);
}

void CachingAllocator::end_allocate_to_pool(MempoolId id) {
  for (auto it = captures_underway_.begin(); it != captures_underway_.end(); ++it) {
    if (private_pools_[it->first - 1].id == id) {
      captures_underway_.erase(it);
      return;
    }
  }
  throw std::invalid_argument("end_allocate_to_pool: not allocating to this pool");
}

void CachingAllocator::release_pool(MempoolId id) {
  const uint16_t owner = find_pool(id);
  if (owner == 0 || private_pools_[owner - 1].use_count == 0) {
    throw std::invalid_argument("release_pool: the pool has no user to release");
  }
  PrivatePool& pool = private_pools_[owner - 1];
  if (--pool.use_count == 0) pool.freeable = true;
}

void CachingAllocator::create_pool(MempoolId id) {
  if (id.ordinary()) throw std::invalid_argument("create_pool: (0, 0) is no private pool");
  uint16_t owner = find_pool(id);
  if (owner == 0) owner = new_private_pool(id);
  PrivatePool& pool = private_pools_[owner - 1];
  pool.use_count++;
  pool.freeable = false;
}

void CachingAllocator::set_use_on_oom(MempoolId id, bool use_on_oom) {
  if (use_on_oom) {
    use_on_oom_pools_.insert(id);
  } else {
    use_on_oom_pools_.erase(id);
  }
}

void CachingAllocator::set_no_split(MempoolId id) {
  if (std::find(no_split_pools_.begin(), no_split_pools_.end(), id) == no_split_pools_.end())
    no_split_pools_.push_back(id);
  if (const uint16_t owner = find_pool(id)) private_pools_[owner - 1].no_split = true;
}

// A request of the ordinary pools that no new segment served: a use_on_oom pool's free block, as
// PyTorch 2.14's try_mempool_fallback finds it (get_free_block on the pool: its own best fit,
// nothing released). Out of malloc's line, as its search is.
[[gnu::noinline]] bool CachingAllocator::try_mempool_fallback(Request& r) {
  if (r.pool->owner != 0) return false;
  // In the set's own order, as PyTorch iterates its flat_hash_set of them.
  std::optional<Request> served;
  use_on_oom_pools_.for_each([&](const MempoolId& id) {
    if (!served) served = fallback_block(r, id);
  });
  if (!served) return false;
  r = *served;
  return true;
}

// One use_on_oom pool's free block for `r`, as get_free_block finds it there (its best fit,
// nothing released), passing over blocks of expandable segments: measured on PyTorch 2.11, where
// a request that fit a use_on_oom pool's free expandable block ran out of memory
// (tools/gpu/probe_mempool_options.py expandable_fallback), and one that fit the same pool's
// block of an ordinary segment, made while expandable segments were off, was served from it.
std::optional<CachingAllocator::Request> CachingAllocator::fallback_block(const Request& r,
                                                                          const MempoolId& id) {
  const uint16_t owner = find_pool(id);
  if (owner == 0) return std::nullopt;  // never used: nothing cached
  Request in_pool{r.size, r.stream, &private_pools_[owner - 1].pools[is_small_size(r.size)]};
  BlockPool& pool = *in_pool.pool;
  if (set_fraction_ && conf_.garbage_collection_threshold > 0.0)
    ++pool.get_free_blocks_call_count;  // as get_free_block ages the pool's blocks
  auto it = pool.blocks.lower_bound(SizeKey{r.stream, r.size, 0, 0});
  while (it != pool.blocks.end() && it->stream == r.stream &&
         blocks_[it->id].expandable != kNotExpandable)
    ++it;
  if (it == pool.blocks.end() || it->stream != r.stream) return std::nullopt;
  const uint64_t max_split = conf_.max_split_size;
  if (r.size < max_split && it->size >= max_split) return std::nullopt;  // never split oversize
  if (r.size >= max_split && it->size >= r.size + conf_.max_non_split_rounding) return std::nullopt;
  in_pool.block = it->id;
  in_pool.in_pool = true;
  in_pool.position = it;
  in_pool.from_fallback = true;
  return in_pool;
}

void CachingAllocator::empty_cache(MempoolId id) {
  if (!caching_) return;
  const uint16_t owner = find_pool(id);
  if (owner == 0 || !private_pools_[owner - 1].freeable) return;
  synchronize_and_free_events(owner);  // the other pools' frees keep waiting
  release_pool_segments(owner - 1);
}

void CachingAllocator::set_pool_release_order(const std::vector<uint64_t>& addresses) {
  pool_release_rank_.clear();
  for (size_t k = 0; k < addresses.size(); ++k) pool_release_rank_.emplace(addresses[k], k);
}

uint16_t CachingAllocator::new_private_pool(MempoolId id) {
  if (private_pools_.size() >= UINT16_MAX) throw std::length_error("too many private pools");
  const auto owner = static_cast<uint16_t>(private_pools_.size() + 1);
  private_pools_.emplace_back(id, owner);
  private_pools_.back().no_split =
      std::find(no_split_pools_.begin(), no_split_pools_.end(), id) != no_split_pools_.end();
  if (freed_pools_.empty()) return owner;
  const size_t k = freed_pools_.back();
  freed_pools_.pop_back();
  PrivatePool& freed = private_pools_[k];
  if (freed.reserved == 0) return owner;  // freed holding nothing
  // The blocks still pointing at the freed pool's memory are this pool's now. What was freed into
  // that memory since is lost: the new pool's sets begin empty.
  lose_pooled_blocks(k);
  for (Block& b : blocks_) {
    if (b.live && b.owner == k + 1) b.owner = owner;
  }
  private_pools_[owner - 1].reserved = freed.reserved;
  private_pools_[owner - 1].took_over = true;
  freed.reserved = 0;
  ++freed_pools_holding_blocks_.taken_over;
  return owner;
}

// A pool without users gives back its whole free segments, small first as PyTorch does, and is
// freed once PyTorch's count of its device allocations is 0; the pools in the order
// set_pool_release_order set.
void CachingAllocator::release_freeable_pools() {
  for (const size_t k : freeable_pools_in_release_order()) release_pool_segments(k);
}

void CachingAllocator::release_pool_segments(size_t k) {
  PrivatePool& p = private_pools_[k];
  release_blocks(p.pools[1]);
  release_blocks(p.pools[0]);
  if (p.device_allocs == 0) erase_pool(k);
}

// PyTorch frees the pool (graph_pools.erase), even where an expandable segment's page it mapped
// in one call and unmapped in two is still mapped under a block still allocated. Such blocks keep
// pointing at the freed pool, its free blocks are in no set any more (lost), and a block freed
// later goes into whatever that memory holds by then: the pool made next (new_private_pool).
void CachingAllocator::erase_pool(size_t k) {
  PrivatePool& p = private_pools_[k];
  p.forgotten = true;
  if (p.stats_index >= 0)
    stats_.reserved_bytes_by_private_pools[static_cast<size_t>(p.stats_index)]
        .reserved_bytes.drop_current();
  freed_pools_.push_back(k);
  if (p.reserved == 0) return;
  ++freed_pools_holding_blocks_.pools;
  lose_pooled_blocks(k);
}

void CachingAllocator::lose_pooled_blocks(size_t k) {
  for (BlockPool& pool : private_pools_[k].pools) {
    for (const SizeKey& key : pool.blocks) blocks_[key.id].lost = true;
    for (const AddressKey& key : pool.unmapped) blocks_[key.id].lost = true;
    pool.blocks = SizeKeySet();
    pool.unmapped.clear();
  }
}

// The pool's statistics are made by its first reservation; a pool made anew under the id of one
// freed counts on in that one's.
StatArray& CachingAllocator::private_pool_reserved_bytes(uint16_t owner) {
  PrivatePool& p = private_pools_[owner - 1];
  auto& all = stats_.reserved_bytes_by_private_pools;
  if (p.stats_index < 0) {
    const auto it =
        std::find_if(all.begin(), all.end(),
                     [&](const DeviceStats::PrivatePoolReserved& r) { return r.pool == p.id; });
    p.stats_index = static_cast<int32_t>(it - all.begin());
    if (it == all.end()) all.push_back({p.id, {}});
  }
  return all[static_cast<size_t>(p.stats_index)].reserved_bytes;
}

void CachingAllocator::reserve_in_private_pool(uint16_t owner, bool small, uint64_t bytes) {
  private_pools_[owner - 1].reserved += bytes;
  private_pool_reserved_bytes(owner).increase(small, bytes);
}

void CachingAllocator::release_in_private_pool(uint16_t owner, bool small, uint64_t bytes) {
  private_pools_[owner - 1].reserved -= bytes;
  private_pool_reserved_bytes(owner).decrease(small, bytes);
}

void CachingAllocator::count_device_free(uint16_t owner) {
  if (owner == 0) return;
  // PyTorch asserts it is above 0; a what-if replay may take it there.
  int64_t& count = private_pools_[owner - 1].device_allocs;
  if (count > 0) --count;
}

// A block freed beside lost ones merges with them as with any free neighbour (PyTorch's erase of
// a neighbour from the pool finds nothing): they go back into its pool's set first.
[[gnu::noinline]] void CachingAllocator::free_block_beside_lost(BlockId id) {
  for (const BlockId n : {blocks_[id].prev, blocks_[id].next}) {
    Block& b = blocks_[n];
    if (!b.lost || !b.mapped) continue;
    b.lost = false;
    insert_into_blocks(n);
  }
  merge_into_pool(id);
}

std::vector<size_t> CachingAllocator::freeable_pools_in_release_order() const {
  std::vector<std::pair<size_t, size_t>> order;  // (rank, pool), in the order made
  for (size_t k = 0; k < private_pools_.size(); ++k) {
    const PrivatePool& p = private_pools_[k];
    if (!p.freeable || p.forgotten) continue;
    size_t rank = SIZE_MAX;
    if (!pool_release_rank_.empty()) {
      for (const BlockPool& pool : p.pools) {
        for (const SizeKey& key : pool.blocks) {
          // A release inside the free block: a cudaMalloc'ed segment goes at the block's own
          // address, an expandable segment's pages from the first whole page in it.
          const uint64_t ptr = blocks_[key.id].ptr;
          for (auto it = pool_release_rank_.lower_bound(ptr);
               it != pool_release_rank_.end() && it->first < ptr + key.size; ++it) {
            rank = std::min(rank, it->second);
          }
        }
      }
    }
    order.emplace_back(rank, k);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<size_t> pools;
  pools.reserve(order.size());
  for (const auto& [rank, k] : order) pools.push_back(k);
  return pools;
}

std::vector<const BlockPool*> CachingAllocator::cached_pools_in_release_order() const {
  std::vector<const BlockPool*> pools{&large_pool(), &small_pool()};
  for (const size_t k : freeable_pools_in_release_order()) {
    pools.push_back(&private_pools_[k].pools[1]);
    pools.push_back(&private_pools_[k].pools[0]);
  }
  return pools;
}

// What PyTorch's OOM message counts as "allocated in private pools": their free blocks.
uint64_t CachingAllocator::free_bytes_in_private_pools() const {
  uint64_t bytes = 0;
  for (const PrivatePool& p : private_pools_) {
    if (p.forgotten) continue;
    for (const BlockPool& pool : p.pools) {
      for (const SizeKey& k : pool.blocks) bytes += k.size;
    }
  }
  return bytes;
}

}  // namespace allocsim
