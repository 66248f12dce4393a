// StatArray: the aggregate entry derived from the pools reads as PyTorch's own counters.
#include <gtest/gtest.h>

#include "core/stats.hpp"

namespace allocsim {
namespace {

TEST(StatArray, AggregateIsThePoolsSumWithThePeakOfTheSum) {
  StatArray a;
  a.increase(/*small=*/true, 10);
  a.decrease(/*small=*/true, 10);
  a.increase(/*small=*/false, 6);
  a.increase(/*small=*/true, 3);
  // The pools peaked at 10 and 6, at different times: the aggregate's peak is 10, not 16.
  EXPECT_EQ(a[kSmallPool], (Stat{3, 10, 13, 10}));
  EXPECT_EQ(a[kLargePool], (Stat{6, 6, 6, 0}));
  EXPECT_EQ(a[kAggregate], (Stat{9, 10, 19, 10}));
  EXPECT_EQ(a.current(), 9);
  a.increase(/*small=*/false, 2);
  EXPECT_EQ(a[kAggregate].peak, 11);
}

TEST(StatArray, EqualsThePerEntryCountersPyTorchKeeps) {
  // PyTorch updates the aggregate and the pool's Stat on every change; the derived entries
  // must read the same after any sequence of changes.
  StatArray derived;
  Stat all, small, large;
  uint64_t seed = 12345;
  for (int i = 0; i < 2000; ++i) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    const bool is_small = (seed >> 33) & 1;
    const uint64_t amount = (seed >> 40) % 1000;
    Stat& pool = is_small ? small : large;
    const bool grow = ((seed >> 34) & 3) != 0 || pool.current < static_cast<int64_t>(amount);
    if (grow) {
      derived.increase(is_small, amount);
      all.increase(amount);
      pool.increase(amount);
    } else {
      derived.decrease(is_small, amount);
      all.decrease(amount);
      pool.decrease(amount);
    }
    ASSERT_EQ(derived[kAggregate], all) << "after change " << i;
    ASSERT_EQ(derived[kSmallPool], small) << "after change " << i;
    ASSERT_EQ(derived[kLargePool], large) << "after change " << i;
  }
}

}  // namespace
}  // namespace allocsim
