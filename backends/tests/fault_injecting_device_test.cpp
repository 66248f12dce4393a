// FaultInjectingDevice over a simulated device: the chosen calls fail without reaching it, the
// others pass through, and the allocator above takes its retry path.
#include <gtest/gtest.h>

#include "backends/fault_injecting_device.hpp"
#include "backends/simulated_device.hpp"
#include "core/caching_allocator.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

TEST(FaultInjectingDevice, FailsTheChosenCallsAndPassesTheOthers) {
  SimulatedDevice simulated(uint64_t{1} << 30, 0);
  FaultInjectingDevice d(simulated);
  d.fail_malloc_call(2);
  d.fail_map_call(1);
  EXPECT_TRUE(d.malloc(2 * MiB).has_value());
  EXPECT_FALSE(d.malloc(2 * MiB).has_value());
  EXPECT_EQ(simulated.live_segments(), 1u);  // the failed call never reached the device
  EXPECT_TRUE(d.malloc(2 * MiB).has_value());
  EXPECT_FALSE(d.map(0, 2 * MiB, 2 * MiB));
  EXPECT_EQ(simulated.used_bytes(), 4 * MiB);
  EXPECT_TRUE(d.map(0, 2 * MiB, 2 * MiB));
  EXPECT_EQ(simulated.used_bytes(), 6 * MiB);
  EXPECT_EQ(d.malloc_calls(), 3u);
  EXPECT_EQ(d.map_calls(), 2u);
  EXPECT_EQ(d.injected_failures(), 2u);
  EXPECT_EQ(d.mem_get_info().free, simulated.mem_get_info().free);
}

TEST(FaultInjectingDevice, AFailedCudaMallocMakesTheAllocatorRetry) {
  SimulatedDevice simulated(uint64_t{1} << 30, 0);
  FaultInjectingDevice d(simulated);
  d.fail_malloc_call(1);
  CachingAllocator allocator(d, AllocatorOptions{});
  const BlockId b = allocator.malloc(30 * MiB, 0);
  ASSERT_NE(b, kNoBlock);
  EXPECT_EQ(allocator.stats().num_alloc_retries, 1);
  EXPECT_EQ(d.malloc_calls(), 2u);
  EXPECT_EQ(simulated.live_segments(), 1u);
  allocator.check_invariants();
}

}  // namespace
}  // namespace allocsim
