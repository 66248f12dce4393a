// StatArray: the aggregate entry derived from the pools reads as PyTorch's own counters.
#include <gtest/gtest.h>

#include "core/stats.hpp"

#include <vector>

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
  // must read the same after any sequence of changes and resets.
  StatArray derived;
  Stat all, small, large;
  uint64_t seed = 12345;
  for (int i = 0; i < 2000; ++i) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    const bool is_small = (seed >> 33) & 1;
    const uint64_t amount = (seed >> 40) % 1000;
    Stat& pool = is_small ? small : large;
    const bool grow = ((seed >> 34) & 3) != 0 || pool.current < static_cast<int64_t>(amount);
    if ((seed >> 50) % 64 == 0) {  // torch.cuda.reset_peak_memory_stats()
      derived.reset_peak();
      for (Stat* s : {&all, &small, &large}) s->reset_peak();
    } else if ((seed >> 50) % 64 == 1) {  // torch.cuda.reset_accumulated_memory_stats()
      derived.reset_accumulated();
      for (Stat* s : {&all, &small, &large}) s->reset_accumulated();
    } else if (grow) {
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

TEST(DeferredFrees, ActiveEqualsPyTorchsCountersAcrossResets) {
  // PyTorch's active Stat grows with each malloc and shrinks when a free completes; allocated
  // shrinks when the free is requested. Frees wait (record_stream) while resets come between.
  DeviceStats derived;
  Stat allocated, active;
  std::vector<uint64_t> live, waiting;
  uint64_t seed = 777;
  for (int i = 0; i < 3000; ++i) {
    seed = seed * 6364136223846793005u + 1442695040888963407u;
    const uint64_t amount = 1 + (seed >> 40) % 1000;
    switch ((seed >> 33) % 8) {
      case 0:
        derived.reset_peaks();
        allocated.reset_peak();
        active.reset_peak();
        break;
      case 1:
        derived.reset_accumulated();
        allocated.reset_accumulated();
        active.reset_accumulated();
        break;
      case 2:
      case 3:
        if (!live.empty()) {  // a free that waits for another stream
          const uint64_t n = live.back();
          live.pop_back();
          derived.allocated_bytes.decrease(false, n);
          derived.deferred_bytes.add(false, n);
          allocated.decrease(n);
          waiting.push_back(n);
          break;
        }
        [[fallthrough]];
      case 4:
        if (!waiting.empty()) {  // its stream uses are over
          const uint64_t n = waiting.front();
          waiting.erase(waiting.begin());
          derived.deferred_bytes.remove(false, n);
          active.decrease(n);
          break;
        }
        [[fallthrough]];
      default:
        derived.allocated_bytes.increase(false, amount);
        derived.deferred_bytes.note_active_peaks(derived.allocated_bytes);
        allocated.increase(amount);
        active.increase(amount);
        live.push_back(amount);
    }
    ASSERT_EQ(derived.allocated_bytes[kAggregate], allocated) << "after change " << i;
    ASSERT_EQ(derived.active_bytes()[kAggregate], active) << "after change " << i;
    ASSERT_EQ(derived.active_bytes()[kLargePool], active) << "after change " << i;
  }
}

TEST(DeviceStats, ResetAccumulatedZeroesTheCountsOfCalls) {
  DeviceStats s;
  s.num_alloc_retries = 2;
  s.num_ooms = 1;
  s.num_sync_all_streams = 5;
  s.num_device_alloc = 7;
  s.num_device_free = 3;
  s.max_split_size = 1 << 20;
  s.reset_accumulated();
  EXPECT_EQ(s.get("num_alloc_retries") + s.get("num_ooms") + s.get("num_sync_all_streams") +
                s.get("num_device_alloc") + s.get("num_device_free"),
            0);
  EXPECT_EQ(s.get("max_split_size"), 1 << 20);  // a setting, not a count
}

}  // namespace
}  // namespace allocsim
