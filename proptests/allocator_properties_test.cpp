// Property tests: generated settings, devices and operation streams; every step keeps the
// allocator's properties (backends/testing/allocator_harness.hpp), and freeing everything leaks
// nothing. A failure prints the shrunk settings and operation list.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <bit>

#include "proptests/generators.hpp"

namespace allocsim::proptests {
namespace {

using testing::AllocatorHarness;
using testing::Op;

struct Model {};

// One command per operation, so RapidCheck shrinks the stream and prints it as a list.
struct Step : rc::state::Command<Model, AllocatorHarness> {
  Op op = *proptests::op();
  void run(const Model&, AllocatorHarness& harness) const override {
    try {
      harness.apply(op);
    } catch (const testing::PropertyViolation& e) {
      RC_FAIL(e.what());
    }
  }
  void show(std::ostream& os) const override { os << testing::to_string(op); }
};

RC_GTEST_PROP(AllocatorProperties, EveryStepKeepsTheInvariantsAndNothingLeaks, ()) {
  const auto config = *harness_config();
  RC_LOG() << testing::to_string(config) << "\n";
  AllocatorHarness harness(config);
  rc::state::check(Model{}, harness, rc::state::gen::execOneOfWithArgs<Step>());
  try {
    harness.finish();
  } catch (const testing::PropertyViolation& e) {
    RC_FAIL(e.what());
  }
}

RC_GTEST_PROP(AllocatorProperties, SameOperationsGiveTheSameDeviceOperationsAndStatistics, ()) {
  const auto config = *harness_config();
  const auto ops = *rc::gen::container<std::vector<Op>>(op());
  AllocatorHarness first(config), second(config);
  for (const Op& o : ops) {
    first.apply(o);
    second.apply(o);
  }
  RC_ASSERT(first.allocator().device_ops() == second.allocator().device_ops());
  RC_ASSERT(first.allocator().stats() == second.allocator().stats());
}

RC_GTEST_PROP(Rounding, RoundSizeKeepsItsRules, ()) {
  const uint64_t n = *rc::gen::inRange<uint64_t>(1, uint64_t{1} << 40);
  const uint64_t d = *rc::gen::element<uint64_t>(0, 1, 2, 4, 8, 16, 64);
  RoundupDivisions table;
  table.fill(d);
  const uint64_t r = round_size(n, table);
  RC_ASSERT(r >= n);
  RC_ASSERT(r % kMinBlockSize == 0);
  RC_ASSERT(round_size(r, table) == r);  // idempotent
  if (d > 1 && n > kMinBlockSize * d) {
    const uint64_t step = std::bit_floor(n) / d;
    RC_ASSERT(r - n < step || std::has_single_bit(r));
  } else {
    RC_ASSERT(r - n < kMinBlockSize);
  }
  const uint64_t a = allocation_size(r, kLargeBuffer);
  RC_ASSERT(a >= r);
  RC_ASSERT(a % kSmallBuffer == 0);
  const bool segment_rule = r <= kSmallSize
                                ? a == kSmallBuffer
                                : (r < kMinLargeAlloc ? a == kLargeBuffer : a - r < kRoundLarge);
  RC_ASSERT(segment_rule);
}

RC_GTEST_PROP(AllocConfProperties, CanonicalStringRoundTrips, ()) {
  const AllocConf conf = *alloc_conf();
  const std::string text = conf.to_string();
  RC_LOG() << text << "\n";
  const AllocConf again = parse_alloc_conf(text);
  RC_ASSERT(conf.same_policy(again));
}

RC_GTEST_PROP(AllocConfProperties, AnyStringParsesOrIsRefusedCleanly, ()) {
  const std::string alphabet = "abcdefgimnoprstux_:,[]>0123456789. ";
  const auto text = *rc::gen::container<std::string>(rc::gen::elementOf(alphabet));
  try {
    (void)parse_alloc_conf(text);
  } catch (const AllocConfError&) {
  }
  try {
    (void)parse_alloc_conf("roundup_power2_divisions:[" + text);
  } catch (const AllocConfError&) {
  }
}

}  // namespace
}  // namespace allocsim::proptests
