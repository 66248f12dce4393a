// The texts users know: format_size and memory_summary().
#include <gtest/gtest.h>

#include "core/format_size.hpp"
#include "core/memory_summary.hpp"

namespace allocsim {
namespace {

TEST(FormatSize, BoundariesAreInclusive) {
  EXPECT_EQ(format_size(0), "0 bytes");
  EXPECT_EQ(format_size(1024), "1024 bytes");
  EXPECT_EQ(format_size(1025), "1.00 KiB");
  EXPECT_EQ(format_size(1048576), "1024.00 KiB");
  EXPECT_EQ(format_size(1048577), "1.00 MiB");
  EXPECT_EQ(format_size(1073741824), "1024.00 MiB");
  EXPECT_EQ(format_size(1648361472), "1.54 GiB");
  EXPECT_EQ(format_size(150109880320), "139.80 GiB");
}

TEST(MemorySummary, EmptyStatsLayout) {
  const std::string s = memory_summary(DeviceStats{});
  EXPECT_EQ(s.substr(0, 78), "|" + std::string(75, '=') + "|\n");
  EXPECT_NE(
      s.find("|                  PyTorch CUDA memory summary, device ID 0                 |\n"),
      std::string::npos);
  EXPECT_NE(
      s.find("|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |\n"),
      std::string::npos);
  EXPECT_NE(
      s.find("| Allocated memory      |      0 B   |      0 B   |      0 B   |      0 B   |\n"),
      std::string::npos);
  EXPECT_NE(
      s.find("| Oversize GPU segments |       0    |       0    |       0    |       0    |\n"),
      std::string::npos);
  // 5 header lines, 9 metrics x 4 lines, 2 oversize metrics x 2 lines, the closing rule.
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 6 + 36 + 4 + 1);
}

TEST(MemorySummary, UnitFollowsTheAllRowOfEachColumn) {
  DeviceStats stats;
  stats.allocated_bytes.increase(/*small=*/true, 1000 * 1024);  // >= 768 KiB: shown in KiB
  stats.allocation.increase(/*small=*/false, 760000);
  const std::string s = memory_summary(stats);
  EXPECT_NE(s.find("| Allocated memory      |   1000 KiB |"), std::string::npos);
  EXPECT_NE(s.find("|       from large pool |      0 KiB |"), std::string::npos);
  EXPECT_NE(s.find("| Allocations           |     760 K  |"), std::string::npos);
}

}  // namespace
}  // namespace allocsim
