// The caching allocator: PyTorch's DeviceCachingAllocator policy over a narrow Device.
//
// Faithful to PyTorch 2.11 (see docs/pytorch-caching-allocator.md §1-§9): the same
// pools, best fit, splitting, merging, slow path, expandable segments, CUDA graphs' private pools,
// statistics and OOM text. Single device. Not thread-safe: one allocator per thread.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/alloc_conf.hpp"
#include "core/detail/block.hpp"
#include "core/detail/block_pool.hpp"
#include "core/detail/pool_id_hash_set.hpp"
#include "core/device.hpp"
#include "core/device_op.hpp"
#include "core/out_of_memory.hpp"
#include "core/size_rounding.hpp"
#include "core/stats.hpp"
#include "core/torch_version.hpp"

namespace allocsim {

// Thrown by check_invariants(): the allocator's state is inconsistent (a bug, never user error).
class InvariantViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

struct AllocatorOptions {
  AllocConf conf;
  bool caching = true;            // false: PYTORCH_NO_CUDA_MEMORY_CACHING (raw malloc/free)
  bool record_device_ops = true;  // keep the list of segment operations
  int device_index = 0;           // the CUDA device it stands for (its OOM message names it)
  TorchVersion torch_version = kDefaultTorchVersion;  // the release whose policy it follows
};

// A read-only view of one block, for reports and tests.
struct BlockInfo {
  uint64_t ptr, size, requested_size;
  StreamId stream;
  bool small, allocated, mapped, expandable, pending_free;
  bool segment_start;  // first block of a segment (or of a mapped range of an expandable one)
  MempoolId pool;      // (0, 0), or the private pool it belongs to
};

// A block allocated before a bounded history began (see restore_segment).
struct RestoredBlock {
  uint64_t address;
  uint64_t size;
  uint64_t requested;
  // Freed by the user with stream uses outstanding (active_pending_free): restored active, not
  // allocated, its free completed by complete_deferred_free.
  bool pending_free = false;
};

class CachingAllocator {
 public:
  CachingAllocator(Device& device, AllocatorOptions options);
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Serves n > 0 bytes on a stream. Returns kNoBlock after an OOM; last_oom() says why.
  [[nodiscard]] BlockId malloc(uint64_t n, StreamId stream);
  // Frees a block. With pending_stream_uses (record_stream), the block stays active until
  // complete_deferred_free() or an empty_cache / OOM retry synchronises.
  void free(BlockId block, bool pending_stream_uses = false);
  void complete_deferred_free(BlockId block);
  bool is_pending_free(BlockId block) const;

  void empty_cache();
  // A segment given back, as the release previews of ReplayProbe (core/probe/) list them.
  struct SegmentRelease {
    uint64_t size;
    StreamId stream;
    bool operator==(const SegmentRelease&) const = default;
  };

