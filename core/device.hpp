// The whole device boundary of the allocator core: the seven calls a backend provides.
//
// Contract: addresses are device virtual addresses as integers; a failed call returns
// std::nullopt / false and changes nothing (the core turns that into its retry path or an OOM).
// Sizes passed in are exactly what PyTorch would pass to the CUDA API.
#pragma once

#include <cstdint>
#include <optional>

namespace allocsim {

// A segment a recorded run got from cudaMalloc: where a device that replays the run places it.
struct RecordedSegment {
  uint64_t address;
  uint64_t size;
};

// What the driver hands out memory in: cudaMalloc rounds to it, and it is
// cuMemGetAllocationGranularity's answer for the pages of an expandable segment.
inline constexpr uint64_t kDriverGranularity = uint64_t{2} << 20;

struct DeviceMemInfo {
  uint64_t free = 0;  // as cudaMemGetInfo reports it
  uint64_t total = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  // cudaMalloc / cudaFree of an ordinary segment.
  virtual std::optional<uint64_t> malloc(uint64_t size) = 0;
  virtual void free(uint64_t address, uint64_t size) = 0;

  // cuMemAddressReserve / cuMemAddressFree of an expandable segment's address range.
  virtual std::optional<uint64_t> reserve_address(uint64_t size, uint64_t alignment) = 0;
  virtual void release_address(uint64_t address, uint64_t size) = 0;

  // cuMemCreate + cuMemMap + cuMemSetAccess of whole pages, and their cuMemUnmap + cuMemRelease.
  // map is all or nothing: pages created before a failure are released again.
  virtual bool map(uint64_t address, uint64_t size, uint64_t page_size) = 0;
  virtual void unmap(uint64_t address, uint64_t size, uint64_t page_size) = 0;

  // cudaMemGetInfo; `total` is also totalGlobalMem, which sizes expandable reservations.
  virtual DeviceMemInfo mem_get_info() const = 0;
};

}  // namespace allocsim
