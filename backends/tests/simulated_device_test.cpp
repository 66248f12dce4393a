// SimulatedDevice: capacity model, recorded addresses, injected failures.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backends/simulated_device.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

TEST(SimulatedDevice, FreeMemoryIsCapacityLessContextLessHeld) {
  SimulatedDevice d(100 * MiB, 10 * MiB);
  EXPECT_EQ(d.mem_get_info().free, 90 * MiB);
  const auto a = d.malloc(2 * MiB + 1);  // charged in the driver's 2 MiB granularity: 4 MiB
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(d.mem_get_info().free, 86 * MiB);
  EXPECT_FALSE(d.malloc(87 * MiB).has_value());
  d.free(*a, 2 * MiB + 1);
  EXPECT_EQ(d.mem_get_info().free, 90 * MiB);
  EXPECT_TRUE(d.map(0, 90 * MiB, 2 * MiB));
  EXPECT_FALSE(d.map(0, 2 * MiB, 2 * MiB));
  d.unmap(0, 90 * MiB, 2 * MiB);
  EXPECT_EQ(d.mem_get_info().total, 100 * MiB);
}

TEST(SimulatedDevice, HandsOutRecordedAddressesWhileTheyMatch) {
  SimulatedDevice d(uint64_t{1} << 30, 0);
  d.use_recorded_segments({{0x7f0000000000, 20 * MiB}, {0x7f0002000000, 2 * MiB}});
  EXPECT_EQ(d.malloc(20 * MiB), 0x7f0000000000u);
  const auto other = d.malloc(4 * MiB);  // not what was recorded next: placed by the model
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(*other, 0x7f0002000000u);
  EXPECT_EQ(d.malloc(2 * MiB), 0x7f0002000000u);
  EXPECT_EQ(d.recorded_hits(), 2u);
  EXPECT_EQ(d.recorded_misses(), 1u);
  // Past the recorded addresses every segment and reservation is the model's.
  ASSERT_TRUE(d.malloc(2 * MiB).has_value());
  ASSERT_TRUE(d.reserve_address(uint64_t{1} << 34, 20 * MiB).has_value());
  EXPECT_EQ(d.recorded_misses(), 1u);
  EXPECT_EQ(d.placed_by_model(), 3u);
}

TEST(SimulatedDevice, ModelPlacesLikeTheDriver) {
  // Regions of whole 32 MiB chunks, each below the last; holes in them are filled lowest first.
  SimulatedDevice d(uint64_t{1} << 30, 0);
  const uint64_t a = *d.malloc(20 * MiB);
  const uint64_t top = a + 32 * MiB;
  EXPECT_EQ(a % (32 * MiB), 0u);
  EXPECT_EQ(d.malloc(2 * MiB), top - 12 * MiB);         // the hole above the 20 MiB segment
  EXPECT_EQ(d.malloc(30 * MiB + 512), top - 64 * MiB);  // too big for the hole: a new region
  EXPECT_EQ(d.malloc(2 * MiB), top - 10 * MiB);
  d.free(a, 20 * MiB);
  // The range a freed segment left is reused from its top; what is left of it, next.
  EXPECT_EQ(d.malloc(4 * MiB), a + 16 * MiB);
  EXPECT_EQ(d.malloc(16 * MiB), a);
  EXPECT_EQ(d.malloc(2 * MiB), top - 8 * MiB);  // none left: the region's hole, as before
  SimulatedDevice again(uint64_t{1} << 30, 0);
  EXPECT_EQ(again.malloc(20 * MiB), a);  // deterministic
}

TEST(SimulatedDevice, ModelPutsANewSegmentAtTheTopOfTheHighestFreedRangeItFits) {
  SimulatedDevice d(uint64_t{1} << 30, 0);
  d.use_recorded_segments(
      {{0x7f0000000000, 64 * MiB}, {0x7f0004000000, 20 * MiB}, {0x7f0006000000, 64 * MiB}});
  for (const uint64_t size : {64 * MiB, 20 * MiB, 64 * MiB}) ASSERT_TRUE(d.malloc(size));
  d.free(0x7f0000000000, 64 * MiB);
  d.free(0x7f0006000000, 64 * MiB);
  d.free(0x7f0004000000, 20 * MiB);  // merges with the range below it: 84 MiB
  EXPECT_EQ(d.malloc(40 * MiB), 0x7f0006000000u + 24 * MiB);
  EXPECT_EQ(d.malloc(40 * MiB), 0x7f0004000000u + 20 * MiB - 40 * MiB);  // 24 MiB left above
  EXPECT_EQ(d.malloc(44 * MiB), 0x7f0000000000u);  // the rest of the merged range, exactly
  EXPECT_EQ(d.placed_by_model(), 3u);
}