  // CUDA graphs' private pools (PyTorch's beginAllocateToPool, endAllocateToPool, releasePool).
  // From begin to end, requests on `stream` are served from the pool `id` (created on its first
  // begin; each begin counts one more user, as each graph captured into it does). release_pool
  // says one user is gone; a pool without users gives its free segments back at the next
  // empty_cache or out-of-memory retry, and is forgotten once PyTorch's count of its device
  // allocations is back to 0 (PrivatePool::device_allocs).
  void begin_allocate_to_pool(MempoolId id, StreamId stream);
  void end_allocate_to_pool(MempoolId id);
  void release_pool(MempoolId id);
  // torch.cuda.MemPool() (PyTorch's createOrIncrefPool): the pool made with one user, the MemPool
  // object, or one user more where it exists.
  void create_pool(MempoolId id);
  bool has_pool(MempoolId id) const { return find_pool(id) != 0; }
  // torch.cuda.MemPool(use_on_oom=True) (PyTorch's setUseOnOOM): a request outside every private
  // pool that no new segment can serve takes a free block of such a pool that fits, before any
  // cached segment is released (PyTorch's try_mempool_fallback), the pools tried in the order
  // PyTorch's hash set of them iterates (core/detail/pool_id_hash_set.hpp).
  void set_use_on_oom(MempoolId id, bool use_on_oom);
  // torch.cuda.MemPool(no_split=True) (setNoSplit): the pool's blocks are never split.
  void set_no_split(MempoolId id);
  // PyTorch's emptyCache(mempool_id), which a MemPool's destructor calls after releasing its use:
  // a pool without users waits for its own blocks' outstanding stream uses (one
  // num_sync_all_streams) and gives its free segments back, and is freed once it holds none. The
  // ordinary pools, other pools and a pool still in use are left alone.
  void empty_cache(MempoolId id);
  // torch.cuda.empty_cache() while a capture or a use_mem_pool block routes requests to a private
  // pool (PyTorch's captures_underway not empty): no synchronisation and nothing of the ordinary
  // pools released, only the freeable private pools' segments.
  void empty_cache_during_capture();
  // How many pools were freed while they still held blocks, and how many of those blocks' pools
  // a pool made later took over (see erase_pool): what PyTorch does there is undefined
  // behaviour, which the allocator follows as it turned out on recorded runs.
  struct FreedPoolsHoldingBlocks {
    uint64_t pools = 0;
    uint64_t taken_over = 0;
  };
  FreedPoolsHoldingBlocks freed_pools_holding_blocks() const { return freed_pools_holding_blocks_; }
  void set_memory_fraction(double fraction);  // torch.cuda.set_per_process_memory_fraction
  // The settings changed while the allocator runs (change_alloc_conf makes them from the string
  // the run set): the next requests follow them; the blocks and segments made before stay as they
  // are (expandable ones among them are skipped while expandable_segments is off), and the
  // statistics' max_split_size keeps the value the allocator was made with, as PyTorch's does.
  void change_settings(AllocConf conf);
  // The cap a fraction sets, in bytes: what the allocator may reserve.
  void set_memory_limit(uint64_t bytes);
  void reset_peak_stats() { stats_.reset_peaks(); }  // torch.cuda.reset_peak_memory_stats
  void reset_accumulated_stats() { stats_.reset_accumulated(); }  // reset_accumulated_memory_stats

  uint64_t block_address(BlockId b) const { return blocks_[b].ptr; }
  uint64_t block_size(BlockId b) const { return blocks_[b].size; }

  const DeviceStats& stats() const { return stats_; }
  const std::optional<OutOfMemory>& last_oom() const { return last_oom_; }
  const std::vector<DeviceOp>& device_ops() const { return device_ops_; }
  const AllocConf& conf() const { return conf_; }
  std::optional<uint64_t> allowed_memory_maximum() const;

  // Every live block, by address.
  void for_each_block(const std::function<void(const BlockInfo&)>& visit) const;
  uint64_t largest_free_block() const;

  // Blocks tile their segments with no gap or overlap, pools hold exactly the free blocks,
  // statistics equal a recount. Throws InvariantViolation naming the first broken rule.
  void check_invariants() const;

