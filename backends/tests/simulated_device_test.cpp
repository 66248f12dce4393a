// SimulatedDevice: capacity model, recorded addresses, injected failures.
#include <gtest/gtest.h>

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
  EXPECT_EQ(d.malloc(4 * MiB), a);  // freed address space is reused, lowest hole first
  SimulatedDevice again(uint64_t{1} << 30, 0);
  EXPECT_EQ(again.malloc(20 * MiB), a);  // deterministic
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
