// How long the allocator's device calls take: cudaMalloc, cudaFree and an expandable segment's
// maps and unmaps, by size, as measured on a real GPU (`allocsim calibrate`). Turns the device
// calls a remedy adds into an estimate of the time they cost.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device_op.hpp"

namespace allocsim {

struct DeviceCallTimes {
  std::string device;  // the GPU they were measured on
  std::string source;  // "shipped" or the file read
  // For each DeviceOpKind: (bytes, seconds per call), ascending by bytes.
  std::array<std::vector<std::pair<uint64_t, double>>, 4> points;

  // Piecewise linear between the measured sizes, along the last two beyond them, the first
  // below them; never negative.
  [[nodiscard]] double seconds(DeviceOpKind kind, uint64_t size) const;
  [[nodiscard]] double seconds(const std::vector<DeviceOp>& ops) const;
};

// The table measured on an H100 80GB HBM3 (sim/plan/device_call_times_h100.json).
const DeviceCallTimes& shipped_device_call_times();

// Throws InputError naming `where` and the key that is wrong.
[[nodiscard]] DeviceCallTimes device_call_times_from_json(const nlohmann::json& json,
                                                          const std::string& where);
nlohmann::json device_call_times_json(const DeviceCallTimes& times);
// The table in a file `allocsim calibrate` wrote. Throws InputError (the file, and the byte
// offset of bad JSON).
[[nodiscard]] DeviceCallTimes read_device_call_times(const std::string& path);

}  // namespace allocsim
