// Size rounding and segment sizing of PyTorch's CUDA caching allocator
// (docs/pytorch-caching-allocator.md §1).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace allocsim {

inline constexpr uint64_t kMinBlockSize = 512;        // every block is a multiple of this
inline constexpr uint64_t kSmallSize = 1048576;       // largest small-pool request (1 MiB)
inline constexpr uint64_t kSmallBuffer = 2097152;     // small-pool segment / page size
inline constexpr uint64_t kMinLargeAlloc = 10485760;  // below this, large requests get a
                                                      // large_segment_size segment
inline constexpr uint64_t kLargeBuffer = 20971520;    // large_segment_size's default (20 MiB)
inline constexpr uint64_t kRoundLarge = 2097152;      // large segments round to 2 MiB
inline constexpr size_t kRoundupPowerOfTwoIntervals = 16;

// Divisions per power-of-two interval: entry i covers [2^(20+i), 2^(21+i)) bytes.
using RoundupDivisions = std::array<uint64_t, kRoundupPowerOfTwoIntervals>;

// Index into RoundupDivisions for a size, clamped to the table.
inline size_t roundup_interval_index(uint64_t size) {
  // floor(log2(size)) - 20, clamped: sizes below 1 MiB use entry 0, 32 GiB and above entry 15.
  const int log_size = 63 - std::countl_zero(size | 1);
  int index = log_size - 20;
  if (index < 0) index = 0;
  if (index > static_cast<int>(kRoundupPowerOfTwoIntervals) - 1) {
    index = static_cast<int>(kRoundupPowerOfTwoIntervals) - 1;
  }
  return static_cast<size_t>(index);
}

// Rounds size up to the next of `divisions` equal steps between two powers of two.
uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions);

// n rounded up to whole blocks of 512 bytes, and at least one: round_size without divisions.
inline uint64_t round_to_min_blocks(uint64_t n) {
  return kMinBlockSize * ((std::max(n, uint64_t{1}) + kMinBlockSize - 1) / kMinBlockSize);
}

// Whether any interval of `divisions` rounds to a power-of-two division (more than one).
inline bool rounds_to_divisions(const RoundupDivisions& divisions) {
  return std::any_of(divisions.begin(), divisions.end(), [](uint64_t d) { return d > 1; });
}

// The block size a request of n bytes occupies (PyTorch's round_size). Inline: once per malloc.
inline uint64_t round_size(uint64_t n, const RoundupDivisions& divisions) {
  if (n < kMinBlockSize) return kMinBlockSize;
  const uint64_t d = divisions[roundup_interval_index(n)];
  if (d > 1 && n > kMinBlockSize * d) return roundup_power2_next_division(n, d);
  return round_to_min_blocks(n);
}

// The cudaMalloc size for a new segment that serves a rounded size (get_allocation_size), with
// large_segment_size_mb's segment size.
inline uint64_t allocation_size(uint64_t rounded, uint64_t large_segment_size) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return large_segment_size;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

inline bool is_small_size(uint64_t rounded) {
  return rounded <= kSmallSize;
}

}  // namespace allocsim
