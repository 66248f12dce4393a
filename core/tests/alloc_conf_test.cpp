// PYTORCH_CUDA_ALLOC_CONF: accepted as PyTorch accepts it, refused as PyTorch refuses it.
#include <gtest/gtest.h>

#include "core/alloc_conf.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

std::string error_of(const std::string& text) {
  try {
    (void)parse_alloc_conf(text);
  } catch (const AllocConfError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(AllocConf, EmptyMeansDefaults) {
  const AllocConf c = parse_alloc_conf("");
  EXPECT_EQ(c.max_split_size, kNoMaxSplitSize);
  EXPECT_EQ(c.max_non_split_rounding, 20 * MiB);
  EXPECT_EQ(c.garbage_collection_threshold, 0.0);
  EXPECT_FALSE(c.expandable_segments);
  EXPECT_EQ(c.to_string(), "");
}

TEST(AllocConf, Values) {
  const AllocConf c = parse_alloc_conf(
      "max_split_size_mb:128, expandable_segments:True,garbage_collection_threshold:0.6,"
      "max_non_split_rounding_mb:64");
  EXPECT_EQ(c.max_split_size, 128 * MiB);
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.6);
  EXPECT_EQ(c.max_non_split_rounding, 64 * MiB);
  EXPECT_EQ(parse_alloc_conf("max_split_size_mb:20").max_split_size, 20 * MiB);
  EXPECT_TRUE(parse_alloc_conf("backend:cudaMallocAsync").use_malloc_async);
  EXPECT_FALSE(parse_alloc_conf("backend:native").use_malloc_async);
}

TEST(AllocConf, RoundupLegacyForm) {
  const AllocConf c = parse_alloc_conf("roundup_power2_divisions:4");
  for (uint64_t d : c.roundup_power2_divisions) EXPECT_EQ(d, 4u);
  EXPECT_EQ(error_of("roundup_power2_divisions:3"),
            "For roundups, the divisons has to be power of 2 ");
}

TEST(AllocConf, RoundupListForm) {
  const AllocConf c = parse_alloc_conf("roundup_power2_divisions:[64:8,256:4,1024:4,>:1]");
  const RoundupDivisions want = {8, 8, 8, 8, 8, 8, 8, 0, 4, 0, 4, 1, 1, 1, 1, 1};
  EXPECT_EQ(c.roundup_power2_divisions, want);
  EXPECT_EQ(error_of("roundup_power2_divisions:[3:8]"),
            "For roundups, the intervals have to be power of 2 ");
  EXPECT_EQ(error_of("roundup_power2_divisions:[64:3]"),
            "For roundups, the divisons has to be power of 2 or 0 to disable roundup ");
}

TEST(AllocConf, RoundupIntervalsFromTheLastOnShareTheLastEntry) {
  // 65536 MB and up are the table's last interval (PyTorch clamps the index), not past it.
  const AllocConf c = parse_alloc_conf("roundup_power2_divisions:[65536:2]");
  RoundupDivisions all_two;
  all_two.fill(2);
  EXPECT_EQ(c.roundup_power2_divisions, all_two);
  EXPECT_FALSE(c.expandable_segments);  // nothing written past the table
  const AllocConf d = parse_alloc_conf("roundup_power2_divisions:[64:8,131072:2]");
  const RoundupDivisions want = {8, 8, 8, 8, 8, 8, 8, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  EXPECT_EQ(d.roundup_power2_divisions, want);
  EXPECT_FALSE(d.expandable_segments);
}

TEST(AllocConf, IntegerAndFractionLimitsAreInclusive) {
  // An int's range, as std::stoi takes it: its ends parse, one past them is out of range.
  EXPECT_EQ(error_of("pinned_reserve_segment_size_mb:-2147483648"),
            "Pinned reserve segment size has to be greater than 0");
  EXPECT_EQ(error_of("pinned_reserve_segment_size_mb:-2147483649"),
            "number '-2147483649' out of range for pinned_reserve_segment_size_mb");
  EXPECT_EQ(error_of("pinned_reserve_segment_size_mb:2147483647"), "(accepted)");
  EXPECT_EQ(error_of("pinned_reserve_segment_size_mb:2147483648"),
            "number '2147483648' out of range for pinned_reserve_segment_size_mb");
  // A fraction of 0 and of 1 are allowed, outside them refused.
  EXPECT_EQ(parse_alloc_conf("per_process_memory_fraction:1.0").per_process_memory_fraction, 1.0);
  EXPECT_EQ(parse_alloc_conf("per_process_memory_fraction:0").per_process_memory_fraction, 0.0);
  EXPECT_EQ(error_of("per_process_memory_fraction:1.0001"),
            "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
  EXPECT_EQ(error_of("per_process_memory_fraction:-0.0001"),
            "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
}

TEST(AllocConf, RefusedWithPyTorchsWords) {
  EXPECT_EQ(error_of("max_split_size_mb:19"),
            "CachingAllocator option max_split_size_mb too small, must be >= 20");
  EXPECT_EQ(error_of("foo:1"), "Unrecognized CachingAllocator option: foo");
  EXPECT_EQ(error_of("max_split_size_mb"), "Error parsing CachingAllocator settings, expected :");
  EXPECT_EQ(error_of("max_split_size_mb:"), "Error, expecting max_split_size_mb value");
  EXPECT_EQ(error_of("expandable_segments:true"),
            "Expected a single True/False argument for expandable_segments");
  EXPECT_EQ(error_of("garbage_collection_threshold:1.0"),
            "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
  // A wrong separator: stoi takes the "128" prefix, then the ':' is not the ',' expected.
  EXPECT_EQ(error_of("max_split_size_mb:128;expandable_segments:True"),
            "Error parsing CachingAllocator settings, expected ,");
  EXPECT_EQ(error_of("max_split_size_mb:128 expandable_segments:True"),
            "Error parsing CachingAllocator settings, expected ,");
  EXPECT_EQ(error_of("expandable_segments:True:False"),
            "Error parsing CachingAllocator settings, expected ,");
  EXPECT_EQ(error_of("backend:cuda"),
            "Unknown allocator backend, options are native and cudaMallocAsync");
}

TEST(AllocConf, NumbersParseAsStoiDoes) {
  // std::stoi reads a numeric prefix: PyTorch accepts "128MB" as 128.
  EXPECT_EQ(parse_alloc_conf("max_split_size_mb:128MB").max_split_size, 128 * MiB);
  EXPECT_EQ(error_of("max_split_size_mb:abc"), "invalid number 'abc' for max_split_size_mb");
}

TEST(AllocConf, CanonicalStringRoundTrips) {
  for (const char* text : {"max_split_size_mb:128", "expandable_segments:True",
                           "roundup_power2_divisions:[64:8,256:4,1024:4,>:1]",
                           "garbage_collection_threshold:0.8,max_split_size_mb:512",
                           "roundup_power2_divisions:8,max_non_split_rounding_mb:40"}) {
    const AllocConf c = parse_alloc_conf(text);
    const AllocConf again = parse_alloc_conf(c.to_string());
    EXPECT_TRUE(c.same_policy(again)) << text << " -> " << c.to_string();
  }
}

}  // namespace
}  // namespace allocsim
