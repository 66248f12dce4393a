// The caching allocator's rules, one test each, over a simulated device.
#include <gtest/gtest.h>

#include "backends/fault_injecting_device.hpp"
#include "backends/simulated_device.hpp"
#include "backends/testing/device_op_list.hpp"
#include "core/caching_allocator.hpp"
#include "core/probe/replay_probe.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

testing::OpList ops(const CachingAllocator& a) {
  return testing::op_list(a.device_ops());
}

struct Fixture {
  explicit Fixture(uint64_t capacity = uint64_t{1} << 30, AllocConf conf = {})
      : simulated(capacity, 0),
        device(simulated),
        allocator(device, AllocatorOptions{std::move(conf)}) {}
  SimulatedDevice simulated;
  FaultInjectingDevice device;  // over simulated: counts and fails chosen calls
  CachingAllocator allocator;
};

TEST(CachingAllocator, SmallRequestSplitsA2MiBSegment) {
  Fixture f;
  const BlockId b = f.allocator.malloc(1000, 0);
  ASSERT_NE(b, kNoBlock);
  EXPECT_EQ(f.allocator.block_size(b), 1024u);
  const DeviceStats& s = f.allocator.stats();
  EXPECT_EQ(s.allocated_bytes[kSmallPool].current, 1024);
  EXPECT_EQ(s.requested_bytes[kSmallPool].current, 1000);
  EXPECT_EQ(s.reserved_bytes[kSmallPool].current, static_cast<int64_t>(2 * MiB));
  EXPECT_EQ(s.inactive_split[kSmallPool].current, 1);
  EXPECT_EQ(s.inactive_split_bytes[kSmallPool].current, static_cast<int64_t>(2 * MiB - 1024));
  EXPECT_EQ(ops(f.allocator), (decltype(ops(f.allocator)){{"segment_alloc", 2 * MiB}}));
  f.allocator.check_invariants();
}

TEST(CachingAllocator, SettingsChangedMidRunTakeEffectAtTheNextRequest) {
  Fixture f;
  const BlockId a = f.allocator.malloc(30 * MiB, 0);  // a 30 MiB segment
  f.allocator.free(a);
  // Without max_split_size the 8 MiB request splits the cached 30 MiB block; with it the block
  // is oversize, never split, and a segment of its own is made.
  f.allocator.change_settings(change_alloc_conf(f.allocator.conf(), "max_split_size_mb:20"));
  const BlockId b = f.allocator.malloc(8 * MiB, 0);
  EXPECT_EQ(ops(f.allocator),
            (decltype(ops(f.allocator)){{"segment_alloc", 30 * MiB}, {"segment_alloc", 20 * MiB}}));
  // The statistics keep the max_split_size the allocator was made with, as PyTorch's do.
  EXPECT_EQ(f.allocator.stats().max_split_size, static_cast<int64_t>(kNoMaxSplitSize));
  f.allocator.free(b);
  f.allocator.check_invariants();
}

TEST(CachingAllocator, LargeRemainderOfAtMostOneMiBIsNotSplit) {
  Fixture f;
  const BlockId a = f.allocator.malloc(5 * MiB, 0);  // 20 MiB segment, 15 MiB remainder: split
  EXPECT_EQ(f.allocator.block_size(a), 5 * MiB);
  const BlockId b = f.allocator.malloc(19 * MiB + 512 * 1024, 0);  // 20 MiB segment, 0.5 MiB left
  EXPECT_EQ(f.allocator.block_size(b), 20 * MiB);
  EXPECT_EQ(f.allocator.stats().allocated_bytes[kLargePool].current,
            static_cast<int64_t>(25 * MiB));
  EXPECT_EQ(f.allocator.stats().requested_bytes[kLargePool].current,
            static_cast<int64_t>(24 * MiB + 512 * 1024));
  f.allocator.check_invariants();
}

