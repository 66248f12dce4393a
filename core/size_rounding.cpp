#include "core/size_rounding.hpp"

#include <bit>

namespace allocsim {

uint64_t roundup_power2_next_division(uint64_t size, uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  const uint64_t power2_floor = std::bit_floor(size);
  const uint64_t step = power2_floor >> (63 - std::countl_zero(divisions));
  if (step == 0) return power2_floor << 1;
  const uint64_t floor = size & ~(step - 1);
  return floor == size ? size : floor + step;
}

}  // namespace allocsim