// Against a page map: segments at recorded addresses in a window of 2 MiB pages, frees, and
// requests the model places. A request that fits in a run of pages once held and now free goes to
// the top of the highest such run.
TEST(SimulatedDevice, FreedRangesAgreeWithAPageMap) {
  constexpr uint64_t kPage = 2 * MiB;
  constexpr int kPages = 48;
  constexpr uint64_t kBase = 0x7f0000000000;
  std::mt19937 rng(7);
  // The plan first: which recorded segments come in which order, and where model requests go.
  struct Op {
    enum Kind { kRecorded, kModel, kFree } kind;
    int first_page, pages;
  };
  std::vector<Op> ops;
  std::vector<RecordedSegment> recorded;
  std::vector<int> owner(kPages, -1);  // the op whose segment holds each page, in the plan
  std::vector<bool> held(kPages, false);
  std::vector<int> live;  // indexes of ops whose segments are live
  for (int step = 0; step < 3000; ++step) {
    const int pages = 1 + static_cast<int>(rng() % 6);
    const unsigned what = rng() % 10;
    if (what < 4) {  // a segment at a recorded address where the pages are free
      const int first = static_cast<int>(rng() % (kPages - pages + 1));
      bool empty = true;
      for (int p = first; p < first + pages; ++p) empty = empty && owner[p] < 0;
      if (!empty) continue;
      ops.push_back({Op::kRecorded, first, pages});
      recorded.push_back({kBase + static_cast<uint64_t>(first) * kPage, pages * kPage});
    } else if (what < 7 && !live.empty()) {
      const size_t k = rng() % live.size();
      const Op& op = ops[static_cast<size_t>(live[k])];
      for (int p = op.first_page; p < op.first_page + op.pages; ++p) owner[p] = -1;
      ops.push_back({Op::kFree, op.first_page, op.pages});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    } else {  // placed by the model: where, is the page map's to say
      int best = -1;
      for (int end = kPages, p = kPages - 1; p >= -1; --p) {
        if (p >= 0 && held[p] && owner[p] < 0) continue;
        if (end - (p + 1) >= pages && best < 0) best = end - pages;
        end = p;
      }
      if (best < 0) continue;  // outside the window: the region model's
      ops.push_back({Op::kModel, best, pages});
    }
    for (int p = ops.back().first_page; p < ops.back().first_page + pages; ++p) {
      owner[p] = static_cast<int>(ops.size() - 1);
      held[p] = true;
    }
    live.push_back(static_cast<int>(ops.size() - 1));
  }
  SimulatedDevice d(uint64_t{1} << 40, 0);
  d.use_recorded_segments(recorded);
  int models = 0;
  for (const Op& op : ops) {
    const uint64_t address = kBase + static_cast<uint64_t>(op.first_page) * kPage;
    if (op.kind == Op::kFree) {
      d.free(address, op.pages * kPage);
      continue;
    }
    // A model request is 512 B short of its pages, so it never takes the next recorded address.
    const uint64_t size = op.kind == Op::kModel ? op.pages * kPage - 512 : op.pages * kPage;
    ASSERT_EQ(d.malloc(size), address) << "op " << (&op - ops.data());
    models += op.kind == Op::kModel;
  }
  EXPECT_GT(models, 100);
}

TEST(SimulatedDevice, ModelContinuesBelowRecordedAddresses) {
  SimulatedDevice d(uint64_t{1} << 30, 0);
  d.use_recorded_segments({{0x7f5e18000000, 160 * MiB}});
  EXPECT_EQ(d.malloc(160 * MiB), 0x7f5e18000000u);
  EXPECT_EQ(d.malloc(24 * MiB), 0x7f5e18000000u - 32 * MiB);
}

TEST(SimulatedDevice, ModelReservationsStayClearOfRecordedOnes) {
  SimulatedDevice d(uint64_t{1} << 30, 0);
  const uint64_t recorded = uint64_t{12918456320};
  d.use_recorded_reservations({recorded});
  EXPECT_EQ(d.reserve_address(uint64_t{1} << 34, 20 * MiB), recorded);
  const uint64_t next = *d.reserve_address(uint64_t{1} << 34, 20 * MiB);
  EXPECT_GE(next, recorded + (uint64_t{1} << 34));
  EXPECT_EQ(next % (20 * MiB), 0u);
}

}  // namespace
}  // namespace allocsim