TEST(CachingAllocator, BestFitTakesTheSmallestBlockThenTheLowestAddress) {
  Fixture f;
  const BlockId big = f.allocator.malloc(40 * MiB, 0);
  const BlockId sep1 = f.allocator.malloc(12 * MiB, 0);
  const BlockId mid = f.allocator.malloc(30 * MiB, 0);
  const BlockId sep2 = f.allocator.malloc(12 * MiB, 0);
  const uint64_t mid_address = f.allocator.block_address(mid);
  f.allocator.free(big);
  f.allocator.free(mid);
  const BlockId c = f.allocator.malloc(25 * MiB, 0);
  EXPECT_EQ(f.allocator.block_address(c), mid_address);  // 30 MiB fits better than 40 MiB
  EXPECT_EQ(f.allocator.stats().num_device_alloc, 4);
  (void)sep1;
  (void)sep2;
  f.allocator.check_invariants();
}

TEST(CachingAllocator, BlocksAreNeverReusedAcrossStreams) {
  Fixture f;
  const BlockId a = f.allocator.malloc(4 * MiB, 1);
  f.allocator.free(a);
  const BlockId b = f.allocator.malloc(4 * MiB, 2);
  EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 2);
  const BlockId c = f.allocator.malloc(4 * MiB, 1);
  EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 2);  // stream 1's cache serves it
  (void)b;
  (void)c;
  f.allocator.check_invariants();
}

TEST(CachingAllocator, FreedNeighboursMergeAndEmptyCacheReleasesWholeSegments) {
  Fixture f;
  const BlockId a = f.allocator.malloc(5 * MiB, 0);
  const BlockId b = f.allocator.malloc(5 * MiB, 0);
  EXPECT_EQ(f.allocator.block_address(b), f.allocator.block_address(a) + 5 * MiB);
  f.allocator.free(a);
  EXPECT_EQ(f.allocator.stats().inactive_split[kLargePool].current, 2);
  f.allocator.empty_cache();  // the segment is split (b in use): nothing released
  EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 1);
  f.allocator.free(b);  // merges with a and the tail: one free 20 MiB block
  EXPECT_EQ(f.allocator.stats().inactive_split[kLargePool].current, 0);
  EXPECT_EQ(f.allocator.largest_free_block(), 20 * MiB);
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current, 0);
  EXPECT_EQ(ops(f.allocator),
            (decltype(ops(f.allocator)){{"segment_alloc", 20 * MiB}, {"segment_free", 20 * MiB}}));
  EXPECT_EQ(f.allocator.stats().num_sync_all_streams, 2);
  f.allocator.check_invariants();
}

// A segment whose one block was freed again goes back on its own; one still split does not.
TEST(CachingAllocator, AWholeFreeSegmentIsReleasedOnItsOwn) {
  Fixture f;
  const BlockId a = f.allocator.malloc(5 * MiB, 0);
  const BlockId b = f.allocator.malloc(5 * MiB, 0);
  const BlockId c = f.allocator.malloc(30 * MiB, 0);
  f.allocator.free(a);
  EXPECT_FALSE(ReplayProbe(f.allocator).release_whole_free_segment(a));  // b still in its segment
  f.allocator.free(c);
  EXPECT_TRUE(ReplayProbe(f.allocator).release_whole_free_segment(c));
  EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 1);
  EXPECT_EQ(f.allocator.stats().num_device_free, 1);
  EXPECT_EQ(f.allocator.stats().num_sync_all_streams, 0);  // no empty_cache: nothing synchronised
  EXPECT_EQ(ops(f.allocator), (decltype(ops(f.allocator)){{"segment_alloc", 20 * MiB},
                                                          {"segment_alloc", 30 * MiB},
                                                          {"segment_free", 30 * MiB}}));
  (void)b;
  f.allocator.check_invariants();
}

