// memory_stats(): PyTorch's counters, under its own key names.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace allocsim {

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // cumulative increase
  int64_t freed = 0;      // cumulative decrease

  void increase(uint64_t amount) {
    current += static_cast<int64_t>(amount);
    if (current > peak) peak = current;
    allocated += static_cast<int64_t>(amount);
  }
  void decrease(uint64_t amount) {
    current -= static_cast<int64_t>(amount);
    freed += static_cast<int64_t>(amount);
  }
  bool operator==(const Stat&) const = default;
};

// Indexed by StatType: the aggregate, then the two pools.
enum StatType : size_t { kAggregate = 0, kSmallPool = 1, kLargePool = 2, kNumStatTypes = 3 };
using StatArray = std::array<Stat, kNumStatTypes>;

struct DeviceStats {
  StatArray allocation, segment, active, inactive_split;
  StatArray allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes, requested_bytes;
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  int64_t num_sync_all_streams = 0;
  int64_t num_device_alloc = 0;
  int64_t num_device_free = 0;
  Stat oversize_allocations, oversize_segments;
  int64_t max_split_size = -1;  // SIZE_MAX as int64, as PyTorch reports it

  bool operator==(const DeviceStats&) const = default;

  // Increase or decrease the aggregate entry and the pool's entry together.
  static void increase(StatArray& a, bool small, uint64_t amount) {
    a[kAggregate].increase(amount);
    a[small ? kSmallPool : kLargePool].increase(amount);
  }
  static void decrease(StatArray& a, bool small, uint64_t amount) {
    a[kAggregate].decrease(amount);
    a[small ? kSmallPool : kLargePool].decrease(amount);
  }

  // The flattened memory_stats() dictionary, sorted by key as PyTorch's OrderedDict is.
  std::vector<std::pair<std::string, int64_t>> flatten() const;
  // One value by its memory_stats() key; throws std::out_of_range for an unknown key.
  int64_t get(const std::string& key) const;
};

}  // namespace allocsim
