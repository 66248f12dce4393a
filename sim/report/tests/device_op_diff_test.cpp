#include "sim/report/device_op_diff.hpp"

#include <gtest/gtest.h>

namespace allocsim {
namespace {

constexpr auto kAlloc = DeviceOpKind::kSegmentAlloc;
constexpr auto kFree = DeviceOpKind::kSegmentFree;

TEST(DeviceOpDiff, EqualOperationsAtOtherAddressesAreIdentical) {
  const std::vector<DeviceOp> a{{kAlloc, 100, 2097152, 0}, {kFree, 100, 2097152, 0}};
  const std::vector<DeviceOp> b{{kAlloc, 100, 2097152, 0}, {kFree, 100, 2097152, 0}};
  std::vector<DeviceOp> moved = b;
  moved[1].address = moved[0].address = 900;
  EXPECT_TRUE(compare_device_ops(a, b).identical());
  EXPECT_EQ(compare_device_ops(a, b).same_addresses, 2u);
  const DeviceOpDiff d = compare_device_ops(a, moved);
  EXPECT_TRUE(d.identical());
  EXPECT_EQ(d.same_addresses, 0u);
  EXPECT_EQ(d.equal_prefix, 2u);
}

TEST(DeviceOpDiff, NamesTheFirstDifference) {
  const std::vector<DeviceOp> a{{kAlloc, 1, 2097152, 0}, {kAlloc, 2, 20971520, 0}};
  std::vector<DeviceOp> size = a;
  size[1].size = 4194304;
  EXPECT_EQ(compare_device_ops(a, size).first_difference, 1u);
  std::vector<DeviceOp> stream = a;
  stream[0].stream = 7;
  EXPECT_EQ(compare_device_ops(a, stream).first_difference, 0u);
  std::vector<DeviceOp> kind = a;
  kind[1].kind = kFree;
  EXPECT_EQ(compare_device_ops(a, kind).first_difference, 1u);
  const std::vector<DeviceOp> shorter(a.begin(), a.begin() + 1);
  const DeviceOpDiff d = compare_device_ops(a, shorter);
  EXPECT_FALSE(d.identical());
  EXPECT_EQ(d.first_difference, 1u);
  EXPECT_EQ(describe(a[1]), "segment_alloc of 20971520 bytes on stream 0");
}

}  // namespace
}  // namespace allocsim