TEST(CachingAllocator, OversizeBlocksServeOnlyLargeRequestsWithinTheRoundingLimit) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(uint64_t{1} << 30, conf);
  const BlockId big = f.allocator.malloc(100 * MiB, 0);
  EXPECT_EQ(f.allocator.stats().oversize_allocations.current, 1);
  EXPECT_EQ(f.allocator.stats().oversize_segments.current, 1);
  f.allocator.free(big);
  const BlockId small =
      f.allocator.malloc(30 * MiB, 0);  // below max_split: never an oversize block
  EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 2);
  const BlockId under = f.allocator.malloc(80 * MiB, 0);  // 100 >= 80 + 20: not reused
  EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 3);
  const BlockId close = f.allocator.malloc(90 * MiB, 0);  // 100 < 90 + 20: reused, not split
  EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 3);
  EXPECT_EQ(f.allocator.block_size(close), 100 * MiB);
  EXPECT_EQ(f.allocator.stats().max_split_size, static_cast<int64_t>(40 * MiB));
  (void)small;
  (void)under;
  f.allocator.check_invariants();
}

TEST(CachingAllocator, ReleaseAvailableCachedBlocksFreesOversizeBlocksFirst) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(200 * MiB, conf);
  const BlockId a = f.allocator.malloc(60 * MiB, 0);
  const BlockId b = f.allocator.malloc(60 * MiB, 0);
  f.allocator.free(a);
  f.allocator.free(b);
  // 100 MiB: no free block fits, cudaMalloc fails (120 of 200 MiB held), the oversize blocks
  // are released from the largest down until 100 MiB are free, and cudaMalloc is tried again
  // without a full empty_cache.
  ASSERT_NE(f.allocator.malloc(100 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 0);
  EXPECT_EQ(f.allocator.stats().num_sync_all_streams, 0);
  EXPECT_EQ(ops(f.allocator), (decltype(ops(f.allocator)){{"segment_alloc", 60 * MiB},
                                                          {"segment_alloc", 60 * MiB},
                                                          {"segment_free", 60 * MiB},
                                                          {"segment_free", 60 * MiB},
                                                          {"segment_alloc", 100 * MiB}}));
  f.allocator.check_invariants();
}

// The walk down the oversize blocks goes on from the block before the one it released, wherever
// in the pool that block lies: here the stream's blocks sort before another stream's, in the
// lower half of the pool, where releasing one moves the keys below it.
TEST(CachingAllocator, ReleaseAvailableCachedBlocksWalksDownOneStreamInAMixedPool) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(350 * MiB, conf);
  std::vector<BlockId> held;
  for (uint64_t mib : {45, 50, 60}) held.push_back(f.allocator.malloc(mib * MiB, 1));
  for (int i = 0; i < 4; ++i) held.push_back(f.allocator.malloc(30 * MiB, 2));
  for (BlockId b : held) f.allocator.free(b);
  // 100 MiB on stream 1: cudaMalloc fails (275 of 350 MiB held); the 60 and 50 MiB blocks go.
  ASSERT_NE(f.allocator.malloc(100 * MiB, 1), kNoBlock);
  const testing::OpList all = ops(f.allocator);
  const testing::OpList last(all.end() - 3, all.end());
  EXPECT_EQ(last, (testing::OpList{{"segment_free", 60 * MiB},
                                   {"segment_free", 50 * MiB},
                                   {"segment_alloc", 100 * MiB}}));
  f.allocator.check_invariants();
}

