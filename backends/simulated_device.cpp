#include "backends/simulated_device.hpp"

#include <algorithm>
#include <iterator>

namespace allocsim {
namespace {

// The model places segments above every address a recorded x86-64 trace can hold (user space
// ends below 2^47), so modelled and recorded addresses never meet.
constexpr uint64_t kModelBase = uint64_t{1} << 48;

uint64_t round_up(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace

SimulatedDevice::SimulatedDevice(uint64_t capacity, uint64_t context_bytes)
    : capacity_(capacity), context_bytes_(context_bytes), next_model_address_(kModelBase) {}

uint64_t SimulatedDevice::free_bytes() const {
  const uint64_t held = context_bytes_ + used_;
  return held >= capacity_ ? 0 : capacity_ - held;
}

DeviceMemInfo SimulatedDevice::mem_get_info() const {
  return {free_bytes(), capacity_};
}

bool SimulatedDevice::overlaps_live(uint64_t address, uint64_t size) const {
  for (const auto* ranges : {&live_, &reservations_}) {
    auto it = ranges->upper_bound(address);
    if (it != ranges->end() && it->first < address + size) return true;
    if (it != ranges->begin() && std::prev(it)->first + std::prev(it)->second > address)
      return true;
  }
  return false;
}

uint64_t SimulatedDevice::place(uint64_t size, uint64_t alignment) {
  // Never reuses an address: simple, deterministic, and blocks from different segments can
  // never be confused with one another.
  const uint64_t address = round_up(next_model_address_, alignment);
  next_model_address_ = address + round_up(size, kDriverGranularity);
  return address;
}

std::optional<uint64_t> SimulatedDevice::malloc(uint64_t size) {
  ++malloc_calls_;
  if (failing_mallocs_.count(malloc_calls_)) return std::nullopt;
  const uint64_t charged = round_up(size, kDriverGranularity);
  if (size == 0 || charged > free_bytes()) return std::nullopt;
  uint64_t address;
  if (recorded_cursor_ < recorded_segments_.size() &&
      recorded_segments_[recorded_cursor_].size == size &&
      !overlaps_live(recorded_segments_[recorded_cursor_].address, size)) {
    address = recorded_segments_[recorded_cursor_++].address;
    ++recorded_hits_;
  } else {
    if (recorded_cursor_ < recorded_segments_.size()) ++recorded_misses_;
    address = place(size, kDriverGranularity);
  }
  live_.emplace(address, size);
  used_ += charged;
  return address;
}

void SimulatedDevice::free(uint64_t address, uint64_t size) {
  live_.erase(address);
  used_ -= round_up(size, kDriverGranularity);
}

std::optional<uint64_t> SimulatedDevice::reserve_address(uint64_t size, uint64_t alignment) {
  uint64_t address;
  if (reservation_cursor_ < recorded_reservations_.size() &&
      !overlaps_live(recorded_reservations_[reservation_cursor_], size)) {
    address = recorded_reservations_[reservation_cursor_++];
    ++recorded_hits_;
  } else {
    address = place(size, alignment);
  }
  reservations_.emplace(address, size);
  return address;
}

void SimulatedDevice::release_address(uint64_t address, uint64_t) {
  reservations_.erase(address);
}

bool SimulatedDevice::map(uint64_t, uint64_t size, uint64_t) {
  ++map_calls_;
  if (failing_maps_.count(map_calls_)) return false;
  if (size > free_bytes()) return false;
  used_ += size;
  return true;
}

void SimulatedDevice::unmap(uint64_t, uint64_t size, uint64_t) {
  used_ -= size;
}

void SimulatedDevice::use_recorded_segments(std::vector<RecordedSegment> segments) {
  recorded_segments_ = std::move(segments);
  recorded_cursor_ = 0;
}

void SimulatedDevice::use_recorded_reservations(std::vector<uint64_t> bases) {
  recorded_reservations_ = std::move(bases);
  reservation_cursor_ = 0;
}

}  // namespace allocsim
