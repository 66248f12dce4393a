#include "sim/report/axis_ticks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace allocsim {
namespace {

struct Unit {
  uint64_t bytes;
  const char* name;
};
constexpr Unit kUnits[] = {{uint64_t{1} << 40, "TiB"},
                           {uint64_t{1} << 30, "GiB"},
                           {uint64_t{1} << 20, "MiB"},
                           {uint64_t{1} << 10, "KiB"},
                           {1, "bytes"}};

const Unit& unit_of(uint64_t bytes) {
  for (const Unit& u : kUnits) {
    if (bytes >= u.bytes) return u;
  }
  return kUnits[4];
}

}  // namespace

std::string byte_tick_label(uint64_t value, uint64_t unit) {
  if (value == 0) return "0";
  const Unit* u = &kUnits[4];
  for (const Unit& candidate : kUnits) {
    if (candidate.bytes == unit) u = &candidate;
  }
  const double v = static_cast<double>(value) / static_cast<double>(u->bytes);
  char buf[48];
  // The fewest decimals (up to 3) that print the value exactly enough to tell ticks apart.
  for (int decimals = 0; decimals <= 3; ++decimals) {
    std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, u->name);
    const double back = std::strtod(buf, nullptr);
    if (std::fabs(back - v) <= 1e-6 * std::max(1.0, v)) break;
  }
  return buf;
}

ByteAxis byte_axis(uint64_t largest) {
  // Beyond 1 EiB no memory is measured; the clamp keeps the ticks far from overflowing.
  largest = std::clamp<uint64_t>(largest, 1, uint64_t{1} << 60);
  const Unit& unit = unit_of(largest);
  const double in_units = static_cast<double>(largest) / static_cast<double>(unit.bytes);
  ByteAxis axis;
  // Candidate steps in units, smallest first; the first with at most 6 intervals wins.
  double power = std::pow(10.0, std::floor(std::log10(in_units / 6)) - 1);
  for (;; power *= 10) {
    bool found = false;
    for (double m : {1.0, 2.0, 2.5, 5.0}) {
      const double step_units = m * power;
      const double step_bytes = step_units * static_cast<double>(unit.bytes);
      if (step_bytes < 1) continue;
      // A step of 0.2 GiB is not a whole number of bytes: the nearest is.
      const uint64_t step = static_cast<uint64_t>(std::llround(step_bytes));
      const uint64_t intervals = (largest + step - 1) / step;
      if (intervals <= 6) {
        axis.step = step;
        axis.top = intervals * step;
        found = true;
        break;
      }
    }
    if (found) break;
  }
  for (uint64_t v = 0; v <= axis.top; v += axis.step) {
    axis.ticks.push_back(v);
    axis.labels.push_back(byte_tick_label(v, unit.bytes));
  }
  return axis;
}

}  // namespace allocsim