TEST(CachingAllocator, SlowPathReleasesTheCacheAndRetries) {
  Fixture f(100 * MiB);
  f.allocator.free(f.allocator.malloc(60 * MiB, 0));
  ASSERT_NE(f.allocator.malloc(70 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 1);
  EXPECT_EQ(f.allocator.stats().num_sync_all_streams, 1);
  EXPECT_EQ(ops(f.allocator), (decltype(ops(f.allocator)){{"segment_alloc", 60 * MiB},
                                                          {"segment_free", 60 * MiB},
                                                          {"segment_alloc", 70 * MiB}}));
  f.allocator.check_invariants();
}

TEST(CachingAllocator, OomMessageIsPyTorchs) {
  Fixture f(100 * MiB);
  ASSERT_NE(f.allocator.malloc(70 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.malloc(40 * MiB, 0), kNoBlock);
  const auto& oom = f.allocator.last_oom();
  ASSERT_TRUE(oom.has_value());
  EXPECT_EQ(oom->alloc_size, 40 * MiB);
  EXPECT_EQ(oom->message(),
            "CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0 has a total capacity of 100.00 "
            "MiB of "
            "which 30.00 MiB is free. Of the allocated memory 70.00 MiB is allocated by PyTorch, "
            "and 0 bytes "
            "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
            "try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
            "documentation for "
            "Memory Management  "
            "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-"
            "with-pytorch-cuda-alloc-conf)");
  EXPECT_EQ(f.allocator.stats().num_ooms, 1);
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 1);
  // A 5 MiB request reports the 20 MiB segment it needed, as PyTorch does.
  ASSERT_NE(f.allocator.malloc(29 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.malloc(5 * MiB, 0), kNoBlock);
  EXPECT_NE(f.allocator.last_oom()->message().find("Tried to allocate 20.00 MiB"),
            std::string::npos);
  f.allocator.check_invariants();
}

// The policy's boundaries, each on both sides: PyTorch compares with >= or > as written here, and
// a test that stays away from the boundary cannot tell the two apart.
TEST(CachingAllocatorBoundaries, ABlockOfExactlyMaxSplitSizeIsOversize) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(uint64_t{1} << 30, conf);
  const BlockId exact = f.allocator.malloc(40 * MiB, 0);
  EXPECT_EQ(f.allocator.stats().oversize_allocations.current, 1);  // size >= max_split_size
  const uint64_t exact_address = f.allocator.block_address(exact);
  f.allocator.free(exact);
  // A smaller request never splits an oversize block: a new segment.
  const BlockId smaller = f.allocator.malloc(30 * MiB, 0);
  EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 2);
  EXPECT_NE(f.allocator.block_address(smaller), exact_address);
  f.allocator.check_invariants();
}

TEST(CachingAllocatorBoundaries,
     ARequestOfExactlyMaxSplitSizeTakesOversizeBlocksWithinTheRounding) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;  // max_non_split_rounding stays 20 MiB
  {
    Fixture f(uint64_t{1} << 30, conf);
    f.allocator.free(f.allocator.malloc(58 * MiB, 0));
    const BlockId b = f.allocator.malloc(40 * MiB, 0);  // 58 < 40 + 20: reused whole
    EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 1);
    EXPECT_EQ(f.allocator.block_size(b), 58 * MiB);
  }
  {
    Fixture f(uint64_t{1} << 30, conf);
    f.allocator.free(f.allocator.malloc(60 * MiB, 0));
    (void)f.allocator.malloc(40 * MiB, 0);  // 60 >= 40 + 20: not reused
    EXPECT_EQ(f.allocator.stats().segment[kLargePool].current, 2);
  }
}

TEST(CachingAllocatorBoundaries, ASegmentOfExactlyMaxSplitSizeIsOversize) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(uint64_t{1} << 30, conf);
  f.allocator.free(f.allocator.malloc(40 * MiB, 0));
  EXPECT_EQ(f.allocator.stats().oversize_segments.current, 1);  // its size >= max_split_size
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().oversize_segments.current, 0);  // and so when released
}

TEST(CachingAllocatorBoundaries, ARestoredSegmentAndBlockOfExactlyMaxSplitSizeAreOversize) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(uint64_t{1} << 30, conf);
  const uint64_t at = uint64_t{0x7f00} << 28;
  f.simulated.use_recorded_segments({{at, 40 * MiB}});
  ASSERT_TRUE(
      ReplayProbe(f.allocator).restore_segment(at, 40 * MiB, 0, false, {{at, 40 * MiB, 40 * MiB}}));
  EXPECT_EQ(f.allocator.stats().oversize_segments.current, 1);
  EXPECT_EQ(f.allocator.stats().oversize_allocations.current, 1);
  f.allocator.check_invariants();
}

