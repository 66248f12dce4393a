// CudaDevice: the allocator core on a real GPU. Ordinary segments come from cudaMalloc, expandable
// segments from the driver's virtual memory API (reached through cudaGetDriverEntryPointByVersion,
// so nothing links libcuda and the binary runs, and says why it cannot, on a machine with no GPU).
//
// Errors: an out-of-memory answer becomes the core's failed call (nullopt / false); any other CUDA
// error throws CudaError naming the call, its arguments and the error.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/device.hpp"

namespace allocsim {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the driver took from cudaMemGetInfo's free memory for one cudaMalloc or map call.
struct MemoryCharge {
  bool map;           // cuMemCreate + cuMemMap of pages, else cudaMalloc
  uint64_t size;      // bytes asked for
  uint64_t freed_by;  // drop in free memory (0 if it rose)
};

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;  // the CUDA runtime allocsim was built with
  uint64_t total = 0;
};

// How many CUDA devices this process sees; 0 (and `why` set) when there is no driver or device.
int cuda_device_count(std::string* why);

class CudaDevice final : public Device {
 public:
  // Opens device `ordinal` and creates its context. Throws CudaError.
  explicit CudaDevice(int ordinal);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::optional<uint64_t> malloc(uint64_t size) override;
  void free(uint64_t address, uint64_t size) override;
  std::optional<uint64_t> reserve_address(uint64_t size, uint64_t alignment) override;
  void release_address(uint64_t address, uint64_t size) override;
  bool map(uint64_t address, uint64_t size, uint64_t page_size) override;
  void unmap(uint64_t address, uint64_t size, uint64_t page_size) override;
  DeviceMemInfo mem_get_info() const override;

  const CudaDeviceInfo& info() const { return info_; }
  // With measure_charges, every cudaMalloc and map is bracketed by cudaMemGetInfo calls, so that
  // the capacity model's 2 MiB granularity can be checked against the real driver.
  void set_measure_charges(bool on) { measure_charges_ = on; }
  const std::vector<MemoryCharge>& charges() const { return charges_; }
  uint64_t live_segments() const { return segments_; }
  const std::vector<uint64_t>& reservations() const { return reservations_; }  // bases, in order
  uint64_t live_pages() const { return handles_.size(); }

 private:
  struct DriverApi;

  void note_charge(bool map, uint64_t size, uint64_t free_before);
  void release_pages(uint64_t address, uint64_t count, uint64_t page_size);

  CudaDeviceInfo info_;
  std::unique_ptr<DriverApi> driver_;
  std::map<uint64_t, unsigned long long> handles_;  // mapped page address -> its physical handle
  uint64_t segments_ = 0;
  std::vector<uint64_t> reservations_;
  bool measure_charges_ = false;
  std::vector<MemoryCharge> charges_;
};

}  // namespace allocsim
