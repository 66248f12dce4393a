#include "backends/simulated_device.hpp"

#include <algorithm>
#include <iterator>

namespace allocsim {
namespace {

constexpr uint64_t kRegionChunk = uint64_t{32} << 20;
// Where the driver's first region ends when no recorded address says otherwise (a typical
// x86-64 CUDA address, below the 47-bit user-space limit).
constexpr uint64_t kFirstRegionEnd = 0x7f0000000000;
// Expandable-segment reservations: the driver puts them low; so does the model.
constexpr uint64_t kFirstReservation = uint64_t{1} << 34;

uint64_t round_up(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace

SimulatedDevice::SimulatedDevice(uint64_t capacity, uint64_t context_bytes)
    : capacity_(capacity),
      context_bytes_(context_bytes),
      next_reservation_address_(kFirstReservation) {}

uint64_t SimulatedDevice::free_bytes() const {
  const uint64_t held = context_bytes_ + used_;
  return held >= capacity_ ? 0 : capacity_ - held;
}

DeviceMemInfo SimulatedDevice::mem_get_info() const {
  return {free_bytes(), capacity_};
}

namespace {

bool overlaps(const std::map<uint64_t, uint64_t>& ranges, uint64_t address, uint64_t size) {
  auto it = ranges.upper_bound(address);
  if (it != ranges.end() && it->first < address + size) return true;
  return it != ranges.begin() && std::prev(it)->first + std::prev(it)->second > address;
}

}  // namespace

bool SimulatedDevice::overlaps_live(uint64_t address, uint64_t size) const {
  return overlaps(live_, address, size) || overlaps(reservations_, address, size);
}

void SimulatedDevice::note_region(uint64_t address, uint64_t size) {
  // The region holding a (recorded) segment: the 32 MiB chunks it touches.
  auto it = regions_.upper_bound(address);
  if (it != regions_.begin() && std::prev(it)->second > address) return;
  const uint64_t start = address / kRegionChunk * kRegionChunk;
  uint64_t end = round_up(address + size, kRegionChunk);
  if (it != regions_.end()) end = std::min(end, std::max(it->first, address + size));
  regions_.emplace(start, end);
}

void SimulatedDevice::add_freed_range(uint64_t address, uint64_t size) {
  const uint64_t end = address + size;
  auto next = freed_.upper_bound(address);
  if (next != freed_.begin() && std::prev(next)->second >= address) {  // grows the one below
    const auto below = std::prev(next);
    below->second = std::max(below->second, end);
    for (; next != freed_.end() && next->first <= below->second; next = freed_.erase(next)) {
      below->second = std::max(below->second, next->second);
    }
    return;
  }
  uint64_t merged_end = end;
  for (; next != freed_.end() && next->first <= merged_end; next = freed_.erase(next)) {
    merged_end = std::max(merged_end, next->second);
  }
  freed_.emplace_hint(next, address, merged_end);
}

void SimulatedDevice::take_freed_range(uint64_t address, uint64_t size) {
  const uint64_t end = address + size;
  auto it = freed_.upper_bound(address);
  if (it != freed_.begin()) --it;
  while (it != freed_.end() && it->first < end) {
    const auto [range_start, range_end] = *it;
    if (range_end <= address) {
      ++it;
    } else if (range_start < address) {  // keeps its start: shortened in place
      it->second = address;
      if (range_end > end) {
        freed_.emplace_hint(std::next(it), end, range_end);
        return;
      }
      ++it;
    } else {
      it = freed_.erase(it);
      if (range_end > end) {
        freed_.emplace_hint(it, end, range_end);
        return;
      }
    }
  }
}

void SimulatedDevice::start_tracking_freed_ranges() {
  tracking_freed_ = true;
  // The ranges segments were given, merged, less the live segments, in one sweep of each.
  std::sort(ever_held_.begin(), ever_held_.end());
  std::vector<std::pair<uint64_t, uint64_t>> held;  // start, end
  for (const auto& [address, size] : ever_held_) {
    if (!held.empty() && address <= held.back().second) {
      held.back().second = std::max(held.back().second, address + size);
    } else {
      held.emplace_back(address, address + size);
    }
  }
  ever_held_ = {};
  auto segment = live_.begin();
  for (const auto& [start, end] : held) {
    uint64_t cursor = start;
    for (; segment != live_.end() && segment->first < end; ++segment) {
      if (segment->first > cursor) freed_.emplace_hint(freed_.end(), cursor, segment->first);
      cursor = std::max(cursor, segment->first + round_up(segment->second, kDriverGranularity));
    }
    if (cursor < end) freed_.emplace_hint(freed_.end(), cursor, end);
  }
}

std::optional<uint64_t> SimulatedDevice::place_in_freed_range(uint64_t size) const {
  for (auto it = freed_.rbegin(); it != freed_.rend(); ++it) {
    const auto [start, end] = *it;
    if (end - start >= size && !overlaps_live(end - size, size)) return end - size;
  }
  return std::nullopt;
}

uint64_t SimulatedDevice::place_segment(uint64_t size) {
  const uint64_t needed = round_up(size, kDriverGranularity);
  if (!tracking_freed_) start_tracking_freed_ranges();
  if (const std::optional<uint64_t> freed = place_in_freed_range(needed)) {
    note_region(*freed, needed);
    return *freed;
  }
  // The lowest-addressed hole inside an existing region that fits.
  for (const auto& [start, end] : regions_) {
    uint64_t cursor = start;
    for (auto it = live_.lower_bound(start); it != live_.end() && it->first < end; ++it) {
      if (it->first >= cursor + needed) break;
      cursor = std::max(cursor, it->first + round_up(it->second, kDriverGranularity));
    }
    if (cursor + needed <= end && !overlaps_live(cursor, needed)) return cursor;
  }
  // A new region of whole chunks directly below the lowest one.
  const uint64_t region = round_up(needed, kRegionChunk);
  uint64_t top = regions_.empty() ? kFirstRegionEnd : regions_.begin()->first;
  if (top < region + kFirstReservation)
    top = std::prev(regions_.end())->second + region;  // no room below
  const uint64_t start = top - region;
  regions_.emplace(start, top);
  return start;
}

uint64_t SimulatedDevice::place_reservation(uint64_t size, uint64_t alignment) {
  // Above every reservation made so far, recorded ones included.
  uint64_t start = next_reservation_address_;
  if (!reservations_.empty()) {
    const auto last = std::prev(reservations_.end());
    start = std::max(start, last->first + last->second);
  }
  const uint64_t address = round_up(start, alignment);
  next_reservation_address_ = address + round_up(size, kDriverGranularity);
  return address;
}

std::optional<uint64_t> SimulatedDevice::malloc(uint64_t size) {
  const uint64_t charged = round_up(size, kDriverGranularity);
  // A size within a granule of 2^64 (large_segment_size_mb:-1 asks for one) wraps to nothing.
  if (size == 0 || charged < size || (!overcommit_ && charged > free_bytes())) return std::nullopt;
  uint64_t address;
  while (recorded_cursor_ == recorded_segments_.size() && read_more_ && read_more_()) {
  }
  // A recorded address is used only where a real cudaMalloc could have returned it.
  if (recorded_cursor_ < recorded_segments_.size() &&
      recorded_segments_[recorded_cursor_].size == size &&
      recorded_segments_[recorded_cursor_].address % 512 == 0 &&
      recorded_segments_[recorded_cursor_].address != 0 &&
      recorded_segments_[recorded_cursor_].address <= UINT64_MAX / 2 &&
      !overlaps_live(recorded_segments_[recorded_cursor_].address, size)) {
    address = recorded_segments_[recorded_cursor_++].address;
    ++recorded_hits_;
    note_region(address, charged);
  } else {
    if (recorded_cursor_ < recorded_segments_.size()) ++recorded_misses_;
    address = place_segment(size);
    ++placed_by_model_;
  }
  live_.emplace(address, size);
  if (tracking_freed_) {
    take_freed_range(address, charged);
  } else {
    ever_held_.emplace_back(address, charged);
  }
  used_ += charged;
  return address;
}

void SimulatedDevice::free(uint64_t address, uint64_t size) {
  live_.erase(address);
  if (tracking_freed_) add_freed_range(address, round_up(size, kDriverGranularity));
  used_ -= round_up(size, kDriverGranularity);
}

std::optional<uint64_t> SimulatedDevice::reserve_address(uint64_t size, uint64_t alignment) {
  uint64_t address;
  while (reservation_cursor_ == recorded_reservations_.size() && read_more_ && read_more_()) {
  }
  // A recorded base still reserved here was not handed out again by the driver (the trace's
  // segment kept its range): the next one is.
  while (reservation_cursor_ < recorded_reservations_.size() &&
         reservations_.count(recorded_reservations_[reservation_cursor_])) {
    ++reservation_cursor_;
    while (reservation_cursor_ == recorded_reservations_.size() && read_more_ && read_more_()) {
    }
  }
  if (reservation_cursor_ < recorded_reservations_.size() &&
      recorded_reservations_[reservation_cursor_] % kDriverGranularity == 0 &&
      recorded_reservations_[reservation_cursor_] != 0 &&
      recorded_reservations_[reservation_cursor_] <= UINT64_MAX / 2 &&
      !overlaps(live_, recorded_reservations_[reservation_cursor_], size) &&
      !reservations_.count(recorded_reservations_[reservation_cursor_])) {
    // A reservation's size is modelled from the capacity (1 1/8 of it), which may not be the
    // recorded device's: a recorded base inside another's modelled range is still where the
    // driver put it.
    address = recorded_reservations_[reservation_cursor_++];
    ++recorded_hits_;
  } else {
    address = place_reservation(size, alignment);
    ++placed_by_model_;
  }
  reservations_.emplace(address, size);
  return address;
}

void SimulatedDevice::release_address(uint64_t address, uint64_t) {
  reservations_.erase(address);
}

bool SimulatedDevice::map(uint64_t, uint64_t size, uint64_t) {
  if (!overcommit_ && size > free_bytes()) return false;
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