TEST(CachingAllocatorBoundaries, ReleasingOversizeBlocksOfExactlyTheRequestIsEnough) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(150 * MiB, conf);
  const BlockId a = f.allocator.malloc(50 * MiB, 0);
  const BlockId b = f.allocator.malloc(50 * MiB, 0);
  f.allocator.free(a);
  f.allocator.free(b);
  // cudaMalloc of 100 MiB fails with 100 MiB cached; releasing both oversize blocks frees exactly
  // 100 MiB, which is enough: no full release and retry.
  ASSERT_NE(f.allocator.malloc(100 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 0);
  f.allocator.check_invariants();
}

TEST(CachingAllocatorBoundaries, TheReleaseWalkTakesABlockOfExactlyMaxSplitSize) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(150 * MiB, conf);
  const BlockId exact = f.allocator.malloc(40 * MiB, 0);
  const BlockId larger = f.allocator.malloc(50 * MiB, 0);
  const BlockId smaller = f.allocator.malloc(30 * MiB, 0);
  f.allocator.free(exact);
  f.allocator.free(larger);
  f.allocator.free(smaller);
  // 80 MiB does not fit the 30 MiB left, and no cached block is that large: the walk releases
  // oversize blocks from the largest down, 50 MiB then the 40 MiB one (oversize: not below
  // max_split_size), which is enough. The 30 MiB block, not oversize, stays cached.
  ASSERT_NE(f.allocator.malloc(80 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 0);
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current,
            static_cast<int64_t>(110 * MiB));
  f.allocator.check_invariants();
}

TEST(CachingAllocatorBoundaries, TheReleaseWalkStopsOnceItFreedExactlyTheRequest) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(200 * MiB, conf);
  const BlockId a = f.allocator.malloc(50 * MiB, 0);
  const BlockId b = f.allocator.malloc(50 * MiB, 0);
  const BlockId c = f.allocator.malloc(44 * MiB, 0);
  f.allocator.free(a);
  f.allocator.free(b);
  f.allocator.free(c);
  // 100 MiB does not fit the 56 MiB left; the walk frees 50 and 50, exactly the request, and
  // stops: the 44 MiB oversize block stays cached.
  ASSERT_NE(f.allocator.malloc(100 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 0);
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current,
            static_cast<int64_t>(144 * MiB));
  f.allocator.check_invariants();
}

TEST(CachingAllocatorBoundaries, GarbageCollectionStopsOnceItReclaimedExactlyTheTarget) {
  AllocConf conf;
  conf.garbage_collection_threshold = 0.5;
  Fixture f(uint64_t{1} << 30, conf);
  f.allocator.set_memory_limit(200 * MiB);               // collects above 100 MiB reserved
  f.allocator.free(f.allocator.malloc(30 * MiB, 0));     // the oldest free block
  f.allocator.free(f.allocator.malloc(40 * MiB, 0));     // a younger one
  ASSERT_NE(f.allocator.malloc(60 * MiB, 0), kNoBlock);  // 130 MiB reserved
  // 70 MiB fits no free block: the collection's target is 130 - 100 = 30 MiB. Blocks at least
  // as old as the average go: the 30 MiB one, exactly the target, so the 40 MiB one stays.
  ASSERT_NE(f.allocator.malloc(70 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current,
            static_cast<int64_t>(170 * MiB));
  f.allocator.check_invariants();
}

TEST(CachingAllocatorBoundaries, ASegmentLandingExactlyOnTheCapFits) {
  {
    Fixture f(uint64_t{1} << 30);
    f.allocator.set_memory_limit(40 * MiB);
    ASSERT_NE(f.allocator.malloc(40 * MiB, 0), kNoBlock);  // reserved == cap is allowed
    EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current,
              static_cast<int64_t>(40 * MiB));
  }
  {
    Fixture f(uint64_t{1} << 30);
    f.allocator.set_memory_limit(40 * MiB - 512);
    EXPECT_EQ(f.allocator.malloc(40 * MiB, 0), kNoBlock);  // one block over: refused
    EXPECT_EQ(f.device.malloc_calls(), 0u);
  }
}

