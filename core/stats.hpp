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

// One statistic for the aggregate and each pool. Every change goes to the aggregate and one pool
// together, so only the pools are counted and the aggregate is their sum, with its own peak: a
// malloc and a free change five statistics each, and this halves what each change writes. A
// pool's `allocated` is its current plus its freed (both start at zero and nothing resets them).
class StatArray {
 public:
  Stat operator[](size_t type) const {
    if (type == kAggregate) {
      return Stat{current_[0] + current_[1], aggregate_peak_,
                  current_[0] + current_[1] + freed_[0] + freed_[1], freed_[0] + freed_[1]};
    }
    const size_t p = type == kSmallPool ? 0 : 1;
    return Stat{current_[p], peak_[p], current_[p] + freed_[p], freed_[p]};
  }
  int64_t current() const { return current_[0] + current_[1]; }  // the aggregate's

  void increase(bool small, uint64_t amount) {
    const size_t p = small ? 0 : 1;
    current_[p] += static_cast<int64_t>(amount);
    if (current_[p] > peak_[p]) peak_[p] = current_[p];
    const int64_t total = current_[0] + current_[1];
    if (total > aggregate_peak_) aggregate_peak_ = total;
  }
  void decrease(bool small, uint64_t amount) {
    const size_t p = small ? 0 : 1;
    current_[p] -= static_cast<int64_t>(amount);
    freed_[p] += static_cast<int64_t>(amount);
  }
  bool operator==(const StatArray&) const = default;

 private:
  std::array<int64_t, 2> current_{}, peak_{}, freed_{};  // small pool, large pool
  int64_t aggregate_peak_ = 0;
};

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

  // The flattened memory_stats() dictionary, sorted by key as PyTorch's OrderedDict is.
  std::vector<std::pair<std::string, int64_t>> flatten() const;
  // One value by its memory_stats() key; throws std::out_of_range for an unknown key.
  int64_t get(const std::string& key) const;
};

}  // namespace allocsim
