// CUDA graphs' private pools: what a capture allocates stays in its pool, and goes back only once
// its graphs are gone and the cache is emptied.
#include <gtest/gtest.h>

#include "backends/simulated_device.hpp"
#include "backends/testing/device_op_list.hpp"
#include "core/caching_allocator.hpp"
#include "core/probe/replay_probe.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr StreamId kCapture = 7;
constexpr MempoolId kPool{1, 0};

struct Fixture {
  explicit Fixture(uint64_t capacity = uint64_t{1} << 30, AllocConf conf = {})
      : device(capacity, 0), allocator(device, AllocatorOptions{std::move(conf)}) {}
  BlockId captured(uint64_t n, StreamId stream = kCapture) {
    allocator.begin_allocate_to_pool(kPool, stream);
    const BlockId b = allocator.malloc(n, stream);
    allocator.end_allocate_to_pool(kPool);
    return b;
  }
  MempoolId pool_of(BlockId b) const {
    MempoolId pool{9, 9};
    allocator.for_each_block([&](const BlockInfo& info) {
      if (info.ptr == allocator.block_address(b)) pool = info.pool;
    });
    return pool;
  }
  SimulatedDevice device;
  CachingAllocator allocator;
};

TEST(PrivatePools, ACaptureDoesNotReuseTheOrdinaryPoolsFreeBlocks) {
  Fixture f;
  f.allocator.free(f.allocator.malloc(4 * MiB, kCapture));  // a free 20 MiB segment, ordinary
  const BlockId b = f.captured(4 * MiB);
  EXPECT_EQ(f.pool_of(b), kPool);
  EXPECT_EQ(testing::op_list(f.allocator.device_ops()),
            (testing::OpList{{"segment_alloc", 20 * MiB}, {"segment_alloc", 20 * MiB}}));
  // Outside the capture the same stream is served from the ordinary pools again.
  const BlockId c = f.allocator.malloc(4 * MiB, kCapture);
  EXPECT_EQ(f.pool_of(c), MempoolId{});
  EXPECT_EQ(f.allocator.device_ops().size(), 2u);
  f.allocator.check_invariants();
}

TEST(PrivatePools, OnlyTheCapturingStreamIsRouted) {
  Fixture f;
  f.allocator.begin_allocate_to_pool(kPool, kCapture);
  const BlockId other = f.allocator.malloc(1000, 0);
  const BlockId mine = f.allocator.malloc(1000, kCapture);
  f.allocator.end_allocate_to_pool(kPool);
  EXPECT_EQ(f.pool_of(other), MempoolId{});
  EXPECT_EQ(f.pool_of(mine), kPool);
  f.allocator.check_invariants();
}

TEST(PrivatePools, FreedBlocksReturnToTheirPoolAndServeTheNextCapture) {
  Fixture f;
  const BlockId b = f.captured(4 * MiB);
  f.allocator.free(b);
  const BlockId again = f.captured(4 * MiB);
  EXPECT_EQ(f.allocator.device_ops().size(), 1u);  // the pool's cached segment served it
  EXPECT_EQ(f.pool_of(again), kPool);
  f.allocator.check_invariants();
}

TEST(PrivatePools, SegmentsGoBackOnlyOnceThePoolHasNoUsersAndTheCacheIsEmptied) {
  Fixture f;
  f.allocator.free(f.captured(4 * MiB));
  f.allocator.empty_cache();  // the graph is alive: its pool keeps its segment
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current, static_cast<int64_t>(20 * MiB));
  f.allocator.release_pool(kPool);
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current, static_cast<int64_t>(20 * MiB));
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current, 0);
  EXPECT_EQ(testing::op_list(f.allocator.device_ops()),
            (testing::OpList{{"segment_alloc", 20 * MiB}, {"segment_free", 20 * MiB}}));
  // Forgotten once empty: the same id begins a new pool.
  const BlockId b = f.captured(1000);
  EXPECT_EQ(f.pool_of(b), kPool);
  f.allocator.check_invariants();
}