 private:
  // What only a replay asks of the allocator (beyond the calls PyTorch's users make), reached
  // through ReplayProbe (core/probe/replay_probe.hpp), which sim/replay alone includes.
  friend class ReplayProbe;
  // malloc as PyTorch makes it while a CUDA graph is captured into a pool the caller does not
  // know: from the ordinary pools, its slow path without the full release a capture forbids.
  [[nodiscard]] BlockId malloc_in_unknown_capture(uint64_t n, StreamId stream);
  // Whether empty_cache() would give back memory of the ordinary pools: a cudaMalloc'ed segment,
  // or a page of an expandable one.
  bool holds_releasable_segment() const;
  // Gives back the cudaMalloc'ed segment of the ordinary pools that `block` is, where it is one
  // whole free block (a segment a malloc took and whose one block was freed again); records the
  // cudaFree. Returns whether it did.
  bool release_whole_free_segment(BlockId block);
  // Whether malloc(n, stream) outside any capture would be served by a cached block, with no
  // device memory asked for (and so no slow path that could free segments). Changes nothing.
  bool has_free_block_for(uint64_t n, StreamId stream) const;
  // The segments (in release order) that malloc(n, stream) would give back before its new
  // segment, were no cached block to serve it: its garbage collection's, then (if still refused)
  // release_available_cached_blocks', then every cached segment (the freeable private pools'
  // after the ordinary pools'). nullopt where that is not previewed (expandable segments, a
  // request during a capture). Changes nothing.
  std::optional<std::vector<SegmentRelease>> slow_path_release_preview(uint64_t n,
                                                                       StreamId stream) const;
  // The segments empty_cache() would give back now, in its order; nullopt as above.
  std::optional<std::vector<SegmentRelease>> empty_cache_preview() const;
  // The order the next releases of the whole cache give back freeable pools in. PyTorch walks
  // them in the order of a hash map of their ids, which no trace records; a replay takes it from
  // the recorded releases: a pool with a free block holding one of `addresses` (a segment's own,
  // or an expandable segment's first page to unmap) goes by the first such, the others after, in
  // the order they were made (the order without a hint).
  void set_pool_release_order(const std::vector<uint64_t>& addresses);
  // Recreates a cudaMalloc'ed segment that existed before the replay began, with the blocks
  // allocated in it then (or freed with stream uses pending); the gaps become free blocks. A
  // segment of a private pool goes to that pool, which must have begun. Records no device
  // operation. Returns the blocks' ids in order, or nullopt if the layout is impossible, the pool
  // unknown, or the device did not place the segment at `address`.
  std::optional<std::vector<BlockId>> restore_segment(uint64_t address, uint64_t size,
                                                      StreamId stream, bool small,
                                                      const std::vector<RestoredBlock>& allocated,
                                                      MempoolId pool = {});
  // Recreates a range of an expandable segment that was mapped before the replay began, with the
  // blocks allocated in it then: the segment of `stream` in the pool (small or large; a private
  // pool's, which must have begun) whose reservation starts at `base`, reserved there first if it
  // is not yet. Records no device operation. Returns the blocks' ids in order, or nullopt if the
  // layout is impossible (not whole pages, overlapping a mapped range or another reservation), the
  // pool unknown, or the device did not reserve at `base`.
  std::optional<std::vector<BlockId>> restore_expandable_range(
      uint64_t base, uint64_t address, uint64_t size, StreamId stream, bool small,
      const std::vector<RestoredBlock>& allocated, MempoolId pool = {});

  struct ExpandableSegment {
    uint64_t base = 0;
    uint64_t page = 0;
    uint64_t max_pages = 0;
    StreamId stream = 0;
    bool small = false;
    bool live = false;
    std::vector<bool> page_mapped;
  };
  struct PrivatePool {
    PrivatePool(MempoolId pool_id, uint16_t owner)
        : id(pool_id), pools{BlockPool(false, owner), BlockPool(true, owner)} {}
    MempoolId id;
    std::array<BlockPool, 2> pools;  // large, small, as pools_
    int64_t use_count = 0;
    uint64_t reserved = 0;  // what it holds of the device, cudaMalloc'ed and mapped
    // PyTorch's cudaMalloc_count: the mallocs that took device memory for it (a cudaMalloc, or
    // an expandable segment's map of one or more pages), less each segment released and each
    // unmap. Freeable at 0, the pool is freed, even while an expandable segment's pages it
    // mapped in one call and unmapped in two are still mapped.
    int64_t device_allocs = 0;
    bool freeable = false;     // no users left: released at the next release_cached_blocks
    bool forgotten = false;    // freed (erase_pool): its id may begin anew; holding blocks where
                               // `reserved` is not 0
    int32_t stats_index = -1;  // its entry in stats_.reserved_bytes_by_private_pools, once made
    bool took_over = false;    // made holding a freed pool's memory (new_private_pool)
    bool no_split = false;     // set_no_split
  };
  struct Request {  // PyTorch's AllocParams
    uint64_t size;  // rounded
    StreamId stream;
    BlockPool* pool;
    BlockId block = kNoBlock;
    // Where get_free_block found the block: it stays in the pool until alloc_found_block takes
    // it out, or rekeys it as the remainder of a split.
    bool in_pool = false;
    SizeKeySet::const_iterator position{};
    // throw_on_cudamalloc_oom refused it before any device call: no retries, no OOM counted.
    bool rejected = false;
    // Served by a use_on_oom pool's free block: split as without expandable segments.
    bool from_fallback = false;
  };

