// CudaDevice and BlockPattern on a real GPU. Every test skips (and passes) where there is none.
#include <gtest/gtest.h>

#include "backends/block_pattern.hpp"
#include "backends/cuda_device.hpp"
#include "backends/fault_injecting_device.hpp"
#include "core/caching_allocator.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda_device_count(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
    device_.emplace(0);
  }
  std::optional<CudaDevice> device_;
};

TEST_F(CudaDeviceTest, MallocTakesFreeMemoryAndFreeGivesItBack) {
  CudaDevice& d = *device_;
  const uint64_t before = d.mem_get_info().free;
  const auto a = d.malloc(20 * MiB);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a % 512, 0u);
  EXPECT_LE(d.mem_get_info().free, before - 20 * MiB);
  d.free(*a, 20 * MiB);
  EXPECT_EQ(d.mem_get_info().free, before);
  EXPECT_EQ(d.live_segments(), 0u);
}

TEST_F(CudaDeviceTest, TooLargeAMallocIsAnOomAndLeavesNoError) {
  CudaDevice& d = *device_;
  EXPECT_FALSE(d.malloc(d.info().total * 2).has_value());
  const auto a = d.malloc(2 * MiB);  // the failure was not sticky
  ASSERT_TRUE(a.has_value());
  d.free(*a, 2 * MiB);
}

TEST_F(CudaDeviceTest, ExpandableSegmentPagesMapAndUnmap) {
  CudaDevice& d = *device_;
  BlockPattern pattern;  // its kernels load first: loading takes device memory
  const uint64_t before = d.mem_get_info().free;
  const auto base = d.reserve_address(64 * 2 * MiB, 2 * MiB);
  ASSERT_TRUE(base.has_value());
  ASSERT_TRUE(d.map(*base, 6 * MiB, 2 * MiB));
  EXPECT_EQ(d.live_pages(), 3u);
  EXPECT_EQ(d.mem_get_info().free, before - 6 * MiB);
  pattern.fill(*base, 6 * MiB, 7);
  pattern.check(*base, 6 * MiB, 7);
  EXPECT_EQ(pattern.collect().bad_words, 0u);
  d.unmap(*base + 2 * MiB, 4 * MiB, 2 * MiB);
  EXPECT_EQ(d.live_pages(), 1u);
  d.unmap(*base, 2 * MiB, 2 * MiB);
  d.release_address(*base, 64 * 2 * MiB);
  EXPECT_EQ(d.mem_get_info().free, before);
}

TEST_F(CudaDeviceTest, MappingMorePagesThanFitFailsWholeAndKeepsNone) {
  CudaDevice& d = *device_;
  const uint64_t page = 20 * MiB;
  const uint64_t pages = d.info().total / page + 8;
  const auto base = d.reserve_address(pages * page, page);
  ASSERT_TRUE(base.has_value());
  EXPECT_FALSE(d.map(*base, pages * page, page));
  EXPECT_EQ(d.live_pages(), 0u);
  d.release_address(*base, pages * page);
}

TEST_F(CudaDeviceTest, PatternCatchesOverlappingBlocks) {
  CudaDevice& d = *device_;
  const auto a = d.malloc(2 * MiB);
  ASSERT_TRUE(a.has_value());
  BlockPattern pattern;
  pattern.fill(*a, MiB, 1);
  pattern.fill(*a + MiB / 2, MiB, 2);  // a second "block" over the first one's second half
  pattern.check(*a + MiB / 2, MiB, 2);
  pattern.check(*a, MiB, 1);
  const PatternResult r = pattern.collect();
  EXPECT_EQ(r.bad_words, MiB / 2 / 4);  // the overwritten half of block 1, word for word
  EXPECT_EQ(r.first_bad_tag, 1u);
  EXPECT_EQ(r.fills, 2u);
  EXPECT_EQ(r.checks, 2u);
  d.free(*a, 2 * MiB);
}

TEST_F(CudaDeviceTest, CachingAllocatorRunsOnTheDevice) {
  CudaDevice& d = *device_;
  const uint64_t before = d.mem_get_info().free;
  {
    CachingAllocator allocator(d, AllocatorOptions{});
    const BlockId small = allocator.malloc(1000, 0);
    const BlockId large = allocator.malloc(30 * MiB, 0);
    ASSERT_NE(small, kNoBlock);
    ASSERT_NE(large, kNoBlock);
    EXPECT_EQ(allocator.device_ops().size(), 2u);  // a 2 MiB and a 30 MiB segment
    allocator.free(small);
    allocator.free(large);
    EXPECT_EQ(allocator.malloc(30 * MiB, 0), large);  // served from the cache
    allocator.free(large);
    allocator.empty_cache();
    allocator.check_invariants();
  }
  EXPECT_EQ(d.mem_get_info().free, before);
}

TEST_F(CudaDeviceTest, InjectedFailureOverTheRealDeviceTakesTheRetryPath) {
  FaultInjectingDevice faults(*device_);
  faults.fail_malloc_call(1);
  const uint64_t before = device_->mem_get_info().free;
  {
    CachingAllocator allocator(faults, AllocatorOptions{});
    const BlockId b = allocator.malloc(30 * MiB, 0);  // fails once, succeeds on the retry
    ASSERT_NE(b, kNoBlock);
    EXPECT_EQ(allocator.stats().num_alloc_retries, 1);
    EXPECT_EQ(faults.malloc_calls(), 2u);
    allocator.free(b);
    allocator.empty_cache();
  }
  EXPECT_EQ(device_->mem_get_info().free, before);
}

}  // namespace
}  // namespace allocsim