TEST(PrivatePools, APoolWithTwoUsersStaysUntilBothAreReleased) {
  Fixture f;
  f.allocator.free(f.captured(4 * MiB));
  f.allocator.free(f.captured(4 * MiB));  // a second graph captured into the shared pool
  f.allocator.release_pool(kPool);
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().segment[kAggregate].current, 1);
  f.allocator.release_pool(kPool);
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().segment[kAggregate].current, 0);
}

TEST(PrivatePools, AllocatedBlocksKeepAReleasedPoolsSegment) {
  Fixture f;
  const BlockId kept = f.captured(4 * MiB);
  f.allocator.release_pool(kPool);
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().segment[kAggregate].current, 1);
  f.allocator.free(kept);
  f.allocator.empty_cache();  // the pool is still without users: now its segment goes
  EXPECT_EQ(f.allocator.stats().segment[kAggregate].current, 0);
  f.allocator.check_invariants();
}

TEST(PrivatePools, TheOomMessageCountsThePoolsFreeBlocksAsAllocated) {
  Fixture f(100 * MiB);
  f.allocator.free(f.captured(30 * MiB));
  f.allocator.set_memory_limit(60 * MiB);
  ASSERT_EQ(f.allocator.malloc(40 * MiB, 0), kNoBlock);
  const std::string m = f.allocator.last_oom()->message();
  EXPECT_NE(m.find("Of the allocated memory 30.00 MiB is allocated by PyTorch, with 30.00 MiB "
                   "allocated in private pools (e.g., CUDA Graphs), and 0 bytes is reserved"),
            std::string::npos)
      << m;
}

// A history that starts mid-run: a segment a capture carved before it goes back to its pool, so
// that only the pool's requests use its free space, and it goes once the pool's graphs are gone.
TEST(PrivatePools, ARestoredSegmentBelongsToItsPool) {
  Fixture f;
  const uint64_t at = uint64_t{0x7f00} << 28;
  f.device.use_recorded_segments({{at, 20 * MiB}});
  EXPECT_FALSE(ReplayProbe(f.allocator).restore_segment(at, 20 * MiB, kCapture, false, {}, kPool))
      << "a pool that never began";
  f.allocator.begin_allocate_to_pool(kPool, kCapture);
  f.allocator.end_allocate_to_pool(kPool);
  const auto blocks =
      ReplayProbe(f.allocator)
          .restore_segment(at, 20 * MiB, kCapture, false, {{at, 4 * MiB, 4 * MiB}}, kPool);
  ASSERT_TRUE(blocks);
  EXPECT_EQ(f.pool_of((*blocks)[0]), kPool);
  f.allocator.check_invariants();
  // Outside a capture its free 16 MiB serve nothing: a new segment.
  const BlockId ordinary = f.allocator.malloc(4 * MiB, kCapture);
  EXPECT_EQ(f.pool_of(ordinary), MempoolId{});
  EXPECT_EQ(f.allocator.device_ops().size(), 1u);
  // The pool's next request is served from it.
  const BlockId captured = f.captured(4 * MiB);
  EXPECT_EQ(f.allocator.block_address(captured), at + 4 * MiB);
  EXPECT_EQ(f.allocator.device_ops().size(), 1u);
  f.allocator.free(ordinary);
  f.allocator.free(captured);
  f.allocator.free((*blocks)[0]);
  f.allocator.empty_cache();  // the ordinary segment goes; the pool is in use: its segment stays
  EXPECT_EQ(f.allocator.stats().segment[kAggregate].current, 1);
  f.allocator.release_pool(kPool);  // the graph captured before the history
  f.allocator.release_pool(kPool);  // and the one whose capture the test made
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().segment[kAggregate].current, 0);
  f.allocator.check_invariants();
}