  BlockId new_block();
  BlockId grow_arena();  // new_block() with no free slot: a new block at the end
  void delete_block(BlockId b);
  BlockPool& pool_of(const Block& b) {
    if (b.owner == 0) [[likely]]
      return pools_[b.small];
    return private_pools_[b.owner - 1].pools[b.small];
  }
  const BlockPool& pool_of(const Block& b) const {
    return const_cast<CachingAllocator*>(this)->pool_of(b);
  }
  BlockPool& pool_for(uint64_t size, StreamId stream);  // PyTorch's get_pool
  uint16_t find_pool(MempoolId id) const;  // the owner index of a pool not forgotten, or 0
  uint16_t new_private_pool(MempoolId id);
  void release_freeable_pools();
  // One pool's free segments given back, small first; the pool freed once it holds none.
  void release_pool_segments(size_t k);
  void erase_pool(size_t k);
  void lose_pooled_blocks(size_t k);
  void count_device_free(uint16_t owner);
  // A private pool's reserved bytes grew or shrank (a segment, or an expandable segment's pages).
  void reserve_in_private_pool(uint16_t owner, bool small, uint64_t bytes);
  void release_in_private_pool(uint16_t owner, bool small, uint64_t bytes);
  StatArray& private_pool_reserved_bytes(uint16_t owner);
  void free_block_beside_lost(BlockId id);
  uint64_t free_bytes_in_private_pools() const;
  BlockPool& large_pool() { return pools_[0]; }
  BlockPool& small_pool() { return pools_[1]; }
  const BlockPool& large_pool() const { return pools_[0]; }
  const BlockPool& small_pool() const { return pools_[1]; }
  void insert_into_blocks(BlockId b);
  void erase_from_blocks(BlockId b);
  void insert_unmapped(BlockId b);
  void erase_unmapped(BlockId b);
  void record(DeviceOpKind kind, uint64_t address, uint64_t size, StreamId stream);
  // check_invariants()'s rules (core/check_invariants.cpp).
  void check_free_pools() const;
  void check_segments_tiled() const;
  void check_stats_recount() const;

  // The fast path's steps are inlined into malloc() and free(): the register saves and restores
  // of separate calls cost more than the steps themselves.
  bool get_free_block(Request& r);
  // The blocks garbage_collect_cached_blocks would release now, in its order.
  std::vector<BlockId> garbage_collection_preview() const;
  // The cached block get_free_block would take for `r`, or the pool's end(); changes nothing.
  SizeKeySet::const_iterator find_free_block(const Request& r) const;
  // find_free_block out of line, for the callers off malloc's path.
  SizeKeySet::const_iterator find_free_block_outlined(const Request& r) const;
  SizeKeySet::const_iterator skip_expandable(const Request& r, SizeKeySet::const_iterator it) const;
  bool alloc_block(Request& r, bool is_retry);
  bool should_split(const Block& b, uint64_t size, bool expandable_active) const;
  bool try_mempool_fallback(Request& r);
  std::optional<Request> fallback_block(const Request& r, const MempoolId& id);
  BlockId alloc_found_block(Request& r, uint64_t orig_size, bool split_remainder);
  void free_block(BlockId b);
  void merge_into_pool(BlockId b);  // free_block's work, once no neighbour is lost
  bool can_merge(BlockId dst, BlockId src) const;
  uint64_t absorb(BlockId dst, BlockId src);
  uint64_t try_merge_blocks(BlockId dst, BlockId src, BlockPool& pool);
  SizeKey size_key(BlockId b) const;
  void garbage_collect_cached_blocks();
  // The oversize blocks release_available_cached_blocks frees for a request of `size` on
  // `stream` from `pool` (`gone`, already released by a preview, left out), in the order it frees
  // them, and whether they make room for the request: one preview for the malloc and the replay.
  struct AvailableRelease {
    std::vector<BlockId> ids;
    bool enough = false;
  };
  AvailableRelease available_cached_blocks(const BlockPool& pool, uint64_t size, StreamId stream,
                                           const std::vector<BlockId>& gone) const;
  bool release_available_cached_blocks(const Request& r);
  bool release_cached_blocks();
  void release_blocks(BlockPool& pool);
  static std::vector<BlockId> ids_of(const BlockPool& pool);  // the free blocks, in pool order
  void release_block(BlockId b);
  // Completes the deferred frees (of one pool's blocks only, where `only_owner` names it).
  void synchronize_and_free_events(std::optional<uint16_t> only_owner = std::nullopt);
  // The freeable private pools (indexes into private_pools_) in the order a release of the whole
  // cache gives them back (see set_pool_release_order).
  std::vector<size_t> freeable_pools_in_release_order() const;
  // The pools a release of the whole cache walks, in its order: the ordinary large and small
  // pools, then each freeable private pool's small and large.
  std::vector<const BlockPool*> cached_pools_in_release_order() const;
  void end_deferral(BlockId b);  // a deferred free's stream uses are over: its block is freed next
  void note_active_peaks();      // active grew while some free is deferred

