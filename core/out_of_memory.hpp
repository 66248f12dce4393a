// What the allocator knew when it refused a request, and PyTorch's message for it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/types.hpp"

namespace allocsim {

struct OutOfMemory {
  uint64_t requested = 0;   // the user's byte count
  uint64_t rounded = 0;     // round_size(requested): what the trace's oom entry records
  uint64_t alloc_size = 0;  // the segment size it tried to get: what the message prints
  StreamId stream = 0;
  uint64_t device_free = 0;  // cudaMemGetInfo at the OOM
  uint64_t device_total = 0;
  std::optional<uint64_t> allowed;          // the memory-fraction cap, when one is set
  uint64_t allocated = 0;                   // allocated_bytes.all.current
  uint64_t reserved = 0;                    // reserved_bytes.all.current
  uint64_t allocated_in_private_pools = 0;  // free blocks of CUDA graphs' pools, as PyTorch counts
  bool too_large = false;                   // >= 1 EB: refused before the allocator runs
  bool rejected = false;  // by throw_on_cudamalloc_oom (PyTorch 2.12 on): before any device call
  int device_index = 0;   // "GPU N" in the message

  // PyTorch's OutOfMemoryError text. `process_in_use` stands for NVML's per-process line.
  std::string message(std::optional<uint64_t> process_in_use = std::nullopt) const;
};

}  // namespace allocsim
