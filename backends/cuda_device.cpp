#include "backends/cuda_device.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>

namespace allocsim {
namespace {

std::string describe(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

void check(cudaError_t e, const std::string& call) {
  if (e != cudaSuccess) throw CudaError(call + ": " + describe(e));
}

}  // namespace

// The driver calls expandable segments need, looked up once through the runtime.
struct CudaDevice::DriverApi {
  decltype(&::cuMemAddressReserve) address_reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;

  template <typename Fn>
  static void load(Fn*& fn, const char* symbol) {
    void* address = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check(cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found),
          std::string("cudaGetDriverEntryPointByVersion(") + symbol + ")");
    if (found != cudaDriverEntryPointSuccess || address == nullptr) {
      throw CudaError(std::string("the CUDA driver has no ") + symbol);
    }
    fn = reinterpret_cast<Fn*>(address);
  }

  void expect(CUresult r, const std::string& call) const {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    if (error_name == nullptr || error_name(r, &name) != CUDA_SUCCESS) name = nullptr;
    throw CudaError(call + ": " + (name ? name : "CUresult " + std::to_string(r)));
  }
};

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = "cudaGetDeviceCount: " + describe(e);
    return 0;
  }
  if (count == 0 && why) *why = "cudaGetDeviceCount: no CUDA device";
  return count;
}

CudaDevice::CudaDevice(int ordinal) : driver_(std::make_unique<DriverApi>()) {
  info_.ordinal = ordinal;
  check(cudaSetDevice(ordinal), "cudaSetDevice(" + std::to_string(ordinal) + ")");
  check(cudaFree(nullptr), "creating the CUDA context (cudaFree(0))");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  info_.name = prop.name;
  info_.total = prop.totalGlobalMem;
  check(cudaDriverGetVersion(&info_.driver_version), "cudaDriverGetVersion");
  check(cudaRuntimeGetVersion(&info_.runtime_version), "cudaRuntimeGetVersion");
  DriverApi& d = *driver_;
  DriverApi::load(d.error_name, "cuGetErrorName");
  DriverApi::load(d.address_reserve, "cuMemAddressReserve");
  DriverApi::load(d.address_free, "cuMemAddressFree");
  DriverApi::load(d.create, "cuMemCreate");
  DriverApi::load(d.release, "cuMemRelease");
  DriverApi::load(d.map, "cuMemMap");
  DriverApi::load(d.unmap, "cuMemUnmap");
  DriverApi::load(d.set_access, "cuMemSetAccess");
}

CudaDevice::~CudaDevice() = default;

DeviceMemInfo CudaDevice::mem_get_info() const {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return {free, total};
}

void CudaDevice::note_charge(bool map, uint64_t size, uint64_t free_before) {
  const uint64_t free_after = mem_get_info().free;
  charges_.push_back({map, size, free_before > free_after ? free_before - free_after : 0});
}

std::optional<uint64_t> CudaDevice::malloc(uint64_t size) {
  const uint64_t free_before = measure_charges_ ? mem_get_info().free : 0;
  void* ptr = nullptr;
  const cudaError_t e = cudaMalloc(&ptr, size);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // an OOM is not sticky: clear it, as PyTorch does
    return std::nullopt;
  }
  check(e, "cudaMalloc(" + std::to_string(size) + ")");
  ++segments_;
  if (measure_charges_) note_charge(false, size, free_before);
  return reinterpret_cast<uint64_t>(ptr);
}

void CudaDevice::free(uint64_t address, uint64_t size) {
  check(cudaFree(reinterpret_cast<void*>(address)),
        "cudaFree(" + std::to_string(address) + ", " + std::to_string(size) + " bytes)");
  --segments_;
}

std::optional<uint64_t> CudaDevice::reserve_address(uint64_t size, uint64_t alignment) {
  // Alignment 0, as PyTorch asks: the driver's default alignment suits whole pages, and an
  // alignment that is not a power of two (20 MiB pages) is refused.
  CUdeviceptr ptr = 0;
  const CUresult r = driver_->address_reserve(&ptr, size, 0, 0, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return std::nullopt;
  driver_->expect(r, "cuMemAddressReserve(" + std::to_string(size) + ")");
  // Pages are mapped at base + i * page: the base need only be aligned to the driver's 2 MiB
  // granularity (compute-sanitizer's reservations, for one, are not aligned to 20 MiB pages).
  const uint64_t needed = std::min<uint64_t>(alignment, kDriverGranularity);
  if (needed != 0 && ptr % needed != 0) {
    driver_->expect(driver_->address_free(ptr, size), "cuMemAddressFree");
    throw CudaError("cuMemAddressReserve(" + std::to_string(size) + ") returned an address not " +
                    std::to_string(needed) + "-byte aligned");
  }
  reservations_.push_back(ptr);
  return static_cast<uint64_t>(ptr);
}

void CudaDevice::release_address(uint64_t address, uint64_t size) {
  driver_->expect(driver_->address_free(address, size),
                  "cuMemAddressFree(" + std::to_string(address) + ")");
}

void CudaDevice::release_pages(uint64_t address, uint64_t count, uint64_t page_size) {
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t page = address + i * page_size;
    const auto it = handles_.find(page);
    if (it == handles_.end())
      throw CudaError("unmap of a page never mapped: " + std::to_string(page));
    driver_->expect(driver_->unmap(page, page_size), "cuMemUnmap(" + std::to_string(page) + ")");
    driver_->expect(driver_->release(it->second), "cuMemRelease");
    handles_.erase(it);
  }
}

bool CudaDevice::map(uint64_t address, uint64_t size, uint64_t page_size) {
  const uint64_t free_before = measure_charges_ ? mem_get_info().free : 0;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = info_.ordinal;
  const uint64_t pages = size / page_size;
  for (uint64_t i = 0; i < pages; ++i) {
    CUmemGenericAllocationHandle handle = 0;
    const CUresult r = driver_->create(&handle, page_size, &prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      release_pages(address, i, page_size);  // all or nothing, as PyTorch's map does
      return false;
    }
    driver_->expect(r, "cuMemCreate(" + std::to_string(page_size) + ")");
    const uint64_t page = address + i * page_size;
    driver_->expect(driver_->map(page, page_size, 0, handle, 0),
                    "cuMemMap(" + std::to_string(page) + ")");
    handles_.emplace(page, handle);
  }
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  driver_->expect(driver_->set_access(address, size, &access, 1),
                  "cuMemSetAccess(" + std::to_string(address) + ")");
  if (measure_charges_) note_charge(true, size, free_before);
  return true;
}

void CudaDevice::unmap(uint64_t address, uint64_t size, uint64_t page_size) {
  // Kernels still queued may touch the pages (PyTorch synchronises here too).
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize before cuMemUnmap");
  release_pages(address, size / page_size, page_size);
}

}  // namespace allocsim
