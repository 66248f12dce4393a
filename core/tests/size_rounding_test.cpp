// Rounding and segment sizes, with the numbers of docs/pytorch-caching-allocator.md §1.
#include <gtest/gtest.h>

#include "core/size_rounding.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

TEST(RoundSize, DefaultRoundsTo512) {
  const RoundupDivisions none{};
  EXPECT_EQ(round_size(1, none), 512u);
  EXPECT_EQ(round_size(511, none), 512u);
  EXPECT_EQ(round_size(512, none), 512u);
  EXPECT_EQ(round_size(513, none), 1024u);
  EXPECT_EQ(round_size(1200, none), 1536u);
  EXPECT_EQ(round_size(5 * MiB + 1, none), 5 * MiB + 512);
}

TEST(RoundSize, PowerOfTwoDivisions) {
  RoundupDivisions four;
  four.fill(4);
  EXPECT_EQ(roundup_power2_next_division(1200, 4), 1280u);  // the document's example
  EXPECT_EQ(roundup_power2_next_division(1024, 4), 1024u);  // powers of two stay
  EXPECT_EQ(round_size(2049, four), 2560u);                 // > 512*4: next quarter of [2048, 4096)
  EXPECT_EQ(round_size(1500, four), 1536u);                 // <= 512*4: plain 512 rounding
  EXPECT_EQ(round_size(5 * MiB + 1, four), 6 * MiB);        // quarters of [4, 8) MiB
  EXPECT_EQ(round_size(600 * MiB, four), 640 * MiB);        // quarters of [512, 1024) MiB
}

TEST(RoundSize, IntervalIndexIsClamped) {
  EXPECT_EQ(roundup_interval_index(1000), 0u);
  EXPECT_EQ(roundup_interval_index(MiB), 0u);
  EXPECT_EQ(roundup_interval_index(2 * MiB), 1u);
  EXPECT_EQ(roundup_interval_index(64 * MiB), 6u);
  EXPECT_EQ(roundup_interval_index(uint64_t{32} << 30), 15u);
  EXPECT_EQ(roundup_interval_index(uint64_t{1} << 40), 15u);
}

TEST(RoundSize, ListFormUsesThePerIntervalValue) {
  RoundupDivisions table{};
  table[6] = 8;  // [64, 128) MiB in eighths
  EXPECT_EQ(round_size(65 * MiB, table), 72 * MiB);
  EXPECT_EQ(round_size(3 * MiB + 1, table), 3 * MiB + 512);  // 0 in this interval: no rounding
}

// The allocator's shortcut when no interval has divisions: the same sizes as round_size's.
TEST(RoundSize, WithoutDivisionsIsWholeMinBlocks) {
  RoundupDivisions ones;
  ones.fill(1);
  const RoundupDivisions none{};
  EXPECT_FALSE(rounds_to_divisions(none));
  EXPECT_FALSE(rounds_to_divisions(ones));
  RoundupDivisions one_interval{};
  one_interval[15] = 2;
  EXPECT_TRUE(rounds_to_divisions(one_interval));
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{511}, uint64_t{512}, uint64_t{513},
                     5 * MiB + 1, uint64_t{1} << 40, (uint64_t{1} << 60) - 1}) {
    EXPECT_EQ(round_to_min_blocks(n), round_size(n, none)) << n;
    EXPECT_EQ(round_to_min_blocks(n), round_size(n, ones)) << n;
  }
  for (uint64_t n = 0; n < 100'000; n += 37) EXPECT_EQ(round_to_min_blocks(n), round_size(n, none));
}

TEST(AllocationSize, SegmentSizes) {
  const uint64_t large = kLargeBuffer;  // large_segment_size_mb's default
  EXPECT_EQ(allocation_size(512, large), 2 * MiB);
  EXPECT_EQ(allocation_size(MiB, large), 2 * MiB);         // <= 1 MiB: small pool, 2 MiB
  EXPECT_EQ(allocation_size(MiB + 512, large), 20 * MiB);  // 1-10 MiB: a 20 MiB segment
  EXPECT_EQ(allocation_size(10 * MiB - 512, large), 20 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB, large), 10 * MiB);  // >= 10 MiB: rounded to 2 MiB
  EXPECT_EQ(allocation_size(10 * MiB + 512, large), 12 * MiB);
  // large_segment_size_mb:40 changes the 1-10 MiB segment only.
  EXPECT_EQ(allocation_size(MiB + 512, 40 * MiB), 40 * MiB);
  EXPECT_EQ(allocation_size(10 * MiB + 512, 40 * MiB), 12 * MiB);
  EXPECT_EQ(allocation_size(MiB, 40 * MiB), 2 * MiB);
  EXPECT_TRUE(is_small_size(MiB));
  EXPECT_FALSE(is_small_size(MiB + 512));
}

}  // namespace
}  // namespace allocsim