// Freeable pools go back in the order they were made, or in the order a hint of addresses names
// (PyTorch's hash-map order, taken from a recording): the ordinary pools' segments first either
// way.
TEST(PrivatePools, FreeablePoolsGoBackInTheHintedOrder) {
  constexpr MempoolId kSecond{2, 0};
  for (const bool hinted : {false, true}) {
    Fixture f;
    f.allocator.free(f.captured(4 * MiB));
    f.allocator.begin_allocate_to_pool(kSecond, kCapture);
    const BlockId b = f.allocator.malloc(30 * MiB, kCapture);
    f.allocator.end_allocate_to_pool(kSecond);
    f.allocator.free(b);
    f.allocator.free(f.allocator.malloc(50 * MiB, 0));  // ordinary
    f.allocator.release_pool(kPool);
    f.allocator.release_pool(kSecond);
    const size_t before = f.allocator.device_ops().size();
    if (hinted) ReplayProbe(f.allocator).set_pool_release_order({f.allocator.block_address(b)});
    f.allocator.empty_cache();
    std::vector<uint64_t> sizes;
    for (size_t k = before; k < f.allocator.device_ops().size(); ++k)
      sizes.push_back(f.allocator.device_ops()[k].size);
    EXPECT_EQ(sizes, hinted ? (std::vector<uint64_t>{50 * MiB, 30 * MiB, 20 * MiB})
                            : (std::vector<uint64_t>{50 * MiB, 20 * MiB, 30 * MiB}));
    f.allocator.check_invariants();
  }
}

// An expandable segment gives back the whole pages of a free block, from the first whole page in
// it: a hint anywhere in a pool's free block orders that pool.
TEST(PrivatePools, AHintInsideAFreeBlockOrdersItsPool) {
  constexpr MempoolId kSecond{2, 0};
  AllocConf conf;
  conf.expandable_segments = true;
  Fixture f(uint64_t{1} << 30, conf);
  const BlockId keep = f.captured(1 * MiB);  // kPool: the first page stays in use
  f.allocator.free(f.captured(30 * MiB));
  f.allocator.begin_allocate_to_pool(kSecond, kCapture);
  const BlockId b = f.allocator.malloc(50 * MiB, kCapture);
  f.allocator.end_allocate_to_pool(kSecond);
  f.allocator.free(b);
  f.allocator.release_pool(kPool);
  f.allocator.release_pool(kPool);
  f.allocator.release_pool(kSecond);
  // Not the block's address: without the hint kPool, made first, would go first.
  ReplayProbe(f.allocator).set_pool_release_order({f.allocator.block_address(b) + 20 * MiB});
  const size_t before = f.allocator.device_ops().size();
  f.allocator.empty_cache();
  std::vector<uint64_t> sizes;
  for (size_t k = before; k < f.allocator.device_ops().size(); ++k)
    sizes.push_back(f.allocator.device_ops()[k].size);
  ASSERT_EQ(sizes.size(), 2u);
  EXPECT_EQ(sizes[0], 60 * MiB);  // kSecond's pages first, as hinted, though made second
  ReplayProbe(f.allocator).set_pool_release_order({});
  f.allocator.free(keep);
  f.allocator.check_invariants();
}

// PyTorch counts a pool's device allocations per malloc that took memory (one map of one or more
// pages) but its unmaps per call: a pool that mapped two pages in one call and unmapped one of
// them is freed once it unmaps a third page, though the other of the two is still mapped under a
// block in use. That block, freed later, goes into the freed pool's memory: to the pool made next
// (glibc hands it the same memory), with the free blocks beside it.
struct FreedWhileHoldingABlock : Fixture {
  static constexpr MempoolId kNext{2, 0};
  static AllocConf expandable() {
    AllocConf conf;
    conf.expandable_segments = true;
    return conf;
  }
  FreedWhileHoldingABlock() : Fixture(uint64_t{1} << 30, expandable()) {
    const BlockId a = captured(30 * MiB);  // one map: pages 0 and 1
    held = captured(6 * MiB);              // in page 1
    const BlockId c = captured(10 * MiB);  // one map: page 2
    page1 = allocator.block_address(a) + 20 * MiB;
    allocator.free(a);
    for (int users = 0; users < 3; ++users) allocator.release_pool(kPool);
    allocator.empty_cache();  // page 0: one malloc of two left
    allocator.free(c);
    allocator.empty_cache();  // page 2: none left, the pool is freed with page 1 mapped
  }
  // A capture into a new pool, on the first page free in the old one if it has it.
  BlockId next_capture() {
    allocator.begin_allocate_to_pool(kNext, kCapture);
    const BlockId d = allocator.malloc(2 * MiB, kCapture);
    allocator.end_allocate_to_pool(kNext);
    return d;
  }
  BlockId held = kNoBlock;
  uint64_t page1 = 0;
};

