#include "sim/report/device_op_diff.hpp"

#include <algorithm>

namespace allocsim {

DeviceOpDiff compare_device_ops(const std::vector<DeviceOp>& left,
                                const std::vector<DeviceOp>& right) {
  DeviceOpDiff diff;
  diff.left_count = left.size();
  diff.right_count = right.size();
  const size_t common = std::min(left.size(), right.size());
  for (size_t i = 0; i < common; ++i) {
    const DeviceOp& a = left[i];
    const DeviceOp& b = right[i];
    if (a.kind != b.kind || a.size != b.size || a.stream != b.stream) {
      diff.first_difference = i;
      return diff;
    }
    ++diff.equal_prefix;
    diff.same_addresses += a.address == b.address;
  }
  if (left.size() != right.size()) diff.first_difference = common;
  return diff;
}

std::string describe(const DeviceOp& op) {
  return std::string(to_string(op.kind)) + " of " + std::to_string(op.size) + " bytes on stream " +
         std::to_string(op.stream);
}

}  // namespace allocsim
