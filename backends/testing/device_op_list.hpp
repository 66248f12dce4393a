// Test support: device operations as (action, size) pairs, the way traces are compared.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/caching_allocator.hpp"

namespace allocsim::testing {

using OpList = std::vector<std::pair<std::string, uint64_t>>;

inline OpList op_list(const std::vector<DeviceOp>& ops) {
  OpList out;
  for (const DeviceOp& op : ops) out.emplace_back(to_string(op.kind), op.size);
  return out;
}

}  // namespace allocsim::testing
