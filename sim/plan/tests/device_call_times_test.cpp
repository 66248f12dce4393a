#include <gtest/gtest.h>

#include "sim/plan/device_call_times.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

DeviceCallTimes table() {
  return device_call_times_from_json(nlohmann::json::parse(R"({
      "device": "test",
      "segment_alloc": [[1000, 1.0], [3000, 3.0]],
      "segment_free": [[1000, 2.0]],
      "segment_map": [],
      "segment_unmap": [[1000, 1.0], [2000, 0.5], [3000, 0.0]]})"),
                                     "table.json");
}

TEST(DeviceCallTimes, InterpolatesBetweenSizesAndExtendsBeyond) {
  const DeviceCallTimes t = table();
  EXPECT_DOUBLE_EQ(t.seconds(DeviceOpKind::kSegmentAlloc, 2000), 2.0);
  EXPECT_DOUBLE_EQ(t.seconds(DeviceOpKind::kSegmentAlloc, 500), 1.0);   // the first below
  EXPECT_DOUBLE_EQ(t.seconds(DeviceOpKind::kSegmentAlloc, 5000), 5.0);  // along the last two
  EXPECT_DOUBLE_EQ(t.seconds(DeviceOpKind::kSegmentFree, 9000), 2.0);   // one point: constant
  EXPECT_DOUBLE_EQ(t.seconds(DeviceOpKind::kSegmentMap, 9000), 0.0);    // none measured
  EXPECT_DOUBLE_EQ(t.seconds(DeviceOpKind::kSegmentUnmap, 5000), 0.0);  // never negative
  const std::vector<DeviceOp> ops = {{DeviceOpKind::kSegmentAlloc, 0, 2000, 0},
                                     {DeviceOpKind::kSegmentFree, 0, 2000, 0}};
  EXPECT_DOUBLE_EQ(t.seconds(ops), 4.0);
}

TEST(DeviceCallTimes, RoundTripsThroughJson) {
  const DeviceCallTimes t = table();
  const DeviceCallTimes back = device_call_times_from_json(device_call_times_json(t), "again");
  EXPECT_EQ(back.device, "test");
  EXPECT_EQ(back.points, t.points);
}

TEST(DeviceCallTimes, RefusesATableItCannotUse) {
  EXPECT_THROW((void)device_call_times_from_json(nlohmann::json::parse("[]"), "x"), InputError);
  EXPECT_THROW((void)device_call_times_from_json(
                   nlohmann::json::parse(R"({"segment_alloc": [], "segment_free": []})"), "x"),
               InputError);
  EXPECT_THROW((void)device_call_times_from_json(nlohmann::json::parse(R"({
      "segment_alloc": [[2000, 1.0], [1000, 1.0]], "segment_free": [],
      "segment_map": [], "segment_unmap": []})"),
                                                 "x"),
               InputError);
  EXPECT_THROW((void)device_call_times_from_json(nlohmann::json::parse(R"({
      "segment_alloc": [[2000, -1.0]], "segment_free": [],
      "segment_map": [], "segment_unmap": []})"),
                                                 "x"),
               InputError);
  EXPECT_THROW((void)read_device_call_times("/nonexistent/table.json"), InputError);
}

// The shipped table: measured on an H100, every kind, cudaMalloc of 2 MiB in tens of microseconds.
TEST(DeviceCallTimes, TheShippedTableIsAnH100s) {
  const DeviceCallTimes& t = shipped_device_call_times();
  EXPECT_EQ(t.device, "NVIDIA H100 80GB HBM3");
  for (const auto& kind : t.points) EXPECT_GE(kind.size(), 5u);
  const double malloc_2mib = t.seconds(DeviceOpKind::kSegmentAlloc, 2 << 20);
  EXPECT_GT(malloc_2mib, 1e-6);
  EXPECT_LT(malloc_2mib, 1e-3);
}

}  // namespace
}  // namespace allocsim