TEST(PrivatePools, APoolFreedWhileHoldingABlockPassesItToThePoolMadeNext) {
  FreedWhileHoldingABlock f;
  EXPECT_EQ(f.allocator.freed_pools_holding_blocks().pools, 1u);
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current, static_cast<int64_t>(20 * MiB));
  f.allocator.check_invariants();
  f.allocator.begin_allocate_to_pool(FreedWhileHoldingABlock::kNext, kCapture);  // made
  f.allocator.end_allocate_to_pool(FreedWhileHoldingABlock::kNext);
  EXPECT_EQ(f.allocator.freed_pools_holding_blocks().taken_over, 1u);
  f.allocator.free(f.held);  // merged with the free blocks beside it: page 1, in the new pool
  const size_t ops = f.allocator.device_ops().size();
  const BlockId d = f.next_capture();
  EXPECT_EQ(f.allocator.device_ops().size(), ops);  // nothing mapped
  EXPECT_EQ(f.allocator.block_address(d), f.page1);
  EXPECT_EQ(f.pool_of(d), FreedWhileHoldingABlock::kNext);
  f.allocator.check_invariants();
}

TEST(PrivatePools, ABlockFreedIntoAFreedPoolIsLostToThePoolMadeNext) {
  FreedWhileHoldingABlock f;
  f.allocator.free(f.held);  // into the freed pool's memory, which the next pool's sets clear
  const size_t ops = f.allocator.device_ops().size();
  const BlockId d = f.next_capture();
  EXPECT_EQ(f.allocator.device_ops().size(), ops + 1);  // a new segment's page
  EXPECT_NE(f.allocator.block_address(d), f.page1);
  f.allocator.free(d);
  f.allocator.release_pool(FreedWhileHoldingABlock::kNext);
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current, static_cast<int64_t>(20 * MiB));
  f.allocator.check_invariants();
}

