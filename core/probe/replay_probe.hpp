// ReplayProbe: what a replay asks of the allocator beyond the calls PyTorch's users make. A trace
// shows what the run did, not why: the replay checks, before a request, whether the cache serves
// it and which segments its slow path or an empty_cache() would give back, makes requests into a
// capture it cannot name, gives back a whole segment the run freed, orders the release of private
// pools as recorded, and rebuilds the segments a bounded history started with. Each call is
// documented where CachingAllocator declares it. Only sim/replay includes this header (ctest
// include_layering), so the allocator's own face stays the one PyTorch's users have.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/caching_allocator.hpp"

namespace allocsim {

class ReplayProbe {
 public:
  using SegmentRelease = CachingAllocator::SegmentRelease;

  explicit ReplayProbe(CachingAllocator& allocator) : allocator_(allocator) {}

  [[nodiscard]] BlockId malloc_in_unknown_capture(uint64_t n, StreamId stream) {
    return allocator_.malloc_in_unknown_capture(n, stream);
  }
  bool holds_releasable_segment() const { return allocator_.holds_releasable_segment(); }
  bool release_whole_free_segment(BlockId block) {
    return allocator_.release_whole_free_segment(block);
  }
  bool has_free_block_for(uint64_t n, StreamId stream) const {
    return allocator_.has_free_block_for(n, stream);
  }
  std::optional<std::vector<SegmentRelease>> slow_path_release_preview(uint64_t n,
                                                                       StreamId stream) const {
    return allocator_.slow_path_release_preview(n, stream);
  }
  std::optional<std::vector<SegmentRelease>> empty_cache_preview() const {
    return allocator_.empty_cache_preview();
  }
  void set_pool_release_order(const std::vector<uint64_t>& addresses) {
    allocator_.set_pool_release_order(addresses);
  }
  std::optional<std::vector<BlockId>> restore_segment(uint64_t address, uint64_t size,
                                                      StreamId stream, bool small,
                                                      const std::vector<RestoredBlock>& allocated,
                                                      MempoolId pool = {}) {
    return allocator_.restore_segment(address, size, stream, small, allocated, pool);
  }
  std::optional<std::vector<BlockId>> restore_expandable_range(
      uint64_t base, uint64_t address, uint64_t size, StreamId stream, bool small,
      const std::vector<RestoredBlock>& allocated, MempoolId pool = {}) {
    return allocator_.restore_expandable_range(base, address, size, stream, small, allocated, pool);
  }

 private:
  CachingAllocator& allocator_;
};

}  // namespace allocsim
