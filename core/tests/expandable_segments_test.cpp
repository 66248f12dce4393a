// expandable_segments:True: pages mapped on demand, unmapped by empty_cache
// (docs/pytorch-caching-allocator.md §4).
#include <gtest/gtest.h>

#include "backends/simulated_device.hpp"
#include "backends/testing/device_op_list.hpp"
#include "core/caching_allocator.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

testing::OpList ops(const CachingAllocator& a) {
  return testing::op_list(a.device_ops());
}

AllocatorOptions expandable() {
  AllocatorOptions o;
  o.conf.expandable_segments = true;
  return o;
}

TEST(ExpandableSegments, MapsWholePagesAndGrowsTheSameSegment) {
  SimulatedDevice device(uint64_t{1} << 30, 0);
  CachingAllocator a(device, expandable());
  const BlockId x = a.malloc(5 * MiB, 0);   // maps one 20 MiB page
  const BlockId y = a.malloc(30 * MiB, 0);  // 15 MiB free + one more page: 35 MiB, split
  EXPECT_EQ(a.block_address(y), a.block_address(x) + 5 * MiB);
  const BlockId z = a.malloc(100, 0);  // small pool: its own segment of 2 MiB pages
  EXPECT_EQ(ops(a),
            (decltype(ops(a)){
                {"segment_map", 20 * MiB}, {"segment_map", 20 * MiB}, {"segment_map", 2 * MiB}}));
  const DeviceStats& s = a.stats();
  EXPECT_EQ(s.reserved_bytes[kAggregate].current, static_cast<int64_t>(42 * MiB));
  EXPECT_EQ(s.segment[kAggregate].current, 0);  // mapping does not count segments
  EXPECT_EQ(s.num_device_alloc, 3);
  EXPECT_EQ(s.inactive_split[kAggregate].current, 0);  // not tracked for expandable blocks
  EXPECT_EQ(device.live_reservations(), 2u);
  a.check_invariants();
  a.free(x);
  a.free(y);
  a.free(z);
  a.check_invariants();
  a.empty_cache();
  EXPECT_EQ(ops(a).back(), (std::pair<std::string, uint64_t>{"segment_unmap", 2 * MiB}));
  EXPECT_EQ(a.stats().reserved_bytes[kAggregate].current, 0);
  EXPECT_EQ(a.stats().num_device_free, 2);
  EXPECT_EQ(device.live_reservations(), 0u);  // fully unmapped segments give back their range
  EXPECT_EQ(device.used_bytes(), 0u);
  a.check_invariants();
}

TEST(ExpandableSegments, EmptyCacheUnmapsOnlyWholeFreePages) {
  SimulatedDevice device(uint64_t{1} << 30, 0);
  CachingAllocator a(device, expandable());
  const BlockId x = a.malloc(30 * MiB, 0);    // pages 0-1 (40 MiB)
  const BlockId keep = a.malloc(5 * MiB, 0);  // at 30 MiB, inside page 1
  a.free(x);
  a.empty_cache();  // page 0 is wholly free: unmapped; page 1 holds `keep`
  EXPECT_EQ(ops(a).back(), (std::pair<std::string, uint64_t>{"segment_unmap", 20 * MiB}));
  EXPECT_EQ(a.stats().reserved_bytes[kAggregate].current, static_cast<int64_t>(20 * MiB));
  a.check_invariants();
  // The hole at the front is remapped (and joined to the free sliver after it) before the
  // tail grows.
  const BlockId again = a.malloc(25 * MiB, 0);
  EXPECT_EQ(a.block_address(again), a.block_address(keep) - 30 * MiB);
  EXPECT_EQ(ops(a).back(), (std::pair<std::string, uint64_t>{"segment_map", 20 * MiB}));
  a.check_invariants();
}

TEST(ExpandableSegments, OomRetryUnmapsFreePages) {
  SimulatedDevice device(100 * MiB, 0);
  AllocatorOptions o = expandable();
  CachingAllocator a(device, o);
  const BlockId s = a.malloc(100, 1);  // 2 MiB on stream 1
  a.free(s);
  const BlockId x = a.malloc(60 * MiB, 0);  // 60 MiB mapped
  a.free(x);
  // 90 MiB on stream 2: a new segment; 60 + 2 MiB are mapped elsewhere, so mapping fails
  // until the retry unmaps them.
  ASSERT_NE(a.malloc(90 * MiB, 2), kNoBlock);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(ops(a), (decltype(ops(a)){{"segment_map", 2 * MiB},
                                      {"segment_map", 60 * MiB},
                                      {"segment_unmap", 60 * MiB},
                                      {"segment_unmap", 2 * MiB},
                                      {"segment_map", 100 * MiB}}));
  a.check_invariants();
}

}  // namespace
}  // namespace allocsim
