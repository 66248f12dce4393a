// A device-level operation, as PyTorch's trace records it (segment_alloc, ...).
#pragma once

#include <cstdint>

#include "core/types.hpp"

namespace allocsim {

enum class DeviceOpKind : uint8_t { kSegmentAlloc, kSegmentFree, kSegmentMap, kSegmentUnmap };
const char* to_string(DeviceOpKind kind);

struct DeviceOp {
  DeviceOpKind kind;
  uint64_t address;
  uint64_t size;
  StreamId stream;
  bool operator==(const DeviceOp&) const = default;
};

}  // namespace allocsim
