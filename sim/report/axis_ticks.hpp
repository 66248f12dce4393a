// Tick values for a byte axis: 5 to 7 round values from 0, in one binary unit, whatever the data's
// scale (a few KiB or hundreds of GiB), so that labels never crowd.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace allocsim {

struct ByteAxis {
  uint64_t top = 0;  // the last tick: the axis' end, at or above the largest value
  uint64_t step = 0;
  std::vector<uint64_t> ticks;      // 0, step, 2 step, ..., top
  std::vector<std::string> labels;  // "0", "512 MiB", "1 GiB", "1.5 GiB"
};

// The axis for values in [0, largest]. The step is 1, 2, 2.5 or 5 times a power of ten of the
// unit (bytes, KiB, MiB, GiB, TiB) that `largest` reaches, the smallest giving at most 6
// intervals; the next smaller candidate is at most half of it, so at least 4 remain (fewer only
// for a largest value of a few bytes).
ByteAxis byte_axis(uint64_t largest);

// A tick label: the value in `unit` bytes with as few decimals as it needs, and the unit's name.
std::string byte_tick_label(uint64_t value, uint64_t unit);

}  // namespace allocsim
