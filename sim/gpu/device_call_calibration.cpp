#include "sim/gpu/device_call_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <functional>

namespace allocsim {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Segment sizes as the allocator asks for them: the small pool's 2 MiB, the large pool's 20 MiB
// and the rounded sizes of large requests above it.
constexpr uint64_t kSegmentSizes[] = {2 * kMiB,    4 * kMiB,    10 * kMiB,  20 * kMiB,  40 * kMiB,
                                      64 * kMiB,   128 * kMiB,  256 * kMiB, 512 * kMiB, 1024 * kMiB,
                                      2048 * kMiB, 4096 * kMiB, 8192 * kMiB};
// Ranges mapped at once: the small pool's pages are 2 MiB, the large pool's 20 MiB.
constexpr uint64_t kMapSizes[] = {2 * kMiB,   20 * kMiB,  40 * kMiB,   100 * kMiB,
                                  200 * kMiB, 500 * kMiB, 1000 * kMiB, 2000 * kMiB};

double seconds_of(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void time_segments(CudaDevice& device, int repeats, Calibration& out) {
  std::vector<CallTiming> frees;
  for (uint64_t size : kSegmentSizes) {
    if (size > device.mem_get_info().free / 2) break;
    std::vector<double> a, f;
    for (int i = 0; i <= repeats; ++i) {  // the first, a warm-up, is not kept
      std::optional<uint64_t> address;
      const double ta = seconds_of([&] { address = device.malloc(size); });
      if (!address) throw CudaError("cudaMalloc(" + std::to_string(size) + ") ran out of memory");
      const double tf = seconds_of([&] { device.free(*address, size); });
      if (i == 0) continue;
      a.push_back(ta);
      f.push_back(tf);
    }
    out.timings.push_back({DeviceOpKind::kSegmentAlloc, size, median(a)});
    frees.push_back({DeviceOpKind::kSegmentFree, size, median(f)});
  }
  out.timings.insert(out.timings.end(), frees.begin(), frees.end());
}

void time_maps(CudaDevice& device, int repeats, Calibration& out) {
  std::vector<CallTiming> unmaps;
  const uint64_t reserved = kMapSizes[std::size(kMapSizes) - 1];
  const std::optional<uint64_t> base = device.reserve_address(reserved, 20 * kMiB);
  if (!base) throw CudaError("cuMemAddressReserve(" + std::to_string(reserved) + ") failed");
  for (uint64_t size : kMapSizes) {
    const uint64_t page = size < 20 * kMiB ? 2 * kMiB : 20 * kMiB;
    std::vector<double> m, u;
    for (int i = 0; i <= repeats; ++i) {
      bool mapped = false;
      const double tm = seconds_of([&] { mapped = device.map(*base, size, page); });
      if (!mapped) throw CudaError("mapping " + std::to_string(size) + " bytes ran out of memory");
      const double tu = seconds_of([&] { device.unmap(*base, size, page); });
      if (i == 0) continue;
      m.push_back(tm);
      u.push_back(tu);
    }
    out.timings.push_back({DeviceOpKind::kSegmentMap, size, median(m)});
    unmaps.push_back({DeviceOpKind::kSegmentUnmap, size, median(u)});
  }
  out.timings.insert(out.timings.end(), unmaps.begin(), unmaps.end());
  device.release_address(*base, reserved);
}

}  // namespace

Calibration calibrate_device_calls(const CalibrationOptions& options) {
  CudaDevice device(options.device);
  Calibration out;
  out.device = device.info().name;
  time_segments(device, options.repeats, out);
  time_maps(device, options.repeats, out);
  return out;
}

}  // namespace allocsim
