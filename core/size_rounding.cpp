#include "core/size_rounding.hpp"

#include <bit>

namespace allocsim {

size_t roundup_interval_index(uint64_t size) {
  // floor(log2(size)) - 20, clamped: sizes below 1 MiB use entry 0, 32 GiB and above entry 15.
  const int log_size = 63 - std::countl_zero(size | 1);
  int index = log_size - 20;
  if (index < 0) index = 0;
  if (index > static_cast<int>(kRoundupPowerOfTwoIntervals) - 1) {
    index = static_cast<int>(kRoundupPowerOfTwoIntervals) - 1;
  }
  return static_cast<size_t>(index);
}

uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  const uint64_t power2_floor = std::bit_floor(size);
  const uint64_t step = power2_floor >> (63 - std::countl_zero(divisions));
  if (step == 0) return power2_floor << 1;
  const uint64_t floor = size & ~(step - 1);
  return floor == size ? size : floor + step;
}

uint64_t round_size(uint64_t n, const RoundupDivisions& divisions) {
  if (n < kMinBlockSize) return kMinBlockSize;
  const uint64_t d = divisions[roundup_interval_index(n)];
  if (d > 1 && n > kMinBlockSize * d) return roundup_power2_next_division(n, d);
  return kMinBlockSize * ((n + kMinBlockSize - 1) / kMinBlockSize);
}

uint64_t allocation_size(uint64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

}  // namespace allocsim
