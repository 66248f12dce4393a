// PYTORCH_CUDA_ALLOC_CONF: accepted as PyTorch accepts it, refused as PyTorch refuses it.
#include <gtest/gtest.h>

#include <limits>

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
            "For roundups, the divisions has to be power of 2 ");
  EXPECT_EQ(error_of("roundup_power2_divisions:0"),
            "For roundups, the divisions has to be power of 2 ");
}

TEST(AllocConf, RoundupListForm) {
  const AllocConf c = parse_alloc_conf("roundup_power2_divisions:[64:8,256:4,1024:4,>:1]");
  const RoundupDivisions want = {8, 8, 8, 8, 8, 8, 8, 0, 4, 0, 4, 1, 1, 1, 1, 1};
  EXPECT_EQ(c.roundup_power2_divisions, want);
  EXPECT_EQ(error_of("roundup_power2_divisions:[3:8]"),
            "For roundups, the intervals have to be power of 2 ");
  EXPECT_EQ(error_of("roundup_power2_divisions:[64:3]"),
            "For roundups, the divisions has to be power of 2 or 0 to disable roundup ");
  // ">" first fills every interval but the first; the first interval given then fills below it.
  const RoundupDivisions gt_first = {2, 2, 2, 2, 2, 2, 2, 2, 2, 8, 8, 8, 8, 8, 8, 8};
  EXPECT_EQ(parse_alloc_conf("roundup_power2_divisions:[>:8,256:2]").roundup_power2_divisions,
            gt_first);
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

TEST(AllocConf, LargeSegmentSizeBoundsTheOtherSizes) {
  const AllocConf c = parse_alloc_conf("large_segment_size_mb:40");
  EXPECT_EQ(c.large_segment_size, 40 * MiB);
  EXPECT_EQ(c.max_non_split_rounding, 40 * MiB);  // its default follows
  EXPECT_EQ(c.to_string(), "large_segment_size_mb:40");
  EXPECT_EQ(error_of("large_segment_size_mb:10"),
            "CachingAllocator option large_segment_size_mb must be > 10 MB");
  // Read before the others wherever it stands in the string.
  EXPECT_EQ(error_of("max_split_size_mb:30,large_segment_size_mb:40"),
            "CachingAllocator option max_split_size_mb too small, must be >= 40");
  EXPECT_EQ(error_of("large_segment_size_mb:40,max_non_split_rounding_mb:20"),
            "CachingAllocator option max_non_split_rounding_mb too small, must be >= 40");
  EXPECT_EQ(
      parse_alloc_conf("large_segment_size_mb:40,large_segment_size_mb:60").large_segment_size,
      60 * MiB);
}

TEST(AllocConf, FractionLimitsAreInclusive) {
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
  EXPECT_EQ(error_of("foo:1"), "Unrecognized key 'foo' in CUDA allocator config.");
  // Unknown keys are refused before any value is read.
  EXPECT_EQ(error_of("max_split_size_mb:19,foo:1"),
            "Unrecognized key 'foo' in CUDA allocator config.");
  EXPECT_EQ(error_of(",max_split_size_mb:128"), "Unrecognized key ',' in CUDA allocator config.");
  EXPECT_EQ(error_of("expandable_segments:true"),
            "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'");
  EXPECT_EQ(error_of("expandable_segments::True"),
            "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got ':'");
  EXPECT_EQ(error_of("garbage_collection_threshold:1.0"),
            "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
  EXPECT_EQ(error_of("backend:cuda"),
            "Unknown allocator backend, options are native and cudaMallocAsync");
  EXPECT_EQ(error_of("pinned_num_register_threads:3"),
            "Number of register threads has to be power of 2, got 3");
}

TEST(AllocConf, AssertionsAbortOrRaiseAsInPyTorch) {
  auto kind_of = [](const std::string& text) {
    try {
      (void)parse_alloc_conf(text);
    } catch (const AllocConfError& e) {
      return e.kind();
    }
    return AllocConfError::Kind::kAllocsim;
  };
  // A key without its value: the CUDA pass reads past the end, and PyTorch aborts.
  EXPECT_EQ(kind_of("max_split_size_mb"), AllocConfError::Kind::kAbort);
  EXPECT_EQ(kind_of("expandable_segments:True:False"), AllocConfError::Kind::kAbort);
  EXPECT_EQ(kind_of("roundup_power2_divisions:[256:1"), AllocConfError::Kind::kAbort);
  // Inside a list the second pass does, and PyTorch raises.
  EXPECT_EQ(kind_of("roundup_power2_divisions:[256:1,512]"), AllocConfError::Kind::kRuntimeError);
  EXPECT_EQ(error_of("max_split_size_mb"),
            "PyTorch aborts the process on it (an internal assertion: Index out of bounds in "
            "ConfigTokenizer)");
}

TEST(AllocConf, NumbersParseAsStoullDoes) {
  // A numeric prefix is enough: "128MB" is 128, "12abc" 12; "-1" wraps to the clamp.
  EXPECT_EQ(parse_alloc_conf("max_split_size_mb:128MB").max_split_size, 128 * MiB);
  EXPECT_EQ(error_of("max_split_size_mb:12abc"),
            "CachingAllocator option max_split_size_mb too small, must be >= 20");
  EXPECT_EQ(parse_alloc_conf("max_split_size_mb:-1").max_split_size,
            std::numeric_limits<uint64_t>::max() / MiB * MiB);
  EXPECT_EQ(error_of("max_split_size_mb:abc"), "stoull (ValueError: not a number)");
  EXPECT_EQ(error_of("max_split_size_mb:99999999999999999999"),
            "stoull (IndexError: a number out of range)");
  EXPECT_EQ(parse_alloc_conf("garbage_collection_threshold:0.5x").garbage_collection_threshold,
            0.5);
}

TEST(AllocConf, CanonicalStringRoundTrips) {
  for (const char* text : {"max_split_size_mb:128", "expandable_segments:True",
                           "roundup_power2_divisions:[64:8,256:4,1024:4,>:1]",
                           "garbage_collection_threshold:0.8,max_split_size_mb:512",
                           "roundup_power2_divisions:8,max_non_split_rounding_mb:40",
                           "large_segment_size_mb:64,max_split_size_mb:128"}) {
    const AllocConf c = parse_alloc_conf(text);
    const AllocConf again = parse_alloc_conf(c.to_string());
    EXPECT_TRUE(c.same_policy(again)) << text << " -> " << c.to_string();
  }
}

TEST(AllocConf, AStringSetAtRunTimeResetsOnlyWhatPyTorchResets) {
  const AllocConf start = parse_alloc_conf(
      "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,"
      "roundup_power2_divisions:4,release_lock_on_cudamalloc:True");
  // max_split_size_mb, roundup_power2_divisions and garbage_collection_threshold start from their
  // defaults at every parse; the other keys keep what was set.
  const AllocConf after = change_alloc_conf(start, "max_split_size_mb:256");
  EXPECT_EQ(after.max_split_size, 256 * MiB);
  EXPECT_EQ(after.garbage_collection_threshold, 0.0);
  EXPECT_EQ(after.roundup_power2_divisions, RoundupDivisions{});
  EXPECT_TRUE(after.expandable_segments);
  EXPECT_TRUE(after.release_lock_on_cudamalloc);
  EXPECT_EQ(after.source, "max_split_size_mb:256");
  const AllocConf off = change_alloc_conf(after, "expandable_segments:False");
  EXPECT_FALSE(off.expandable_segments);
  EXPECT_EQ(off.max_split_size, kNoMaxSplitSize);
  // Over the defaults it is parse_alloc_conf.
  EXPECT_EQ(change_alloc_conf(AllocConf{}, "max_split_size_mb:64"),
            parse_alloc_conf("max_split_size_mb:64"));
  // One PyTorch refuses throws, as parse_alloc_conf does.
  EXPECT_THROW((void)change_alloc_conf(start, "max_split_size_mb:10"), AllocConfError);
}

}  // namespace
}  // namespace allocsim
