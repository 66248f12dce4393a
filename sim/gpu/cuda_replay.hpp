// replay --backend cuda: the same trace through the same core on a real GPU, every block's bytes
// written and checked, then compared with the simulated replay of the same trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/block_pattern.hpp"
#include "backends/cuda_device.hpp"
#include "sim/replay/replay.hpp"
#include "sim/report/device_op_diff.hpp"

namespace allocsim {

struct CudaReplayOptions {
  int device = 0;
  bool check_patterns = true;
};

// Where the simulated capacity model (SimulatedDevice) and the real device disagree.
struct CapacityModelCheck {
  uint64_t context_bytes_real = 0;   // total - free before the allocator ran
  uint64_t context_bytes_model = 0;  // what a simulated replay assumes by default
  uint64_t mallocs = 0;
  uint64_t mallocs_as_modelled = 0;  // cudaMalloc took exactly its size rounded up to 2 MiB
  uint64_t maps = 0;
  uint64_t maps_as_modelled = 0;         // cuMemCreate + cuMemMap took exactly the pages' bytes
  std::vector<MemoryCharge> unmodelled;  // the first few that did not
};

struct CudaReplayComparison {
  CudaDeviceInfo device;
  ReplayResult gpu;
  ReplayResult simulated;
  DeviceOpDiff ops;  // simulated on the addresses the GPU's driver gave
  // The simulation as users run it, on the trace's recorded addresses (or the placement model):
  // where the GPU's driver placed segments elsewhere, best fit may pick other blocks from there on.
  DeviceOpDiff ops_on_trace_addresses;
  uint64_t ooms_on_trace_addresses = 0;
  PatternResult patterns;
  bool patterns_checked = false;
  uint64_t free_at_start = 0;  // cudaMemGetInfo before the replay
  uint64_t free_at_end = 0;    // after every block was freed and the cache emptied
  uint64_t segments_left = 0;  // cudaMalloc'ed segments and mapped pages still held at the end
  CapacityModelCheck capacity;
  double gpu_seconds = 0;
  double simulated_seconds = 0;

  bool verdicts_equal() const {
    return (gpu.outcome.fatal_ooms() > 0) == (simulated.outcome.fatal_ooms() > 0);
  }
  bool leaked() const { return free_at_end != free_at_start || segments_left != 0; }
  bool confirmed() const {
    return ops.identical() && verdicts_equal() && patterns.bad_words == 0 && !leaked();
  }
};

// `options` as for a simulated replay; its capacity becomes the device's. Throws CudaError.
CudaReplayComparison replay_on_cuda(const Trace& trace, ReplayOptions options,
                                    const CudaReplayOptions& cuda);

nlohmann::json cuda_replay_json(const CudaReplayComparison& comparison);
std::string cuda_replay_text(const CudaReplayComparison& comparison);

}  // namespace allocsim
