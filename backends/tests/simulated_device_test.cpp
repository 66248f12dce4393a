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
}

TEST(SimulatedDevice, ModelAddressesNeverOverlapAndAreDeterministic) {
  SimulatedDevice a(uint64_t{1} << 30, 0), b(uint64_t{1} << 30, 0);
  std::vector<uint64_t> xs, ys;
  for (uint64_t size : {20 * MiB, 2 * MiB, 30 * MiB + 512, 2 * MiB}) {
    xs.push_back(*a.malloc(size));
    ys.push_back(*b.malloc(size));
  }
  EXPECT_EQ(xs, ys);
  for (size_t i = 1; i < xs.size(); ++i) EXPECT_GE(xs[i], xs[i - 1] + 2 * MiB);
  for (uint64_t x : xs) EXPECT_EQ(x % (2 * MiB), 0u);
}

TEST(SimulatedDevice, InjectedFailures) {
  SimulatedDevice d(uint64_t{1} << 30, 0);
  d.fail_malloc_call(2);
  d.fail_map_call(1);
  EXPECT_TRUE(d.malloc(2 * MiB).has_value());
  EXPECT_FALSE(d.malloc(2 * MiB).has_value());
  EXPECT_TRUE(d.malloc(2 * MiB).has_value());
  EXPECT_FALSE(d.map(0, 2 * MiB, 2 * MiB));
  EXPECT_TRUE(d.map(0, 2 * MiB, 2 * MiB));
}

}  // namespace
}  // namespace allocsim