// The replay previews what a malloc's slow path or empty_cache() would give back; the freeable
// pools' segments come after the ordinary pools', in the hinted order, and a pool still in use
// keeps its own.
TEST(PrivatePools, PreviewsIncludeTheFreeablePoolsInTheirOrder) {
  constexpr MempoolId kSecond{2, 0}, kKept{3, 0};
  Fixture f;
  f.allocator.set_memory_limit(200 * MiB);
  f.allocator.free(f.captured(4 * MiB));  // kPool: a free 20 MiB segment
  f.allocator.begin_allocate_to_pool(kSecond, kCapture);
  const BlockId b = f.allocator.malloc(30 * MiB, kCapture);
  f.allocator.end_allocate_to_pool(kSecond);
  f.allocator.free(b);
  f.allocator.begin_allocate_to_pool(kKept, kCapture);
  f.allocator.free(f.allocator.malloc(12 * MiB, kCapture));  // its graph still alive
  f.allocator.end_allocate_to_pool(kKept);
  f.allocator.free(f.allocator.malloc(50 * MiB, 0));  // ordinary
  f.allocator.release_pool(kPool);
  f.allocator.release_pool(kSecond);
  ReplayProbe(f.allocator).set_pool_release_order({f.allocator.block_address(b)});
  using R = CachingAllocator::SegmentRelease;
  const std::vector<R> all{{50 * MiB, 0}, {30 * MiB, kCapture}, {20 * MiB, kCapture}};
  EXPECT_EQ(ReplayProbe(f.allocator).empty_cache_preview(), all);
  // 120 MiB reserved of 200: 100 MiB more fits only once the whole cache is released.
  EXPECT_EQ(ReplayProbe(f.allocator).slow_path_release_preview(100 * MiB, 0), all);
  const size_t before = f.allocator.device_ops().size();
  ASSERT_NE(f.allocator.malloc(100 * MiB, 0), kNoBlock);
  std::vector<R> released;
  for (size_t k = before; k + 1 < f.allocator.device_ops().size(); ++k) {
    const DeviceOp& op = f.allocator.device_ops()[k];
    released.push_back({op.size, op.stream});
  }
  EXPECT_EQ(released, all);
  // During a capture the slow path keeps the cache: not previewed.
  f.allocator.begin_allocate_to_pool(kKept, kCapture);
  EXPECT_EQ(ReplayProbe(f.allocator).slow_path_release_preview(100 * MiB, kCapture), std::nullopt);
  EXPECT_EQ(ReplayProbe(f.allocator).empty_cache_preview(), std::nullopt);
  f.allocator.end_allocate_to_pool(kKept);
  f.allocator.check_invariants();
}
// torch.cuda.MemPool: made with its own use; its destructor releases that use and empties that
// pool's cache alone (PyTorch's emptyCache(mempool_id)).
TEST(PrivatePools, AMemPoolsDeletionEmptiesItsOwnPoolAlone) {
  Fixture f;
  constexpr MempoolId kMemPool{0, 4};
  f.allocator.free(f.allocator.malloc(4 * MiB, 0));  // a free ordinary segment
  f.allocator.free(f.captured(4 * MiB));
  f.allocator.release_pool(kPool);  // a graph gone: its pool is freeable
  f.allocator.create_pool(kMemPool);
  f.allocator.begin_allocate_to_pool(kMemPool, 0);
  const BlockId waits = f.allocator.malloc(4 * MiB, 0);
  const BlockId held = f.allocator.malloc(30 * MiB, 0);
  f.allocator.end_allocate_to_pool(kMemPool);
  f.allocator.release_pool(kMemPool);  // use_mem_pool's end
  const BlockId other = f.allocator.malloc(1000, 3);
  f.allocator.free(other, /*pending_stream_uses=*/true);  // another pool's free waits on
  f.allocator.free(waits, /*pending_stream_uses=*/true);
  EXPECT_TRUE(f.allocator.has_pool(kMemPool));
  const int64_t syncs = f.allocator.stats().num_sync_all_streams;

  f.allocator.empty_cache(kMemPool);  // still used by the MemPool: nothing happens
  EXPECT_EQ(f.allocator.stats().num_sync_all_streams, syncs);
  EXPECT_EQ(f.allocator.stats().segment[kAggregate].current, 5);

  f.allocator.release_pool(kMemPool);  // the MemPool deleted
  f.allocator.empty_cache(kMemPool);
  EXPECT_EQ(f.allocator.stats().num_sync_all_streams, syncs + 1);
  EXPECT_FALSE(f.allocator.is_pending_free(waits));  // its pool's free completed
  EXPECT_TRUE(f.allocator.is_pending_free(other));   // the ordinary pool's still waits
  // Its freed 20 MiB segment went back; the one under a live block, the ordinary pools' and
  // the freeable graph pool's stay.
  EXPECT_EQ(testing::op_list(f.allocator.device_ops()).back(),
            (testing::OpList::value_type{"segment_free", 20 * MiB}));
  EXPECT_EQ(f.allocator.stats().segment[kAggregate].current, 4);
  EXPECT_TRUE(f.allocator.has_pool(kMemPool));  // a segment left: not yet freed

  f.allocator.free(held);
  f.allocator.empty_cache();  // every free completed, every pool without users emptied
  EXPECT_FALSE(f.allocator.has_pool(kMemPool));
  EXPECT_FALSE(f.allocator.is_pending_free(other));
  EXPECT_EQ(f.allocator.stats().segment[kAggregate].current, 0);
  f.allocator.check_invariants();
}