  BlockId find_expandable_block(StreamId stream, BlockPool& pool, uint64_t size);
  // Its one unmapped block, spanning 1 1/8 of the device, or `at_least` bytes where more.
  BlockId new_expandable_segment(StreamId stream, BlockPool& pool, uint64_t at_least = 0);
  // Maps whole pages from the block's start; a restore counts and records no device operation.
  bool map_block(BlockId to_map, uint64_t size, bool restoring = false);
  BlockId split_block(BlockId b, uint64_t at);  // [at, end) as a new block after b, unpooled
  BlockId new_block_like(BlockId b);            // of b's stream, pool, owner, mapping and segment
  // restore_segment's and restore_expandable_range's shared steps: the blocks lie in order inside
  // [address, address + size); the statistics of one restored allocated block; the blocks freed
  // with stream uses pending freed so.
  static bool restored_blocks_fit(uint64_t address, uint64_t size,
                                  const std::vector<RestoredBlock>& allocated);
  void count_restored_allocation(BlockId id);
  void free_restored_pending(const std::vector<BlockId>& ids,
                             const std::vector<RestoredBlock>& allocated);
  BlockId try_allocate_expandable_block(StreamId stream, BlockPool& pool, uint64_t size);
  void unmap_block(BlockId b);
  void release_expandable_segment(BlockId b);

  // Whether a malloc's slow path may end in the release of every cached segment: not while a
  // capture the caller does not know is underway (malloc_in_unknown_capture).
  enum class FullRelease : uint8_t { kAllowed, kSkipped };
  [[nodiscard]] BlockId malloc_with(uint64_t n, StreamId stream, FullRelease full_release);
  [[nodiscard]] BlockId malloc_uncached(uint64_t n, StreamId stream);
  void raise_oom(const Request& r, uint64_t n);
  bool rejects(Request& r, uint64_t size);

  Device& device_;
  AllocConf conf_;
  bool caching_;
  bool record_device_ops_;
  int device_index_;
  TorchVersion torch_version_;
  bool rounds_to_divisions_;  // conf_'s roundup_power2_divisions are not all 0 or 1

  std::vector<Block> blocks_;
  std::vector<BlockId> free_slots_;
  // The large pool, then the small: indexed by Block::small, where choosing between two members
  // compiled to a branch that the mix of small and large requests mispredicted.
  std::array<BlockPool, 2> pools_{BlockPool(false), BlockPool(true)};
  std::vector<BlockId> pending_frees_;  // blocks waiting on stream events, in FIFO order
  std::vector<ExpandableSegment> expandable_segments_;
  // Private pools by Block::owner - 1; a deque, so that pools stay where they are as it grows.
  std::deque<PrivatePool> private_pools_;
  // Pools freed, latest last: the next pool made takes the memory of the latest (glibc's malloc
  // hands out the chunk freed last first), and with it the blocks that still point there.
  std::vector<size_t> freed_pools_;
  PoolIdHashSet use_on_oom_pools_;
  std::vector<MempoolId> no_split_pools_;  // as set, in order
  FreedPoolsHoldingBlocks freed_pools_holding_blocks_;
  std::vector<std::pair<uint16_t, StreamId>> captures_underway_;  // owner, stream
  std::map<uint64_t, uint64_t> segments_;         // cudaMalloc'ed segments: address -> size
  std::map<uint64_t, size_t> pool_release_rank_;  // set_pool_release_order: address -> position

  DeviceStats stats_;
  uint64_t total_allocated_memory_ = 0;  // reserved: what the fraction cap is checked against
  uint64_t allowed_memory_maximum_ = 0;
  bool set_fraction_ = false;
  std::optional<OutOfMemory> last_oom_;
  std::vector<DeviceOp> device_ops_;
};

}  // namespace allocsim
