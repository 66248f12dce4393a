// The memory breakdown as the reports show it: JSON rows and a text table.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/replay/memory_breakdown.hpp"

namespace allocsim {

nlohmann::json to_json(const MemoryBreakdown& breakdown);
std::string to_text(const MemoryBreakdown& breakdown);

}  // namespace allocsim
