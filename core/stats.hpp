// memory_stats(): PyTorch's counters, under its own key names.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/torch_version.hpp"
#include "core/types.hpp"

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
  // torch.cuda.reset_peak_memory_stats / reset_accumulated_memory_stats.
  void reset_peak() { peak = current; }
  void reset_accumulated() { allocated = freed = 0; }
  bool operator==(const Stat&) const = default;
};

// Indexed by StatType: the aggregate, then the two pools.
enum StatType : size_t { kAggregate = 0, kSmallPool = 1, kLargePool = 2, kNumStatTypes = 3 };

// One statistic for the aggregate and each pool. Every change goes to the aggregate and one pool
// together, so only the pools are counted and the aggregate is their sum, with its own peak: a
// malloc and a free change three statistics each, and this halves what each change writes. A
// pool's `allocated` is what its current grew by since the accumulated counts were last reset
// (its current then, `base_`), plus what it freed since.
class StatArray {
 public:
  Stat operator[](size_t type) const {
    if (type == kAggregate) {
      return Stat{current_[0] + current_[1], aggregate_peak_,
                  current_[0] + current_[1] - base_[0] - base_[1] + freed_[0] + freed_[1],
                  freed_[0] + freed_[1]};
    }
    const size_t p = type == kSmallPool ? 0 : 1;
    return Stat{current_[p], peak_[p], current_[p] - base_[p] + freed_[p], freed_[p]};
  }
  void reset_peak() {
    peak_ = current_;
    aggregate_peak_ = current();
  }
  void reset_accumulated() {
    base_ = current_;
    freed_ = {};
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
  // Current to 0 with nothing counted as freed: peak, allocated and freed stay.
  void drop_current() {
    base_[0] -= current_[0];
    base_[1] -= current_[1];
    current_ = {};
  }
  bool operator==(const StatArray&) const = default;

 private:
  friend class DeferredFrees;
  std::array<int64_t, 2> current_{}, peak_{}, freed_{}, base_{};  // small pool, large pool
  int64_t aggregate_peak_ = 0;
};

// Blocks freed while other streams may still use them (deferred frees): no longer allocated,
// still active. Active is allocated plus these, so only these are counted: a malloc and a free
// change two statistics fewer. While none waits, active is allocated, and active's peaks (kept
// here) need only be noted when some do: active is never below allocated, so its peak is
// allocated's or one reached while a free waited.
class DeferredFrees {
 public:
  bool any() const { return (current_[0] | current_[1]) != 0; }
  void add(bool small, uint64_t amount) { current_[small ? 0 : 1] += static_cast<int64_t>(amount); }
  void remove(bool small, uint64_t amount) {
    current_[small ? 0 : 1] -= static_cast<int64_t>(amount);
  }
  // Active just grew: note its peaks, active being `allocated` plus these.
  void note_active_peaks(const StatArray& allocated) {
    for (size_t p = 0; p < 2; ++p)
      active_peak_[p] = std::max(active_peak_[p], allocated.current_[p] + current_[p]);
    active_aggregate_peak_ =
        std::max(active_aggregate_peak_, allocated.current() + current_[0] + current_[1]);
  }
  // Active's statistics, from allocated's: whatever has left allocated but not yet active is
  // counted as freed by the one and not by the other (of what waited when the accumulated counts
  // were reset, only what completed since).
  StatArray active(const StatArray& allocated) const {
    StatArray a;
    for (size_t p = 0; p < 2; ++p) {
      a.current_[p] = allocated.current_[p] + current_[p];
      a.peak_[p] = std::max(allocated.peak_[p], active_peak_[p]);
      a.freed_[p] = allocated.freed_[p] - current_[p] + base_[p];
      a.base_[p] = allocated.base_[p] + base_[p];
    }
    a.aggregate_peak_ = std::max(allocated.aggregate_peak_, active_aggregate_peak_);
    return a;
  }
  // After `allocated` reset its own: active's peaks are its current values.
  void reset_peak(const StatArray& allocated) {
    for (size_t p = 0; p < 2; ++p) active_peak_[p] = allocated.current_[p] + current_[p];
    active_aggregate_peak_ = active_peak_[0] + active_peak_[1];
  }
  void reset_accumulated() { base_ = current_; }
  bool operator==(const DeferredFrees&) const = default;

 private:
  std::array<int64_t, 2> current_{}, active_peak_{}, base_{};  // small pool, large pool
  int64_t active_aggregate_peak_ = 0;
};

struct DeviceStats {
  StatArray allocation, segment, inactive_split;
  StatArray allocated_bytes, reserved_bytes, inactive_split_bytes, requested_bytes;
  DeferredFrees deferred, deferred_bytes;  // active = allocated + deferred
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  int64_t num_sync_all_streams = 0;
  int64_t num_device_alloc = 0;
  int64_t num_device_free = 0;
  int64_t num_oom_rejections = 0;  // PyTorch 2.12 on (throw_on_cudamalloc_oom)
  Stat oversize_allocations, oversize_segments;
  int64_t max_split_size = -1;  // SIZE_MAX as int64, as PyTorch reports it
  // PyTorch 2.13 on: the bytes each private pool (CUDA graph pool, MemPool) reserves, in the order
  // the pools first reserved; a pool's current drops to 0 when the pool is freed, its peak,
  // allocated and freed stay until reset.
  struct PrivatePoolReserved {
    MempoolId pool;
    StatArray reserved_bytes;
    bool operator==(const PrivatePoolReserved&) const = default;
  };
  std::vector<PrivatePoolReserved> reserved_bytes_by_private_pools;

  bool operator==(const DeviceStats&) const = default;

  StatArray active() const { return deferred.active(allocation); }
  StatArray active_bytes() const { return deferred_bytes.active(allocated_bytes); }

  // torch.cuda.reset_peak_memory_stats(): every peak is the current value.
  void reset_peaks();
  // torch.cuda.reset_accumulated_memory_stats(): every allocated and freed count, and the counts
  // of retries, OOMs, synchronisations and device calls, from zero.
  void reset_accumulated();

  // The flattened memory_stats() dictionary of that release, sorted by key as PyTorch's
  // OrderedDict is.
  std::vector<std::pair<std::string, int64_t>> flatten(
      TorchVersion version = kDefaultTorchVersion) const;
  // One value by its memory_stats() key; throws std::out_of_range for an unknown key.
  int64_t get(const std::string& key) const;
};

}  // namespace allocsim