TEST(CachingAllocator, MemoryFractionCapsReservedMemory) {
  Fixture f(uint64_t{1} << 30);
  f.allocator.set_memory_fraction(0.1);  // (size_t)(0.1 * 1 GiB) = 107374182 bytes
  EXPECT_EQ(f.allocator.allowed_memory_maximum(), 107374182u);
  ASSERT_NE(f.allocator.malloc(50 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.malloc(60 * MiB, 0), kNoBlock);  // 50 + 60 MiB > 102.40 MiB
  EXPECT_NE(f.allocator.last_oom()->message().find("102.40 MiB allowed; "), std::string::npos);
  EXPECT_EQ(f.device.malloc_calls(), 1u);  // the cap refuses without calling cudaMalloc
}

// A fraction of 1.0 lifts the limit: no cap in the OOM message, and no garbage collection (which
// needs a fraction set). PyTorch 2.11 on an H100: no "allowed" after
// set_per_process_memory_fraction(1.0).
TEST(CachingAllocator, MemoryFractionOfOneIsNoLimit) {
  AllocConf conf;
  conf.garbage_collection_threshold = 0.5;
  Fixture f(uint64_t{1} << 30, conf);
  f.allocator.set_memory_fraction(0.1);
  f.allocator.set_memory_fraction(1.0);
  EXPECT_EQ(f.allocator.allowed_memory_maximum(), std::nullopt);
  const BlockId a = f.allocator.malloc(600 * MiB, 0);
  f.allocator.free(a);
  ASSERT_NE(f.allocator.malloc(300 * MiB, 0), kNoBlock);  // no collection: the 600 MiB is split
  EXPECT_EQ(f.allocator.stats().num_device_free, 0);
  EXPECT_EQ(f.allocator.malloc(2048 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.last_oom()->message().find("allowed"), std::string::npos);
}

TEST(CachingAllocator, GarbageCollectionFreesOldCachedBlocksBeforeCudaMalloc) {
  AllocConf conf;
  conf.garbage_collection_threshold = 0.5;
  Fixture f(1000 * MiB, conf);
  f.allocator.set_memory_fraction(0.1);  // 100 MiB allowed, GC above 50 MiB
  const BlockId a = f.allocator.malloc(30 * MiB, 0);
  const BlockId b = f.allocator.malloc(24 * MiB, 0);
  f.allocator.free(a);
  f.allocator.free(b);
  ASSERT_NE(f.allocator.malloc(40 * MiB, 0), kNoBlock);
  // Both cached blocks are as old as the average: both go, in pool order (smaller first).
  EXPECT_EQ(ops(f.allocator), (decltype(ops(f.allocator)){{"segment_alloc", 30 * MiB},
                                                          {"segment_alloc", 24 * MiB},
                                                          {"segment_free", 24 * MiB},
                                                          {"segment_free", 30 * MiB},
                                                          {"segment_alloc", 40 * MiB}}));
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 0);
  EXPECT_EQ(f.allocator.stats().num_sync_all_streams, 0);  // GC does not synchronise
}

TEST(CachingAllocator, GarbageCollectionIsInertWithoutAMemoryFraction) {
  AllocConf conf;
  conf.garbage_collection_threshold = 0.5;
  Fixture f(1000 * MiB, conf);
  f.allocator.free(f.allocator.malloc(30 * MiB, 0));
  ASSERT_NE(f.allocator.malloc(40 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().num_device_free, 0);
}

TEST(CachingAllocator, DeferredFreeKeepsTheBlockActiveUntilItsStreamsFinish) {
  Fixture f;
  const BlockId a = f.allocator.malloc(5 * MiB, 0);
  f.allocator.free(a, /*pending_stream_uses=*/true);
  EXPECT_TRUE(f.allocator.is_pending_free(a));
  EXPECT_EQ(f.allocator.stats().allocated_bytes[kAggregate].current, 0);
  EXPECT_EQ(f.allocator.stats().active_bytes()[kAggregate].current, static_cast<int64_t>(5 * MiB));
  const BlockId b = f.allocator.malloc(5 * MiB, 0);  // a is not reusable yet
  EXPECT_NE(f.allocator.block_address(b), f.allocator.block_address(a));
  f.allocator.check_invariants();
  f.allocator.complete_deferred_free(a);
  EXPECT_EQ(f.allocator.stats().active_bytes()[kAggregate].current, static_cast<int64_t>(5 * MiB));
  f.allocator.free(b);
  f.allocator.check_invariants();
  EXPECT_EQ(f.allocator.largest_free_block(), 20 * MiB);
}

// Active is allocated plus the deferred frees: its peak can be one only a deferred free reaches,
// and what a deferred free has left allocated it has not yet left active.
TEST(CachingAllocator, ActiveCountsDeferredFreesInEveryFigure) {
  Fixture f;
  const int64_t five = 5 * MiB, seven = 7 * MiB;
  const BlockId a = f.allocator.malloc(5 * MiB, 0);
  f.allocator.free(a, /*pending_stream_uses=*/true);
  const BlockId b = f.allocator.malloc(7 * MiB, 0);
  for (const StatType t : {kAggregate, kLargePool}) {
    const Stat active = f.allocator.stats().active_bytes()[t];
    EXPECT_EQ(active, (Stat{five + seven, five + seven, five + seven, 0}));
    EXPECT_EQ(f.allocator.stats().allocated_bytes[t], (Stat{seven, seven, five + seven, five}));
    EXPECT_EQ(f.allocator.stats().active()[t], (Stat{2, 2, 2, 0}));
  }
  f.allocator.complete_deferred_free(a);
  f.allocator.free(b);
  const BlockId c = f.allocator.malloc(3 * MiB, 0);
  for (const StatType t : {kAggregate, kLargePool}) {
    const int64_t three = 3 * MiB, all = five + seven + three;
    EXPECT_EQ(f.allocator.stats().active_bytes()[t],
              (Stat{three, five + seven, all, five + seven}));
    EXPECT_EQ(f.allocator.stats().active()[t], (Stat{1, 2, 3, 2}));
  }
  EXPECT_EQ(f.allocator.stats().active_bytes()[kSmallPool], Stat{});
  f.allocator.free(c);
  f.allocator.check_invariants();
}

TEST(CachingAllocator, EmptyCacheCompletesDeferredFreesFirst) {
  Fixture f;
  const BlockId a = f.allocator.malloc(5 * MiB, 0);
  f.allocator.free(a, true);
  f.allocator.empty_cache();
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current, 0);
  EXPECT_EQ(f.allocator.stats().active()[kAggregate].current, 0);
  f.allocator.check_invariants();
}

TEST(CachingAllocator, NoCachingCallsTheDeviceForEveryRequest) {
  SimulatedDevice device(uint64_t{1} << 30, 0);
  AllocatorOptions options;
  options.caching = false;
  CachingAllocator a(device, options);
  const BlockId b = a.malloc(1000, 0);
  ASSERT_NE(b, kNoBlock);
  EXPECT_EQ(a.block_size(b), 1000u);  // no rounding
  EXPECT_EQ(device.live_segments(), 1u);
  a.free(b);
  EXPECT_EQ(device.live_segments(), 0u);
  EXPECT_EQ(a.stats(), DeviceStats{});  // no statistics in this mode
}

TEST(CachingAllocator, MoreThanAnExabyteIsRefusedUpFront) {
  Fixture f;
  EXPECT_EQ(f.allocator.malloc(uint64_t{1} << 60, 0), kNoBlock);
  EXPECT_EQ(f.allocator.last_oom()->message(),
            "CUDA out of memory. Tried to allocate more than 1EB memory.");
  EXPECT_EQ(f.allocator.stats().num_ooms, 0);
}

TEST(CachingAllocator, InjectedDeviceFailureTakesTheRetryPath) {
  Fixture f;
  f.device.fail_malloc_call(1);
  ASSERT_NE(f.allocator.malloc(5 * MiB, 0), kNoBlock);  // fails once, succeeds on retry
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 1);
  EXPECT_EQ(f.device.malloc_calls(), 2u);
  f.allocator.check_invariants();
}

