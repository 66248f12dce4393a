#include "core/device_op.hpp"

namespace allocsim {

const char* to_string(DeviceOpKind kind) {
  switch (kind) {
    case DeviceOpKind::kSegmentAlloc:
      return "segment_alloc";
    case DeviceOpKind::kSegmentFree:
      return "segment_free";
    case DeviceOpKind::kSegmentMap:
      return "segment_map";
    case DeviceOpKind::kSegmentUnmap:
      return "segment_unmap";
  }
  return "?";
}

}  // namespace allocsim