TEST(PrivatePools, AMemPoolThatServedNothingIsFreedByItsDeletion) {
  Fixture f;
  constexpr MempoolId kMemPool{0, 9};
  f.allocator.create_pool(kMemPool);
  f.allocator.create_pool(kMemPool);  // a second user (a graph captured into it)
  f.allocator.release_pool(kMemPool);
  f.allocator.empty_cache(kMemPool);
  EXPECT_TRUE(f.allocator.has_pool(kMemPool));
  f.allocator.release_pool(kMemPool);
  f.allocator.empty_cache(kMemPool);
  EXPECT_FALSE(f.allocator.has_pool(kMemPool));
  EXPECT_EQ(f.allocator.stats().num_sync_all_streams, 1);
  EXPECT_THROW(f.allocator.create_pool(MempoolId{}), std::invalid_argument);
}

TEST(PrivatePools, MisuseIsRefused) {
  Fixture f;
  EXPECT_THROW(f.allocator.begin_allocate_to_pool(MempoolId{}, kCapture), std::invalid_argument);
  EXPECT_THROW(f.allocator.end_allocate_to_pool(kPool), std::invalid_argument);
  EXPECT_THROW(f.allocator.release_pool(kPool), std::invalid_argument);
  f.allocator.begin_allocate_to_pool(kPool, kCapture);
  EXPECT_THROW(f.allocator.begin_allocate_to_pool(kPool, 0), std::invalid_argument);
}

// torch.cuda.MemPool(use_on_oom=True): a request of the ordinary pools that fits no new segment
// under the cap takes the pool's free block before any cached segment is released (PyTorch
// 2.14's try_mempool_fallback, right after the first alloc_block).
struct OnOomFixture : Fixture {
  static constexpr MempoolId kMemPool{0, 1};
  explicit OnOomFixture(bool use_on_oom) {
    allocator.set_memory_limit(700 * MiB);
    allocator.create_pool(kMemPool);
    if (use_on_oom) allocator.set_use_on_oom(kMemPool, true);
    allocator.begin_allocate_to_pool(kMemPool, 0);
    allocator.free(allocator.malloc(300 * MiB, 0));  // the pool caches a free 300 MiB block
    allocator.end_allocate_to_pool(kMemPool);
    allocator.release_pool(kMemPool);                // use_mem_pool's end
    allocator.free(allocator.malloc(200 * MiB, 0));  // the ordinary pool caches 200 MiB
  }
};

TEST(PrivatePools, AUseOnOomPoolServesARequestBeforeTheCacheIsReleased) {
  OnOomFixture f(true);
  const BlockId b = f.allocator.malloc(250 * MiB, 0);  // 300 + 200 + 250 > 700
  ASSERT_NE(b, kNoBlock);
  EXPECT_EQ(f.pool_of(b), OnOomFixture::kMemPool);
  EXPECT_EQ(f.allocator.block_size(b), 250 * MiB);  // split as any large block
  EXPECT_EQ(testing::op_list(f.allocator.device_ops()),
            (testing::OpList{{"segment_alloc", 300 * MiB}, {"segment_alloc", 200 * MiB}}));
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 0);
  f.allocator.free(b);  // back to its pool
  EXPECT_EQ(f.allocator.stats().allocated_bytes[kAggregate].current, 0);
  f.allocator.check_invariants();
}

TEST(PrivatePools, WithoutUseOnOomTheCacheIsReleasedForANewSegment) {
  OnOomFixture f(false);
  const BlockId b = f.allocator.malloc(250 * MiB, 0);
  ASSERT_NE(b, kNoBlock);
  EXPECT_EQ(f.pool_of(b), MempoolId{});
  EXPECT_EQ(testing::op_list(f.allocator.device_ops()),
            (testing::OpList{{"segment_alloc", 300 * MiB},
                             {"segment_alloc", 200 * MiB},
                             {"segment_free", 200 * MiB},
                             {"segment_alloc", 250 * MiB}}));
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 1);
}