// The replay asks what a malloc or empty_cache() would do without doing it.
TEST(CachingAllocator, PreviewsChangeNothing) {
  Fixture f(uint64_t{1} << 30);
  f.allocator.set_memory_limit(100 * MiB);
  const BlockId a = f.allocator.malloc(30 * MiB, 0);
  const BlockId b = f.allocator.malloc(1000, 0);
  f.allocator.free(a);
  f.allocator.free(b);
  const DeviceStats before = f.allocator.stats();
  EXPECT_TRUE(
      ReplayProbe(f.allocator).has_free_block_for(20 * MiB, 0));  // the cached 30 MiB segment
  EXPECT_FALSE(ReplayProbe(f.allocator).has_free_block_for(20 * MiB, 7));  // not on another stream
  EXPECT_FALSE(ReplayProbe(f.allocator).has_free_block_for(40 * MiB, 0));
  using R = CachingAllocator::SegmentRelease;
  // 80 MiB: under the cap only once everything cached is given back, large pool first.
  EXPECT_EQ(ReplayProbe(f.allocator).slow_path_release_preview(80 * MiB, 0),
            (std::vector<R>{{30 * MiB, 0}, {2 * MiB, 0}}));
  EXPECT_EQ(ReplayProbe(f.allocator).slow_path_release_preview(40 * MiB, 0),
            std::vector<R>{});  // fits
  EXPECT_EQ(ReplayProbe(f.allocator).empty_cache_preview(),
            (std::vector<R>{{30 * MiB, 0}, {2 * MiB, 0}}));
  EXPECT_TRUE(ReplayProbe(f.allocator).holds_releasable_segment());
  EXPECT_EQ(f.allocator.stats(), before);
  EXPECT_EQ(f.allocator.device_ops().size(), 2u);
  f.allocator.check_invariants();
}

