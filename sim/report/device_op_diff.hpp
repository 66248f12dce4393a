// Compares two runs' device operations (cudaMalloc / cudaFree / map / unmap), e.g. a replay on a
// real GPU with the same replay simulated. Operations are equal when kind, size and stream are;
// addresses are counted apart, since a real driver places segments where it likes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device_op.hpp"

namespace allocsim {

struct DeviceOpDiff {
  uint64_t left_count = 0;
  uint64_t right_count = 0;
  uint64_t equal_prefix = 0;                 // operations equal before the first difference
  std::optional<uint64_t> first_difference;  // index of the first unequal (or missing) operation
  uint64_t same_addresses = 0;               // within the equal prefix
  bool identical() const { return !first_difference; }
};

DeviceOpDiff compare_device_ops(const std::vector<DeviceOp>& left,
                                const std::vector<DeviceOp>& right);
// "segment_alloc of 20971520 bytes on stream 0", for messages.
std::string describe(const DeviceOp& op);

}  // namespace allocsim
