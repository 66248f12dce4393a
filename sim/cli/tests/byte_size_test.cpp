#include <gtest/gtest.h>

#include "sim/cli/byte_size.hpp"

namespace allocsim {
namespace {

TEST(ByteSize, UnitsAndPlainBytes) {
  EXPECT_EQ(parse_byte_size("24GiB"), uint64_t{24} << 30);
  EXPECT_EQ(parse_byte_size("80GB"), uint64_t{80000000000});
  EXPECT_EQ(parse_byte_size("512MiB"), uint64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5 GiB"), uint64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("150109880320"), uint64_t{150109880320});
  EXPECT_EQ(parse_byte_size("4kib"), uint64_t{4096});
  EXPECT_EQ(parse_byte_size("7B"), uint64_t{7});
}

TEST(ByteSize, RefusesWhatIsNotASize) {
  for (const char* bad : {"12XB", "", "GiB", "-1GB", "1.2.3GiB", "99999999999999999999999", "1e3",
                          "20 MiB x", "100000000000PiB"}) {
    EXPECT_FALSE(parse_byte_size(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace allocsim