TEST(CachingAllocator, WithMaxSplitSizeTheSlowPathFirstFreesOneOversizeBlock) {
  AllocConf conf;
  conf.max_split_size = 40 * MiB;
  Fixture f(uint64_t{1} << 30, conf);
  f.allocator.set_memory_limit(170 * MiB);
  const BlockId big = f.allocator.malloc(100 * MiB, 0);
  const BlockId small = f.allocator.malloc(30 * MiB, 0);
  f.allocator.free(big);
  f.allocator.free(small);
  using R = CachingAllocator::SegmentRelease;
  // 130 MiB held and 60 MiB asked: the oversize block is too large to serve it and alone makes
  // room; the 30 MiB segment stays.
  EXPECT_FALSE(ReplayProbe(f.allocator).has_free_block_for(60 * MiB, 0));
  EXPECT_EQ(ReplayProbe(f.allocator).slow_path_release_preview(60 * MiB, 0),
            (std::vector<R>{{100 * MiB, 0}}));
  ASSERT_NE(f.allocator.malloc(60 * MiB, 0), kNoBlock);
  EXPECT_EQ(ops(f.allocator), (testing::OpList{{"segment_alloc", 100 * MiB},
                                               {"segment_alloc", 30 * MiB},
                                               {"segment_free", 100 * MiB},
                                               {"segment_alloc", 60 * MiB}}));
}

// While a graph is captured PyTorch's slow path skips the full release; the replay makes such a
// malloc where the capture's pool is unknown.
TEST(CachingAllocator, AMallocInAnUnknownCaptureKeepsTheCache) {
  Fixture f(uint64_t{1} << 30);
  f.allocator.set_memory_limit(50 * MiB);
  f.allocator.free(f.allocator.malloc(30 * MiB, 0));
  EXPECT_EQ(ReplayProbe(f.allocator).malloc_in_unknown_capture(40 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 0);
  EXPECT_EQ(f.allocator.stats().num_ooms, 1);
  EXPECT_TRUE(ReplayProbe(f.allocator).holds_releasable_segment());  // nothing released
  ASSERT_NE(f.allocator.malloc(40 * MiB, 0), kNoBlock);  // the ordinary malloc releases, retries
  EXPECT_EQ(f.allocator.stats().num_alloc_retries, 1);
  f.allocator.check_invariants();
}

}  // namespace
}  // namespace allocsim
