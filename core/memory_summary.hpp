// torch.cuda.memory_summary(): the same table, character for character.
#pragma once

#include <string>

#include "core/stats.hpp"

namespace allocsim {

std::string memory_summary(const DeviceStats& stats, int device = 0, bool abbreviated = false);

}  // namespace allocsim
