// allocsim calibrate: times the allocator's device calls on a real GPU (cudaMalloc and cudaFree
// of segments, the maps and unmaps of expandable segments' pages) at sizes from 2 MiB to 8 GiB:
// the table plan's cost estimates read (sim/plan/device_call_times.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda_device.hpp"
#include "core/device_op.hpp"

namespace allocsim {

struct CalibrationOptions {
  int device = 0;
  int repeats = 15;  // calls timed per size; the median is kept
};

struct CallTiming {
  DeviceOpKind kind;
  uint64_t size;   // bytes
  double seconds;  // the median call
};

struct Calibration {
  std::string device;               // the GPU's name
  std::vector<CallTiming> timings;  // by kind, ascending sizes within each
};

// Throws CudaError.
[[nodiscard]] Calibration calibrate_device_calls(const CalibrationOptions& options);

}  // namespace allocsim