TEST(PrivatePools, AUseOnOomPoolServesNoRequestOfAnotherPoolNorOneItCannotFit) {
  OnOomFixture f(true);
  // Too large for its block: the release and retry, then the OOM as ever.
  EXPECT_EQ(f.allocator.malloc(450 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().num_ooms, 1);
  const BlockId live = f.allocator.malloc(350 * MiB, 0);  // 300 + 350 reserved: no room for more
  ASSERT_NE(live, kNoBlock);
  // A request routed to another private pool is not served from it.
  f.allocator.begin_allocate_to_pool(kPool, 0);
  EXPECT_EQ(f.allocator.malloc(250 * MiB, 0), kNoBlock);
  f.allocator.end_allocate_to_pool(kPool);
  // Switched off again (setUseOnOOM(false)): the ordinary way, an OOM.
  f.allocator.set_use_on_oom(OnOomFixture::kMemPool, false);
  EXPECT_EQ(f.allocator.malloc(250 * MiB, 0), kNoBlock);
  f.allocator.set_use_on_oom(OnOomFixture::kMemPool, true);
  const BlockId b = f.allocator.malloc(250 * MiB, 0);
  ASSERT_NE(b, kNoBlock);
  EXPECT_EQ(f.pool_of(b), OnOomFixture::kMemPool);
}

// Under expandable segments the fallback takes no block of an expandable segment, and does take
// the same pool's block of an ordinary segment made while they were off (as PyTorch 2.11 did on
// an H100: tools/gpu/probe_mempool_options.py expandable_fallback, and the calls fuzz shape).
TEST(PrivatePools, AUseOnOomPoolsExpandableBlocksServeNoRequestOfTheOrdinaryPools) {
  for (const bool expandable_block : {true, false}) {
    SCOPED_TRACE(expandable_block);
    AllocConf expandable;
    expandable.expandable_segments = true;
    Fixture f(uint64_t{1} << 30, expandable_block ? expandable : AllocConf{});
    constexpr MempoolId kMemPool{0, 1};
    f.allocator.set_memory_limit(700 * MiB);
    f.allocator.create_pool(kMemPool);
    f.allocator.set_use_on_oom(kMemPool, true);
    f.allocator.begin_allocate_to_pool(kMemPool, 0);
    f.allocator.free(f.allocator.malloc(58 * MiB, 0));  // three 20 MiB pages, or a segment
    f.allocator.end_allocate_to_pool(kMemPool);
    f.allocator.release_pool(kMemPool);
    if (!expandable_block) f.allocator.change_settings(expandable);
    ASSERT_NE(f.allocator.malloc(600 * MiB, 0), kNoBlock);  // nothing left to release
    const BlockId b = f.allocator.malloc(54 * MiB, 0);      // over the cap: 700 MiB
    if (expandable_block) {
      EXPECT_EQ(b, kNoBlock);
      EXPECT_EQ(f.allocator.stats().num_ooms, 1);
    } else {
      ASSERT_NE(b, kNoBlock);
      EXPECT_EQ(f.pool_of(b), kMemPool);
    }
    f.allocator.check_invariants();
  }
}

// torch.cuda.MemPool(no_split=True): its blocks are taken whole, large and small.
TEST(PrivatePools, ANoSplitPoolsBlocksAreNeverSplit) {
  Fixture f;
  constexpr MempoolId kMemPool{0, 2};
  f.allocator.set_no_split(kMemPool);  // set as the MemPool is made, before the pool exists
  f.allocator.create_pool(kMemPool);
  f.allocator.begin_allocate_to_pool(kMemPool, 0);
  const BlockId large = f.allocator.malloc(4 * MiB, 0);
  const BlockId small = f.allocator.malloc(1000, 0);
  f.allocator.end_allocate_to_pool(kMemPool);
  EXPECT_EQ(f.allocator.block_size(large), 20 * MiB);
  EXPECT_EQ(f.allocator.block_size(small), 2 * MiB);
  EXPECT_EQ(f.allocator.stats().allocated_bytes[kAggregate].current,
            static_cast<int64_t>(22 * MiB));
  // The ordinary pools split as ever.
  EXPECT_EQ(f.allocator.block_size(f.allocator.malloc(4 * MiB, 0)), 4 * MiB);
  f.allocator.check_invariants();
}

}  // namespace
}  // namespace allocsim
