// expandable_segments:True: pages mapped on demand, unmapped by empty_cache
// (docs/pytorch-caching-allocator.md §4).
#include <gtest/gtest.h>

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

// A history that starts mid-run: the ranges mapped at its start, with their blocks, restored at
// the reservation's base, make an allocator that goes on as the one that ran from the beginning.
TEST(ExpandableSegments, RestoredRangesGoOnAsTheRunThatMappedThem) {
  SimulatedDevice ran_device(uint64_t{1} << 30, 0);
  CachingAllocator ran(ran_device, expandable());
  const BlockId a = ran.malloc(30 * MiB, 0);  // large pages 0-1
  const BlockId b = ran.malloc(15 * MiB, 0);  // page 2
  const BlockId c = ran.malloc(25 * MiB, 0);  // pages 2-3
  const BlockId s = ran.malloc(100, 0);       // the small pool's segment
  ran.free(a);
  ran.empty_cache();  // page 0 unmapped: a hole at the front, pages 1-3 mapped
  ran.free(c);
  ASSERT_EQ(ran.stats().reserved_bytes[kAggregate].current, static_cast<int64_t>(62 * MiB));

  // Each mapped range and its allocated blocks, as a snapshot lists them.
  struct Range {
    uint64_t base = 0, address = 0, size = 0;
    bool small = false;
    std::vector<RestoredBlock> blocks;
  };
  std::vector<Range> ranges;
  uint64_t base = 0, end = 0;  // of the reservation being walked, and of its last block
  bool small = false;
  ran.for_each_block([&](const BlockInfo& info) {
    if (!info.expandable) return;
    // A segment's blocks, unmapped ones too, tile its reservation; the next may follow at once.
    if (info.ptr != end || info.small != small) base = info.ptr;
    end = info.ptr + info.size;
    small = info.small;
    if (!info.mapped) return;
    if (info.segment_start) ranges.push_back({base, info.ptr, 0, info.small, {}});
    ranges.back().size += info.size;
    if (info.allocated) ranges.back().blocks.push_back({info.ptr, info.size, info.requested_size});
  });
  ASSERT_EQ(ranges.size(), 2u);  // large pages 1-3, the small page

  SimulatedDevice device(uint64_t{1} << 30, 0);
  device.use_recorded_reservations({ranges[0].base, ranges[1].base});
  CachingAllocator restored(device, expandable());
  std::vector<BlockId> ids;
  for (const Range& r : ranges) {
    const auto got = ReplayProbe(restored).restore_expandable_range(r.base, r.address, r.size, 0,
                                                                    r.small, r.blocks);
    ASSERT_TRUE(got) << r.address;
    ids.insert(ids.end(), got->begin(), got->end());
  }
  restored.check_invariants();
  EXPECT_TRUE(ops(restored).empty());  // nothing recorded: it happened before
  EXPECT_EQ(restored.stats().num_device_alloc, 0);
  for (auto stat : {&DeviceStats::reserved_bytes, &DeviceStats::allocated_bytes,
                    &DeviceStats::requested_bytes, &DeviceStats::allocation}) {
    EXPECT_EQ((restored.stats().*stat)[kAggregate].current,
              (ran.stats().*stat)[kAggregate].current);
  }
  ASSERT_EQ(ids.size(), 2u);  // b, and the small block

  // The same requests from here on: the same addresses, maps and unmaps.
  const size_t ran_ops = ran.device_ops().size();
  auto go_on = [](CachingAllocator& x, BlockId big, BlockId small_block) {
    std::vector<uint64_t> addresses;
    const BlockId d = x.malloc(12 * MiB, 0);  // into the free part of pages 2-3
    const BlockId e = x.malloc(18 * MiB, 0);  // the hole at the front is mapped again
    const BlockId f = x.malloc(50 * MiB, 0);  // the tail grows
    for (BlockId id : {d, e, f}) addresses.push_back(x.block_address(id));
    x.free(big);
    x.free(e);
    x.empty_cache();
    const BlockId g = x.malloc(100, 0);  // beside the restored small block
    addresses.push_back(x.block_address(g));
    x.free(small_block);
    x.check_invariants();
    return addresses;
  };
  EXPECT_EQ(go_on(restored, ids[0], ids[1]), go_on(ran, b, s));
  const auto tail = ops(ran);
  EXPECT_EQ(ops(restored), decltype(tail)(tail.begin() + static_cast<long>(ran_ops), tail.end()));
  EXPECT_EQ(restored.stats().reserved_bytes[kAggregate].current,
            ran.stats().reserved_bytes[kAggregate].current);
}

// A range that overlaps one already mapped, or is not whole pages, is refused.
TEST(ExpandableSegments, ARestoredRangeMustBeWholeUnmappedPages) {
  SimulatedDevice device(uint64_t{1} << 30, 0);
  const uint64_t base = uint64_t{0x7f00} << 28;
  device.use_recorded_reservations({base});
  CachingAllocator a(device, expandable());
  EXPECT_FALSE(ReplayProbe(a).restore_expandable_range(base, base, 10 * MiB, 0, false, {}));
  ASSERT_TRUE(ReplayProbe(a).restore_expandable_range(base, base + 20 * MiB, 40 * MiB, 0, false,
                                                      {{base + 30 * MiB, 5 * MiB, 5 * MiB}}));
  EXPECT_FALSE(
      ReplayProbe(a).restore_expandable_range(base, base + 40 * MiB, 40 * MiB, 0, false, {}));
  EXPECT_FALSE(ReplayProbe(a).restore_expandable_range(base, base, 20 * MiB, 0, false,
                                                       {{base + 10 * MiB, 20 * MiB, 20 * MiB}}));
  ASSERT_TRUE(ReplayProbe(a).restore_expandable_range(base, base, 20 * MiB, 0, false, {}));
  a.check_invariants();
  EXPECT_EQ(a.stats().reserved_bytes[kAggregate].current, static_cast<int64_t>(60 * MiB));
}

}  // namespace
}  // namespace allocsim
